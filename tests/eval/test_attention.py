"""Verb/object attention plumbing on toy models with known attention patterns."""

from __future__ import annotations

import pytest
import torch
from eval_toys import WORDS, BigramLM, ObjectParser, RampAttentionMLM

from structpe.eval.attention import attention_between, evaluate_attention, plot, verb_object

V = len(WORDS)


def test_verb_object_from_deprels():
    (p,) = ObjectParser().parse_text(["cat run the dog ."])
    assert verb_object(p) == (1, 3)


def test_attention_hand_computed(mlm_tok, tmp_path):
    base = RampAttentionMLM(torch.zeros(V, V), flat=True)
    sipe = RampAttentionMLM(torch.zeros(V, V), flat=False)
    texts = ["cat run the dog .", "dog sleep the cat ."]
    r = evaluate_attention(base, sipe, mlm_tok, ObjectParser(), sentences=texts)
    # tokens: [CLS] w1 w2 the w4 . [SEP] -> L = 7; the object "w4" is token 4
    assert r["direction"] == "verb_to_object"
    assert r["per_layer_base"] == pytest.approx([1 / 7, 1 / 7])
    assert r["per_layer_sipe"] == pytest.approx([5 / 28, 5 / 28])
    assert r["share_sipe_higher"] == 1.0
    assert r["examples"][0]["verb"] == "run" and r["examples"][0]["object"] == "dog"
    for p in plot(r, tmp_path):
        assert p.stat().st_size > 0


def test_causal_models_read_object_to_verb(tok):
    class CausalRamp(RampAttentionMLM):
        def __init__(self):
            super().__init__(torch.zeros(V, V), flat=False)
            self.config.family = "txl"

    parser = ObjectParser()
    texts = ["cat run the dog ."]
    att, direction = attention_between(CausalRamp(), tok, texts, parser.parse_text(texts), [(1, 3)])
    assert direction == "object_to_verb"
    # [BOS] cat run the dog . -> L = 6, key "run" is token 2: weight 3 / 21
    assert att[0] == pytest.approx([3 / 21, 3 / 21])


def test_model_without_attentions_is_a_clear_error(mlm_tok):
    with pytest.raises(ValueError, match="attentions"):
        attention_between(
            BigramLM(torch.zeros(V, V), family="roberta", injection="none"),
            mlm_tok,
            ["cat run the dog ."],
            ObjectParser().parse_text(["cat run the dog ."]),
            [(1, 3)],
        )
