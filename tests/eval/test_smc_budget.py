"""Per-decision particle budgets (``structpe.eval.scoring.smc_budget``): unsettled decisions alone
are scored again at 4N from fresh random numbers, the rule never reads the N check, and a run whose
decisions all settle at N is the fixed-budget run.
"""

from __future__ import annotations

import random

import pytest
from test_likelihood import random_parse, tiny_txl, tok  # noqa: F401  (tok: a fixture)

from structpe.eval.scoring.smc_budget import Budgets, level_seed, settle


class FakeScorer:
    """Scores a text as (text, particles, seed); remembers every call."""

    def __init__(self, particles: int, seed: int = 7) -> None:
        self.particles, self.seed = particles, seed
        self.calls: list[tuple[int, int, list[str]]] = []

    def score(self, texts):
        self.calls.append((self.particles, self.seed, list(texts)))
        return [(t, self.particles, self.seed) for t in texts]


# per decision: the replicates' margins at each N (systems 1-4), and the check's (system 0)
REPLICATES = {
    "clear": {2: [5.0, 5.1, 4.9, 5.0]},
    "late": {2: [1.0, -1.0, 2.0, -0.5], 8: [0.4, -0.2, 0.5, 0.1], 32: [0.50, 0.52, 0.49, 0.51]},
    "tie": {2: [1.0, -1.0, 1.0, -1.0], 8: [0.5, -0.5, 0.5, -0.5], 32: [0.2, -0.2, 0.2, -0.2]},
}
CHECK_FLIPS_SIGN = {"clear": True}  # the check would disagree: the rule must not look at it


def margin(scores, systems):
    (text, n, _), _second = scores
    reps = REPLICATES[text][n]
    if systems == [0]:
        return -reps[0] if CHECK_FLIPS_SIGN.get(text) else reps[0]
    return sum(reps[r - 1] for r in systems) / len(systems)


def test_only_unsettled_decisions_get_more_particles_from_fresh_numbers():
    sc = FakeScorer(particles=2)
    texts = [(name, name + "-bad") for name in REPLICATES]
    scores, budgets = settle(sc, texts, margin, particles_max=32, z=4.0)
    # level by level: every decision at 2, the two unsettled at 8, the same two at 32
    assert [(n, len(t)) for n, _, t in sc.calls] == [(2, 6), (8, 4), (32, 4)]
    # first texts, then second texts (BLiMP: goods then bads, the fixed-budget order)
    assert sc.calls[0][2] == ["clear", "late", "tie", "clear-bad", "late-bad", "tie-bad"]
    # level 0 keeps the scorer's seed; each later level its own
    seeds = [s for _, s, _ in sc.calls]
    assert seeds[0] == 7 and len(set(seeds)) == 3 and seeds[1] == level_seed(7, 1)
    assert budgets.final == [2, 32, 32] and budgets.unsettled == 1  # "tie" never settles
    assert [s[0][1] for s in scores] == [2, 32, 32]  # each decision keeps its last budget's scores
    assert sc.particles == 2 and sc.seed == 7  # the caller's scorer is left as it was
    rec = budgets.record()
    assert rec["budgets"] == {"2": 1, "32": 2} and rec["unsettled"] == 1 and rec["particles_max"] == 32


def test_the_budget_stops_at_particles_max_and_refuses_less_than_n():
    sc = FakeScorer(particles=2)
    _, budgets = settle(sc, [("tie", "tie-bad")], margin, particles_max=31, z=4.0)
    assert [n for n, _, _ in sc.calls] == [2, 8] and budgets.final == [8] and budgets.unsettled == 1
    with pytest.raises(ValueError, match="particles_max"):
        settle(FakeScorer(particles=8), [("tie", "x")], margin, particles_max=4)
    joined = Budgets.joined([budgets, budgets])
    assert joined.final == [8, 8] and joined.unsettled == 2


def _pairs():
    from structpe.eval.blimp import BlimpPair

    goods = ["the lazy dog sleeps", "she saw funny hats", "a fox jumps", "the keys are on the table"]
    bads = ["the dog lazy sleeps", "she funny saw hats", "fox a jumps", "the keys is on the table"]
    pairs = zip(goods, bads, strict=True)
    return [BlimpPair("p", str(i), g, b, "syntax", "x") for i, (g, b) in enumerate(pairs)]


class Parser:
    """A fixed random parse per text (the same text, the same parse)."""

    def parse_text(self, texts):
        return [random_parse(t.strip(), random.Random(t)) for t in texts]


def test_blimp_with_per_pair_budgets(tok):  # noqa: F811
    """At particles_max = N the run is the fixed-budget run; with room to grow, pairs near a tie are
    re-scored and the result records each pair's budget."""
    from structpe.eval.blimp import evaluate_blimp

    model = tiny_txl(tok, "input", seed=4)
    kw = {"pairs": _pairs(), "likelihood": "smc", "particles": 2, "progress": False, "keep_pairs": True}
    fixed = evaluate_blimp(model, tok, Parser(), **kw)
    same = evaluate_blimp(model, tok, Parser(), particles_max=2, **kw)
    assert [r["logp_good"] for r in same["pairs"]] == [r["logp_good"] for r in fixed["pairs"]]
    assert same["flip_share"] == fixed["flip_share"] and same["budgets"] == {"2": 4}
    grown = evaluate_blimp(model, tok, Parser(), particles_max=32, **kw)
    assert sum(grown["budgets"].values()) == 4 and set(grown["budgets"]) <= {"2", "8", "32"}
    assert grown["particles"] == 2 and grown["particles_max"] == 32 and 0 <= grown["unsettled"] <= 4
    # the jackknife would see the unsettled pairs alone: the score's se is the check's bound
    assert grown["stderr_method"] == "flip bound" and "stderr_method" not in fixed
    assert grown["stderr"] == pytest.approx((grown["flip_share"] * 4 / 2) ** 0.5 / 4)
    # the pairs that stayed at N keep the fixed run's numbers; the others were scored again
    for a, b in zip(grown["pairs"], fixed["pairs"], strict=True):
        assert (a["logp_good"] == b["logp_good"]) == (a["particles"] == 2)
    assert [r["particles"] for r in grown["pairs"]].count(2) == grown["budgets"].get("2", 0) < 4
