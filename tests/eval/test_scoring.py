"""Scorer plumbing on toy models whose probabilities are known (docs/design.md §4)."""

from __future__ import annotations

import math

import pytest
import torch
from eval_toys import VOCAB, WORDS, BigramLM, ChainParser, RightNeighbourMLM
from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

from structpe.eval.ppl import evaluate_ppl
from structpe.eval.scoring.masked import MaskedScorer
from structpe.eval.scoring.scorer import CausalScorer, ScoringSpec, make_scorer
from structpe.eval.scoring.types import model_kind
from structpe.syntax.tagged import TaggedSentence

V = len(WORDS)


def test_causal_hand_computed(tok):
    table = torch.zeros(V, V)
    table[VOCAB["the"], VOCAB["dog"]] = math.log(V - 1)  # p(dog | the) = (V-1) / (2(V-1)) = 1/2
    model = BigramLM(table, injection="none")
    (s,) = CausalScorer(model, tok).score(["the dog"])
    assert s.token_ids == [VOCAB["the"], VOCAB["dog"]]
    assert s.offsets == [(0, 3), (4, 7)]
    assert s.logprobs == pytest.approx([math.log(1 / V), math.log(1 / 2)])
    assert model.calls[0]["input_ids"][0, 0].item() == VOCAB["[BOS]"]  # BOS-conditioned
    assert model.calls[0]["terminal_ids"] is None  # injection none -> no tags passed


def test_causal_tags_on_first_subword_and_batching(tok, random_table):
    model = BigramLM(random_table)
    parser = ChainParser()
    texts = ["the dogs run .", "the cat sleep", "dogs run"]
    scorer = CausalScorer(model, tok, parser, batch_size=2)
    batched = scorer.score(texts)
    one = [CausalScorer(model, tok, parser, batch_size=1).score([t])[0] for t in texts]
    for a, b in zip(batched, one, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-6)
    # expected log-probs straight from the table
    ids = [VOCAB[w] for w in ["[BOS]", "the", "dog", "##s", "run", "."]]
    lsm = torch.log_softmax(random_table, -1)
    want = [lsm[ids[i - 1], ids[i]].item() for i in range(1, len(ids))]
    assert batched[0].logprobs == pytest.approx(want, abs=1e-6)
    # tags: BOS and "##s" untagged; the words' own tags elsewhere
    model.calls.clear()
    scorer.score(["the dogs run ."])
    parse = parser.parse_text(["the dogs run ."])[0]
    t = model.calls[0]["terminal_ids"][0].tolist()
    n = model.calls[0]["nonterminal_ids"][0].tolist()
    T, N = parse.terminals, parse.nonterminals
    assert t == [-100, T[0], T[1], -100, T[2], T[3]]
    assert n == [-100, N[0], N[1], -100, N[2], N[3]]


def test_tagged_model_without_parser_is_an_error(tok, random_table):
    with pytest.raises(ValueError, match="parser"):
        CausalScorer(BigramLM(random_table), tok).score(["the dog"])


def test_pll_original_and_within_word_l2r(mlm_tok, random_table):
    model = RightNeighbourMLM(random_table)
    lsm = torch.log_softmax(random_table, -1).tolist()
    ix = VOCAB
    parser = ChainParser()
    orig = MaskedScorer(model, mlm_tok, parser, metric="original").score(["the dogs"])[0]
    l2r = MaskedScorer(model, mlm_tok, parser, metric="within_word_l2r").score(["the dogs"])[0]
    # tokens [CLS] the dog ##s [SEP]; logits at p come from the token right of p
    assert orig.token_ids == [ix["the"], ix["dog"], ix["##s"]]
    assert orig.logprobs == pytest.approx(
        [lsm[ix["dog"]][ix["the"]], lsm[ix["##s"]][ix["dog"]], lsm[ix["[SEP]"]][ix["##s"]]], abs=1e-6
    )
    # word-l2r: scoring "dog" also masks "##s", so its right neighbour is [MASK]
    assert l2r.logprobs == pytest.approx(
        [lsm[ix["dog"]][ix["the"]], lsm[ix["[MASK]"]][ix["dog"]], lsm[ix["[SEP]"]][ix["##s"]]], abs=1e-6
    )
    # masked positions carry no tag (the prior is zeroed there)
    for call in model.calls:
        masked = call["input_ids"] == ix["[MASK]"]
        assert (call["terminal_ids"][masked] == -100).all()
        assert (call["nonterminal_ids"][masked] == -100).all()


def test_pll_batched_equals_unbatched(mlm_tok, random_table):
    model = RightNeighbourMLM(random_table)
    texts = ["the dogs run .", "cat sleep", "the dog"]
    a = MaskedScorer(model, mlm_tok, ChainParser(), batch_size=3).score(texts)
    b = [MaskedScorer(model, mlm_tok, ChainParser(), batch_size=1).score([t])[0] for t in texts]
    for x, y in zip(a, b, strict=True):
        assert x.logprobs == pytest.approx(y.logprobs, abs=1e-6)


def test_hf_causal_and_masked_models(tok, mlm_tok):
    torch.manual_seed(0)
    gpt = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_layer=1, n_head=2, n_embd=16, n_positions=32)).eval()
    assert model_kind(gpt) == "causal"
    scorer = make_scorer(gpt, tok, batch_size=2)
    s = scorer.score(["the dogs run .", "cat"])
    ids = torch.tensor([[VOCAB[w] for w in ["[BOS]", "the", "dog", "##s", "run", "."]]])
    with torch.no_grad():
        lsm = torch.log_softmax(gpt(input_ids=ids).logits[0], -1)
    want = [lsm[i - 1, ids[0, i]].item() for i in range(1, ids.shape[1])]
    assert s[0].logprobs == pytest.approx(want, abs=1e-5)
    assert s[0].likelihood == "plain"
    cfg = BertConfig(
        vocab_size=V, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    bert = BertForMaskedLM(cfg).eval()
    assert model_kind(bert) == "masked"
    pll = make_scorer(bert, mlm_tok).score(["the dogs"])[0]
    assert len(pll.logprobs) == 3 and all(lp < 0 for lp in pll.logprobs)


def test_uniform_model_perplexity_is_vocab_size(tok):
    model = BigramLM(torch.zeros(V, V), injection="none")
    sents = [
        TaggedSentence.from_heads(["the", "dog", "run", "."], [2, 3, 0, 3]),
        TaggedSentence.from_heads(["cat", "sleep"], [2, 0]),
    ]
    r = evaluate_ppl(model, tok, sents, progress=False)
    assert r["token_ppl"] == pytest.approx(V)
    assert r["word_ppl"] == pytest.approx(V)  # one token per word here
    r2 = evaluate_ppl(model, tok, [TaggedSentence.from_heads(["dogs"], [0])], progress=False)
    assert r2["token_ppl"] == pytest.approx(V)
    assert r2["word_ppl"] == pytest.approx(V**2)  # two tokens, one word
    r3 = evaluate_ppl(model, tok, sents, append_eos=True, progress=False)
    assert r3["token_ppl"] == pytest.approx(V) and r3["n_tokens"] == r["n_tokens"] + 2


def test_scoring_spec_and_keywords_agree(tok, random_table):
    """One ScoringSpec carries the options; the old keyword arguments still work and override it."""
    model = BigramLM(random_table, injection="none")
    spec = ScoringSpec(append_eos=True, batch_size=1)
    scorer = make_scorer(model, tok, spec=spec)
    assert isinstance(scorer, CausalScorer) and scorer.append_eos and scorer.batch_size == 1
    assert make_scorer(model, tok, spec=spec, batch_size=4).batch_size == 4  # a keyword overrides the spec
    sents = [TaggedSentence.from_heads(["the", "dog", "run", "."], [2, 3, 0, 3])]
    by_spec = evaluate_ppl(model, tok, sents, spec=spec, progress=False)
    by_keywords = evaluate_ppl(model, tok, sents, append_eos=True, batch_size=1, progress=False)
    assert by_spec["token_ppl"] == by_keywords["token_ppl"] and by_spec["n_tokens"] == by_keywords["n_tokens"]
    with pytest.raises(TypeError):
        make_scorer(model, tok, spec=spec, beam=3)  # not a ScoringSpec field


def test_unknown_likelihood_mode_is_an_error(tok, random_table):
    # joint and marginal are tested in tests/eval/test_likelihood.py
    with pytest.raises(ValueError, match="not available"):
        CausalScorer(BigramLM(random_table), tok, likelihood="pseudo")
