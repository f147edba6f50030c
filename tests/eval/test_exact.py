"""The exact p(x) of short texts (``structpe.eval.scoring.exact``) and BLiMP's exact mode: the sum
over every tree equals the k-best marginal whose beam holds every tree (another code path), a model
that reads no tags gets its plain p(x), and BLiMP keeps the same short pairs for every model.

Tiny randomly initialised Transformer-XL models and the tokenizer of ``test_likelihood``.
"""

from __future__ import annotations

import random

import pytest
from test_likelihood import _open_sequences, every_tree, random_parse, score, tiny_txl, tok  # noqa: F401

from structpe.eval.blimp import BlimpPair, evaluate_blimp
from structpe.eval.scoring.exact import ExactScorer, every_sequence
from structpe.eval.scoring.scorer import CausalScorer


class WordParser:
    """Whitespace words with a random tree (the exact sum ignores the parse's tags)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def parse_text(self, texts):
        return [random_parse(t.strip(), self.rng) for t in texts]


def test_every_sequence_counts_the_trees():
    assert [len(every_sequence(n)) for n in range(1, 7)] == [1, 2, 8, 40, 224, 1344]
    assert len(set(every_sequence(5))) == 224


def test_exact_equals_the_marginal_whose_beam_holds_every_tree(tok):  # noqa: F811
    model = tiny_txl(tok, "input", seed=4)
    text = "the lazy dog sleeps"
    exact = ExactScorer(model, tok, WordParser(), 4)
    (got,) = exact.totals([text], WordParser(1).parse_text([text]))
    k = len(_open_sequences(3)) * 6  # every open prefix of the first 3 words is kept
    marg = score(model, tok, [every_tree(text.split())[0]], "marginal", k=k)[0]
    assert marg.meta["n_sequences"] == 40
    assert got == pytest.approx(marg.total, abs=1e-4)
    joint = score(model, tok, [every_tree(text.split())[0]], "joint")[0]
    assert got > joint.total + 1e-3  # one tree is not the sum


def test_a_model_that_reads_no_tags_gets_its_plain_likelihood(tok):  # noqa: F811
    model = tiny_txl(tok, "none")
    text = "the lazy dog sleeps"
    (got,) = ExactScorer(model, tok, WordParser(), 4).totals([text], WordParser().parse_text([text]))
    assert got == pytest.approx(CausalScorer(model, tok).score([text])[0].total, abs=1e-6)


def test_refuses_long_texts_and_limits_past_the_enumeration(tok):  # noqa: F811
    model = tiny_txl(tok, "input", seed=4)
    exact = ExactScorer(model, tok, WordParser(), 3)
    with pytest.raises(ValueError, match="over the exact limit of 3"):
        exact.totals(["the lazy dog sleeps"], WordParser().parse_text(["the lazy dog sleeps"]))
    with pytest.raises(ValueError, match="max_words must be 1..7"):
        ExactScorer(model, tok, WordParser(), 8)
    with pytest.raises(ValueError, match="parser"):
        ExactScorer(model, tok, None, 3)


def test_blimp_exact_keeps_the_same_short_pairs_for_every_model(tok):  # noqa: F811
    goods = ["the dog sleeps", "she saw funny hats near the river", "a fox jumps", "the keys are here"]
    bads = ["dog the sleeps", "she funny saw hats near the river", "fox a jumps", "the keys is here"]
    pairs = [
        BlimpPair("p", str(i), g, b, "syntax", "x") for i, (g, b) in enumerate(zip(goods, bads, strict=True))
    ]
    results = {}
    for injection in ("input", "none"):
        model = tiny_txl(tok, injection, seed=4)
        res = evaluate_blimp(
            model, tok, WordParser(), pairs=pairs, exact_max_words=4, keep_pairs=True, progress=False
        )
        assert res["likelihood"] == "exact" and res["max_words"] == 4
        assert res["n_pairs"] == 3 and res["n_pairs_considered"] == 4
        assert "3 of 4 pairs" in res["scoring"]
        results[injection] = res
    assert [p["pair_id"] for p in results["input"]["pairs"]] == ["0", "2", "3"]
    assert [p["pair_id"] for p in results["none"]["pairs"]] == ["0", "2", "3"]
    # the tag-reading model's p(x) is not its baseline's
    assert results["input"]["pairs"][0]["logp_good"] != results["none"]["pairs"][0]["logp_good"]
    with pytest.raises(ValueError, match="in place of a likelihood mode"):
        evaluate_blimp(
            tiny_txl(tok, "input"), tok, WordParser(), pairs=pairs, exact_max_words=4, likelihood="smc",
            progress=False,
        )


def test_a_word_without_a_token_of_its_own_is_left_out(tok):  # noqa: F811
    """Trees that differ only in the tags of a word that shares its first token with another would
    give the same row and be summed twice: such a text does not fit."""
    from structpe.syntax.tagged import TaggedSentence

    model = tiny_txl(tok, "input", seed=4)
    exact = ExactScorer(model, tok, WordParser(), 5)
    whole = TaggedSentence.from_heads(["the", "lazy", "dog", "sleeps"], [0, 1, 2, 3])
    # "dog" is one token: "g" starts inside it
    split = TaggedSentence.from_heads(["the", "lazy", "do", "g", "sleeps"], [0, 1, 2, 3, 4])
    assert exact.joint.encode(["the lazy dog sleeps"], [split])[0].unaligned == 1
    assert exact.fits("the lazy dog sleeps", whole)
    assert not exact.fits("the lazy dog sleeps", split)
    with pytest.raises(ValueError, match="a word without a token of its own"):
        exact.totals(["the lazy dog sleeps"], [split])
