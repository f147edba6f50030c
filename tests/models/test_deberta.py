"""DeBERTa-v3-style SiPE encoder: parity with transformers, PP-SiPE equations, MLM rule, save/load."""

from __future__ import annotations

import math

import pytest
import torch
from sipe_encoder_checks import (
    INPUT_AND_POSITION_VARIANTS,
    TINY_HF,
    assert_checkpoint_directory_loads,
    assert_classification_parity,
    assert_classification_roundtrip_and_attentions,
    assert_hf_grad_parity,
    assert_hf_parity,
    assert_masked_positions_blind,
    assert_roundtrip,
    assert_training_lowers_loss,
    assert_zeroed_prior_is_baseline,
    randomize_position_prior,
    tiny_batch,
    tiny_model,
)
from transformers import DebertaV2Config, DebertaV2ForMaskedLM, DebertaV2ForSequenceClassification
from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

from structpe.models.deberta import DebertaSiPEForMaskedLM, from_hf, log_bucket

PAD = 0
LENGTH = 20  # > position_buckets / 2, so the log buckets are exercised


def hf_config(**kw) -> DebertaV2Config:
    base = dict(
        TINY_HF,
        max_position_embeddings=64,
        relative_attention=True,
        position_buckets=8,
        max_relative_positions=32,
        pos_att_type=["p2c", "c2p"],
        share_att_key=True,
        norm_rel_ebd="layer_norm",
        position_biased_input=False,
        type_vocab_size=0,
        pad_token_id=PAD,
        layer_norm_eps=1e-7,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    base.update(kw)
    return DebertaV2Config(**base)


@pytest.fixture(scope="module")
def hf_mlm() -> DebertaV2ForMaskedLM:
    torch.manual_seed(0)
    return DebertaV2ForMaskedLM(hf_config()).eval()


@pytest.fixture(scope="module")
def batch() -> dict:
    return tiny_batch(64, PAD, length=LENGTH)


VARIANTS = INPUT_AND_POSITION_VARIANTS


def test_log_buckets_match_transformers():
    rel = torch.arange(-600, 601)
    for buckets, max_pos in ((256, 512), (8, 32), (32, 128)):
        torch.testing.assert_close(
            log_bucket(rel, buckets, max_pos), make_log_bucket_position(rel, buckets, max_pos).long()
        )


@pytest.mark.parametrize("legacy", [True, False])
def test_parity_with_transformers(batch, legacy):
    torch.manual_seed(0)
    hf = DebertaV2ForMaskedLM(hf_config(legacy=legacy)).eval()
    assert_hf_parity(hf, from_hf(hf), batch)


def test_gradients_match_transformers(batch):
    """The relative table gets its gradient through the SDPA bias exactly as through eager DeBERTa."""
    torch.manual_seed(5)
    hf = DebertaV2ForMaskedLM(hf_config())
    pairs = {
        "backbone.embeddings.word.weight": "deberta.embeddings.word_embeddings.weight",
        "backbone.rel.table.weight": "deberta.encoder.rel_embeddings.weight",
        "backbone.rel.norm.weight": "deberta.encoder.LayerNorm.weight",
    }
    assert_hf_grad_parity(hf, from_hf(hf), batch, pairs)


def test_parity_without_buckets_and_with_segments(batch):
    torch.manual_seed(2)
    hf = DebertaV2ForMaskedLM(
        hf_config(position_buckets=-1, max_relative_positions=8, type_vocab_size=2)
    ).eval()
    assert_hf_parity(hf, from_hf(hf), batch)


def test_classification_head_parity(batch):
    torch.manual_seed(1)
    hf = DebertaV2ForSequenceClassification(hf_config(num_labels=3)).eval()
    assert_classification_parity(hf, from_hf(hf, head="classification"), batch)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_zeroed_prior_equals_baseline(hf_mlm, batch, name):
    assert_zeroed_prior_is_baseline(from_hf(hf_mlm, **VARIANTS[name]), from_hf(hf_mlm), batch)


def test_position_pathway_follows_eq_12_13(hf_mlm, batch):
    """Layer-1 attention = softmax([Q K^T + (1 + c)(c2p + p2c)] / sqrt(3 d)), computed naively here."""
    model = from_hf(hf_mlm, injection="position").eval()
    randomize_position_prior(model, std=0.3)  # make c large enough to matter
    with torch.no_grad():
        inputs = {
            k: batch[k] for k in ("input_ids", "attention_mask", "terminal_ids", "nonterminal_ids", "labels")
        }
        out = model(**inputs, output_attentions=True, output_hidden_states=True)
        bb = model.backbone
        layer = bb.layers[0]
        x = out.hidden_states[0]
        bsz, length, d = x.shape
        n_heads, dh = layer.n_heads, layer.d_head

        def heads(t):  # [..., L, d] -> [..., H, L, dh]
            return t.view(*t.shape[:-1], n_heads, dh).transpose(-3, -2)

        q, k, _ = (heads(t) for t in layer.qkv(x).split(d, dim=-1))
        table = bb.rel.norm(bb.rel.table.weight)  # the whole LayerNorm'd table, as transformers uses it
        w_q, w_k, _ = layer.qkv.weight.split(d)
        b_q, b_k, _ = layer.qkv.bias.split(d)
        pos_q, pos_k = heads(table @ w_q.T + b_q), heads(table @ w_k.T + b_k)
        span = bb.rel.span
        i = torch.arange(length)
        rows = (log_bucket(i[:, None] - i[None, :], 8, 32) + span).clamp(0, 2 * span - 1)
        c2p = torch.einsum("bhid,hijd->bhij", q, pos_k[:, rows])
        p2c = torch.einsum("bhjd,hijd->bhij", k, pos_q[:, rows])
        keep = batch["labels"] == -100  # the prior is zero at masked positions
        prior = bb.prior(batch["terminal_ids"], batch["nonterminal_ids"], keep=keep)
        tag_keys = heads(bb.prior_proj.proj["0"](prior))  # W_E prior_j per head [B, H, L, dh]
        c = torch.einsum("bhid,bhjd->bhij", q, tag_keys) / math.sqrt(dh)
        scores = (q @ k.transpose(-1, -2) + (1 + c) * (c2p + p2c)) / math.sqrt(3 * dh)
        m = batch["attention_mask"].bool()
        scores = scores.masked_fill(
            ~(m[:, None, :, None] & m[:, None, None, :]), torch.finfo(scores.dtype).min
        )
        expected = scores.softmax(-1)
    assert c.abs().max() > 0.1
    torch.testing.assert_close(out.attentions[0], expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", [v for v in VARIANTS if v != "none"])
def test_masked_positions_never_see_their_prior(hf_mlm, batch, name):
    model = from_hf(hf_mlm, **VARIANTS[name])
    if model.config.uses_position_prior:  # a visible effect at unmasked positions needs W_E away from 0
        randomize_position_prior(model, std=0.3, tables=False)
    assert_masked_positions_blind(model, batch)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_training_steps_lower_the_loss(batch, name):
    model = tiny_model(
        "deberta",
        type_vocab_size=0,
        position_buckets=8,
        max_relative_positions=32,
        pad_token_id=PAD,
        **VARIANTS[name],
    )
    assert_training_lowers_loss(model, batch)


@pytest.mark.parametrize("name", ["none", "input", "position"])
def test_save_load_roundtrip(hf_mlm, batch, tmp_path, name):
    assert_roundtrip(from_hf(hf_mlm, **VARIANTS[name]), batch, tmp_path)


def test_classification_roundtrip_and_attentions(hf_mlm, batch, tmp_path):
    assert_classification_roundtrip_and_attentions(from_hf, hf_mlm, "position", batch, tmp_path)


def test_checkpoint_directory_loads(hf_mlm, batch, tmp_path):
    assert_checkpoint_directory_loads(from_hf, hf_mlm, DebertaSiPEForMaskedLM, "position", batch, tmp_path)


def test_non_v3_layouts_are_refused():
    torch.manual_seed(0)
    hf = DebertaV2ForMaskedLM(hf_config(share_att_key=False))
    with pytest.raises(ValueError, match="share_att_key"):
        from_hf(hf)
