"""The particle estimate of p(x) (``smc``): unbiased against brute-force enumeration, converging,
leak-free over shared prefixes, exact for a model that reads no tags, the same with and without the
key/value cache.

Tiny randomly initialised Transformer-XL models and the tokenizer of ``test_likelihood``.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest
import torch
from test_likelihood import every_tree, random_parse, score, tiny_txl, tok  # noqa: F401  (tok: a fixture)

from structpe.eval.scoring import likelihood as lk
from structpe.eval.scoring import smc_particles
from structpe.eval.scoring.scorer import CausalScorer
from structpe.eval.scoring.smc import smc_scores
from structpe.eval.scoring.smc_particles import ParticleSystem
from structpe.eval.scoring.smc_views import (
    FLIP_SHARE_MAX,
    convergence,
    estimator_converged,
    view_scores,
    views,
)
from structpe.models.txl_cache import SiPECache

TEXT = "the lazy dog sleeps"


def _ratios(model, tok, parse, n: int, systems: int, seed: int) -> list[float]:  # noqa: F811
    sc = CausalScorer(model, tok, likelihood="smc", particles=n, seed=seed)
    res = smc_scores(sc, sc.encode([TEXT], [parse]), n, seed, systems=systems)[0]
    return [math.exp(c) for c in res.meta["closed"]]


def test_estimate_is_unbiased_for_the_exact_sum_and_its_spread_shrinks(tok):  # noqa: F811
    """Exact p(x): the joint summed over every well-formed tag sequence of the 4 words (40 trees).
    The mean of independent systems is within 3 standard errors of it; the spread falls with N."""
    model = tiny_txl(tok, "input", seed=4)
    trees = every_tree(TEXT.split())
    exact = math.exp(lk.log_sum_exp([j.total for j in score(model, tok, trees, "joint")]))
    spread = {}
    for n in (4, 64):
        z = [x / exact for x in _ratios(model, tok, trees[0], n, systems=200, seed=n)]
        mean, sd = statistics.mean(z), statistics.stdev(z)
        se = sd / math.sqrt(len(z))
        assert abs(mean - 1) < 3 * se, (n, mean, se)
        spread[n] = sd
    assert spread[64] < spread[4] / 2


def test_estimate_matches_a_wrong_proposal_weight_check(tok, monkeypatch):  # noqa: F811
    """The check above can fail: dropping the allowed mass from the weights (p / q taken as 1)
    biases the estimate by many standard errors."""
    model = tiny_txl(tok, "input", seed=4)
    trees = every_tree(TEXT.split())
    exact = math.exp(lk.log_sum_exp([j.total for j in score(model, tok, trees, "joint")]))
    real = ParticleSystem.propose

    def no_mass(self, tables, max_after=None):
        pair, depth, log_mass = real(self, tables, max_after)
        return pair, depth, torch.where(torch.isfinite(log_mass), 0.0, log_mass)

    monkeypatch.setattr(ParticleSystem, "propose", no_mass)
    z = [x / exact for x in _ratios(model, tok, trees[0], 16, systems=200, seed=3)]
    se = statistics.stdev(z) / math.sqrt(len(z))
    assert abs(statistics.mean(z) - 1) > 3 * se


@pytest.mark.parametrize(
    "injection,append_eos,proposal",
    [("input", False, "prior"), ("position+attn_bias", True, "prior"), ("lis_tree", False, "prior"),
     ("position+attn_bias", True, "parse")],
)
def test_cached_equals_uncached(tok, injection, append_eos, proposal, monkeypatch):  # noqa: F811
    """The same random numbers with and without the key/value cache give the same estimates, for
    every system, position and sentence of a batch (row moves, closing rows and compaction;
    resampling at every word where the weights differ at all)."""
    monkeypatch.setattr(smc_particles, "RESAMPLE_ESS", 1.0 - 1e-9)
    model = tiny_txl(tok, injection, seed=6)
    rng = random.Random(0)
    texts = [
        TEXT,
        "she saw funny hats near the warm river",
        "a fox",
        "the keys to the brown cabinet are on the table",
    ]
    parses = [random_parse(t, rng) for t in texts]
    sc = CausalScorer(
        model, tok, likelihood="smc", particles=8, seed=5, append_eos=append_eos, proposal=proposal
    )
    enc = sc.encode(texts, parses)
    ref = smc_scores(sc, enc, use_cache=False)
    got = sc.score(texts, parses)
    for a, b in zip(got, ref, strict=True):
        assert a.meta["resamplings"] == b.meta["resamplings"]
        for r in range(len(a.meta["open"])):
            assert a.meta["open"][r] == pytest.approx(b.meta["open"][r], abs=1e-4)
        assert a.meta["closed"] == pytest.approx(b.meta["closed"], abs=1e-4)
        assert a.total == pytest.approx(b.total, abs=1e-4)
    assert sum(sum(x.meta["resamplings"]) for x in got) > 0  # the resampling path ran


def test_a_model_that_reads_no_tags_gets_exactly_its_likelihood(tok):  # noqa: F811
    model = tiny_txl(tok, "none")
    texts = [TEXT, "a fox"]
    plain = CausalScorer(model, tok, likelihood="conditional").score(texts)
    for a, b in zip(CausalScorer(model, tok, likelihood="smc", particles=4).score(texts), plain, strict=True):
        assert a.logprobs == b.logprobs and a.total == b.total


def test_resampling_keeps_the_estimate_and_the_survivors_rows():
    s = ParticleSystem(seed=1, n=8)
    s.logw = torch.tensor([0.0, -9.0, -9.0, -9.0, -9.0, -9.0, -9.0, 2.0], dtype=torch.float64)
    s.next_lp = torch.zeros(8, 10, dtype=torch.float64)
    s.terminals = [[j] for j in range(8)]
    before = s.estimate()
    parent = s.resample()
    assert parent is not None and s.resamplings == 1
    assert s.estimate() == pytest.approx(before, abs=1e-12)
    assert all(parent[p] == p for p in set(parent))  # a particle with offspring keeps its index
    assert set(parent) <= {0, 7} and s.terminals == [[p] for p in parent]
    even = ParticleSystem(seed=1, n=8)
    even.next_lp = torch.zeros(8, 10, dtype=torch.float64)
    assert even.resample() is None  # ESS = N: no resampling


def test_cache_row_moves_equal_a_full_gather(tok):  # noqa: F811
    """Copying the rows whose parent changed in place (SiPECache.copy_rows) continues exactly as
    gathering the whole cache to the same parents (batch_select_indices)."""
    model = tiny_txl(tok, "input", seed=2)
    ids = torch.randint(4, len(tok), (5, 6))
    terms = torch.tensor([[0, -100, 1, 0, -100, 1]] * 5)
    nts = torch.tensor([[1, -100, 0, 2, -100, 1]] * 5)
    parent = torch.tensor([0, 0, 4, 3, 4])

    def run(reorder):
        out = model(
            ids[:, :3],
            cache=SiPECache(),
            use_cache=True,
            terminal_ids=terms[:, :3],
            nonterminal_ids=nts[:, :3],
        )
        reorder(out.cache)
        nxt = ids[parent, 3:]
        return model(
            nxt, cache=out.cache, use_cache=True, terminal_ids=terms[:, 3:], nonterminal_ids=nts[:, 3:]
        ).logits

    a = run(lambda c: c.copy_rows(torch.tensor([1, 2]), torch.tensor([0, 4])))
    b = run(lambda c: c.batch_select_indices(parent))
    assert torch.allclose(a, b, atol=1e-5)
    assert not torch.allclose(a, run(lambda c: None), atol=1e-3)  # the moves matter


def test_flip_share_and_stderr_of_the_budgets():
    names = views(5)
    assert names["score"] == [1, 2, 3, 4] and names["check"] == [0] and names["jk2"] == [1, 3, 4]
    scores = {"score": 0.6, "check": 0.5, "jk1": 0.6, "jk2": 0.7, "jk3": 0.5, "jk4": 0.6}
    decisions = {v: [True, True, False, True] for v in names}
    decisions["check"] = [True, False, False, True]
    out = convergence(lambda v: (scores[v], decisions[v]), particles=16)
    assert out["flip_share"] == 0.25 and out["particles"] == 16 and out["score_at_n"] == 0.5
    assert out["stderr"] == pytest.approx(math.sqrt(3 / 4 * 0.02))
    assert not estimator_converged(out["flip_share"]) and estimator_converged(FLIP_SHARE_MAX)
    assert not estimator_converged(None)
    assert "stderr_method" not in out
    # per-decision budgets: the bound from the independent check, sqrt(sum_d w_d^2 flip_d / 2)
    out = convergence(lambda v: (scores[v], decisions[v]), particles=16, weights=[0.25] * 4)
    assert out["stderr"] == pytest.approx(math.sqrt(0.25**2 / 2)) and out["stderr_method"] == "flip bound"


def test_views_pool_the_systems(tok):  # noqa: F811
    model = tiny_txl(tok, "input", seed=4)
    sc = CausalScorer(model, tok, likelihood="smc", particles=4, seed=0)
    ts = sc.score([TEXT], [random_parse(TEXT, random.Random(1))])[0]
    pooled = view_scores(ts, views()["score"])
    assert pooled.total == pytest.approx(ts.total) and pooled.logprobs == pytest.approx(ts.logprobs)
    one = view_scores(ts, [0])
    assert one.total == pytest.approx(ts.meta["closed"][0])
    assert sum(one.logprobs) == pytest.approx(ts.meta["open"][0][-1])


def test_blimp_and_ppl_record_the_budgets(tok):  # noqa: F811
    """BLiMP and perplexity in smc mode: the score at 4N, the check at N, the flip share of pair
    decisions, the jackknife standard error, N; and the study's flat keys carry them."""
    from structpe.eval.blimp import BlimpPair, evaluate_blimp
    from structpe.eval.ppl import evaluate_ppl
    from structpe.study.stages.blimp import blimp_scores
    from structpe.study.stages.cell import flat
    from structpe.study.stages.ppl import ppl_scores

    model = tiny_txl(tok, "input", seed=4)
    rng = random.Random(2)
    goods = ["the lazy dog sleeps", "she saw funny hats", "a fox jumps", "the keys are on the table"]
    bads = ["the dog lazy sleeps", "she funny saw hats", "fox a jumps", "the keys is on the table"]
    pairs = [
        BlimpPair("p", str(i), g, b, "syntax", "x") for i, (g, b) in enumerate(zip(goods, bads, strict=True))
    ]

    class Parser:
        def parse_text(self, texts):
            return [random_parse(t.strip(), rng) for t in texts]

    res = evaluate_blimp(model, tok, Parser(), pairs=pairs, likelihood="smc", particles=4, progress=False)
    assert res["particles"] == 4 and res["decisions"] == 4 and 0 <= res["flip_share"] <= 1
    assert res["stderr"] >= 0 and 0 <= res["score_at_n"] <= 1
    keys = flat("blimp.smc", blimp_scores(res))
    assert {"blimp.smc.overall", "blimp.smc.flip_share", "blimp.smc.particles", "blimp.smc.stderr"} <= set(
        keys
    )
    sents = [random_parse(g, rng) for g in goods]
    ppl = evaluate_ppl(model, tok, sents, likelihood="smc", particles=4, progress=False)
    assert ppl["particles"] == 4 and ppl["stderr"] > 0 and "flip_share" not in ppl
    assert ppl["word_ppl_at_n"] > 0
    keys = flat("ppl.smc", ppl_scores(ppl))
    assert {"ppl.smc.word_ppl", "ppl.smc.stderr", "ppl.smc.particles"} <= set(keys)


@pytest.mark.parametrize("proposal", ["prior", "adapted"])
def test_prefix_estimate_is_unbiased_for_the_open_prefix_marginal(tok, proposal):  # noqa: F811
    """The open estimate of a prefix (what a region's surprisal is made of) against the brute-force
    sum of p(prefix, T) over every open tag sequence of its words (no closing, no length)."""
    from types import SimpleNamespace

    from test_likelihood import _open_sequences

    model = tiny_txl(tok, "input", seed=7)
    words = ["the", "lazy", "dog"]
    tagged = [
        SimpleNamespace(words=words, terminals=[a for a, _ in q], nonterminals=[b for _, b in q])
        for q in _open_sequences(len(words))
    ]
    exact = math.exp(lk.log_sum_exp([j.total for j in score(model, tok, tagged, "joint")]))
    sc = CausalScorer(model, tok, likelihood="smc", particles=8, seed=11, proposal=proposal)
    res = smc_scores(sc, sc.encode([" ".join(words)], [tagged[0]]), systems=200)[0]
    z = [math.exp(o[-1]) / exact for o in res.meta["open"]]
    se = statistics.stdev(z) / math.sqrt(len(z))
    assert abs(statistics.mean(z) - 1) < 3 * se, (statistics.mean(z), se)


def test_an_adapted_hugging_face_model_gets_an_unbiased_estimate(tok):  # noqa: F811
    """SiPE as an adapter on a Hugging Face LM (no key/value cache of ours): the word-synchronous
    path, unbiased for the brute-force p(x) as for our TXL."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from structpe.adapters.sipe import add_sipe

    torch.manual_seed(0)
    cfg = GPTNeoXConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4
    )
    model = add_sipe(GPTNeoXForCausalLM(cfg).eval(), "position").eval()
    with torch.no_grad():  # move the zero-initialised SiPE weights (what training does)
        for name, p in model.named_parameters():
            if not name.startswith("base."):
                p.normal_(std=0.5)
    trees = every_tree(TEXT.split())
    exact = math.exp(lk.log_sum_exp([j.total for j in score(model, tok, trees, "joint")]))
    z = [x / exact for x in _ratios(model, tok, trees[0], 8, systems=60, seed=2)]
    se = statistics.stdev(z) / math.sqrt(len(z))
    assert CausalScorer(model, tok).tagged and se > 0  # it reads tags: the estimates vary
    assert abs(statistics.mean(z) - 1) < 3 * se, (statistics.mean(z), se)


def test_adapted_proposal_is_unbiased_and_less_spread(tok):  # noqa: F811
    """The locally optimal proposal: the mean over independent systems is within 3 standard errors
    of the exact p(x) and, at the same N, its spread is below the prior proposal's; on two words
    (the first word's sum covers every factor its pair touches, the last word's move is forced)
    it is exact where the prior proposal is not."""
    model = tiny_txl(tok, "input", seed=4)
    spread = {}
    for text, n in ((TEXT, 4), ("lazy dog", 1)):
        trees = every_tree(text.split())
        exact = math.exp(lk.log_sum_exp([j.total for j in score(model, tok, trees, "joint")]))
        for proposal in ("prior", "adapted"):
            sc = CausalScorer(model, tok, likelihood="smc", particles=n, seed=7, proposal=proposal)
            res = smc_scores(sc, sc.encode([text], [trees[0]]), systems=200)[0]
            z = [math.exp(c) / exact for c in res.meta["closed"]]
            mean, sd = statistics.mean(z), statistics.stdev(z)
            # + 1e-6: float32 rounding (the exact two-word case has sd 0; its estimate and the joint
            # enumeration sum the same factors in different orders: 4e-8 apart on an Intel Xeon)
            assert abs(mean - 1) < 3 * sd / math.sqrt(len(z)) + 1e-6, (text, proposal, mean, sd)
            spread[text, proposal] = sd
    assert spread[TEXT, "adapted"] < spread[TEXT, "prior"], spread
    assert spread["lazy dog", "adapted"] < 1e-6 < spread["lazy dog", "prior"] / 100, spread


@pytest.mark.parametrize("injection,append_eos", [("input", False), ("position+attn_bias", True)])
def test_adapted_cached_equals_uncached(tok, injection, append_eos, monkeypatch):  # noqa: F811
    """The adapted proposal draws the same numbers with and without the key/value cache (children
    rows, the drawn child's copy, resampling, compaction) and gives the same estimates."""
    monkeypatch.setattr(smc_particles, "RESAMPLE_ESS", 1.0 - 1e-9)
    model = tiny_txl(tok, injection, seed=6)
    rng = random.Random(0)
    texts = [TEXT, "she saw funny hats near the warm river", "a fox"]
    parses = [random_parse(t, rng) for t in texts]
    sc = CausalScorer(
        model, tok, likelihood="smc", particles=4, seed=5, append_eos=append_eos, proposal="adapted"
    )
    enc = sc.encode(texts, parses)
    ref = smc_scores(sc, enc, use_cache=False)
    got = sc.score(texts, parses)
    for a, b in zip(got, ref, strict=True):
        assert a.meta["proposal"] == "adapted" and a.meta["resamplings"] == b.meta["resamplings"]
        for r in range(len(a.meta["open"])):
            assert a.meta["open"][r] == pytest.approx(b.meta["open"][r], abs=1e-4)
        assert a.meta["closed"] == pytest.approx(b.meta["closed"], abs=1e-4)
        assert a.total == pytest.approx(b.total, abs=1e-4)
    assert sum(sum(x.meta["resamplings"]) for x in got) > 0


def test_adapted_proposal_on_a_model_that_reads_no_tags_is_exact(tok):  # noqa: F811
    model = tiny_txl(tok, "none")
    texts = [TEXT, "a fox"]
    plain = CausalScorer(model, tok, likelihood="conditional").score(texts)
    got = CausalScorer(model, tok, likelihood="smc", particles=4, proposal="adapted").score(texts)
    for a, b in zip(got, plain, strict=True):
        assert a.logprobs == b.logprobs and a.total == b.total


@pytest.mark.parametrize("mix", [0.3, 0.6])
def test_parse_proposal_is_unbiased_for_the_exact_sum(tok, mix):  # noqa: F811
    """The mixture around the text's parse: the mean of independent sentence estimates is within 3
    standard errors of the exact p(x) (the 40 trees of 4 words), whichever tree the parser gave (the
    p / q factor corrects the draw). A small prior share is unbiased too, but on a random model whose
    posterior ignores the parse its rare heavy weights need far more than 200 systems to show."""
    model = tiny_txl(tok, "input", seed=4)
    trees = every_tree(TEXT.split())
    exact = math.exp(lk.log_sum_exp([j.total for j in score(model, tok, trees, "joint")]))
    for parse in (trees[0], trees[17]):
        sc = CausalScorer(model, tok, likelihood="smc", particles=4, seed=3, proposal="parse")
        res = smc_scores(sc, sc.encode([TEXT], [parse]), systems=200, parts="sentence", parse_mix=mix)[0]
        z = [math.exp(c) / exact for c in res.meta["closed"]]
        se = statistics.stdev(z) / math.sqrt(len(z))
        assert abs(statistics.mean(z) - 1) < 3 * se, (mix, statistics.mean(z), se)


def test_parse_proposal_without_its_weight_factor_is_biased(tok, monkeypatch):  # noqa: F811
    """The check above can fail: weighting a parse draw as a prior one (the allowed mass, not p / q)
    leaves the estimate many standard errors from p(x)."""
    model = tiny_txl(tok, "input", seed=4)
    trees = every_tree(TEXT.split())
    exact = math.exp(lk.log_sum_exp([j.total for j in score(model, tok, trees, "joint")]))
    around = ParticleSystem.propose_around

    def as_prior(self, tables, max_after, target, mix):
        pair, depth, _ = around(self, tables, max_after, target, mix)
        lp = self.next_lp.masked_fill(~self.allowed(tables, max_after), -math.inf)
        return pair, depth, torch.logsumexp(lp, -1)

    monkeypatch.setattr(ParticleSystem, "propose_around", as_prior)
    sc = CausalScorer(model, tok, likelihood="smc", particles=4, seed=3, proposal="parse")
    res = smc_scores(sc, sc.encode([TEXT], [trees[17]]), systems=200, parts="sentence", parse_mix=0.3)[0]
    z = [math.exp(c) / exact for c in res.meta["closed"]]
    se = statistics.stdev(z) / math.sqrt(len(z))
    assert abs(statistics.mean(z) - 1) > 5 * se, (statistics.mean(z), se)


def test_parse_proposal_keeps_the_prefix_estimates_of_the_prior(tok):  # noqa: F811
    """A prefix estimate may not read later words and the text's parse reads them all, so the open
    systems keep the prior's draws (identical estimates); with all of the mixture on the prior the
    sentence estimates are the prior's too, and the share must lie in (0, 1]."""
    model = tiny_txl(tok, "position+attn_bias", seed=6)
    texts = [TEXT, "she saw funny hats near the warm river"]
    parses = [random_parse(t, random.Random(1)) for t in texts]
    prior = CausalScorer(model, tok, likelihood="smc", particles=8, seed=5, append_eos=True)
    parse = CausalScorer(model, tok, likelihood="smc", particles=8, seed=5, append_eos=True, proposal="parse")
    a, b = prior.score(texts, parses), parse.score(texts, parses)
    whole = smc_scores(parse, parse.encode(texts, parses), parse_mix=1.0)
    for x, y, w in zip(a, b, whole, strict=True):
        assert y.meta["open"] == x.meta["open"] and y.meta["proposal"] == "parse"
        assert y.meta["closed"] != x.meta["closed"]
        assert w.meta["closed"] == pytest.approx(x.meta["closed"], abs=1e-9)
    with pytest.raises(ValueError, match="prior share"):
        smc_scores(parse, parse.encode(texts, parses), parse_mix=0.0)
