"""Per-decision particle budgets for ``smc``: more particles only where a decision is not yet settled.

A fixed budget N converges slowly in the flip share (docs/likelihoods.md, "What convergence would
cost"): most decisions are settled at small N, and the flips gather in the few whose margin lies
within a few standard errors of a tie. So every decision is first scored at N; a decision whose 4N
margin (systems 1-4 pooled, ``smc_views``) is within ``z`` jackknife standard errors of zero is
scored again, from fresh random numbers, at 4N particles per system, and so on up to
``particles_max``. Each decision keeps the scores of the last budget it reached.

The rule reads only the pooled replicates (the reported score and its jackknife), never the
independent N check (system 0): the check at a decision's final budget stays independent of the
choice to stop there, so the share of decisions that flip between each one's N and 4N is measured
as for a fixed budget (a rule that also looked at the check would stop on agreement and bias the
flip share down).

A budget's random numbers come from the scorer's seed and the budget's level alone, and the texts of
one decision are scored together at every level, so the minimal pairs of BLiMP keep their common
random numbers (``smc``: the same prefix gets the same estimates).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from structpe.eval.scoring.smc_views import jackknife_se, views

# a decision is settled when its 4N margin is at least this many jackknife standard errors from a
# tie. Four replicates give a rough, heavy-tailed se (at N = 8, 6% of the BLiMP pairs beyond 3 se
# still flipped), so the bar is high: replayed on 300 measured pairs, z = 6 kept the flip share of
# N = 128 everywhere at two thirds of its cost (benchmarks/smc_budget_rule.py, docs/likelihoods.md
# "Per-decision budgets")
SETTLE_Z = 6.0
# the budget of an unsettled decision grows by this factor: its next N is its last pooled 4N
BUDGET_GROWTH = 4

Margin = Callable[[Sequence[Any], Sequence[int]], float]


@dataclass
class Budgets:
    """What the per-decision budgets did: each decision's final particles per system, and how many
    decisions stayed within ``z`` standard errors of a tie at ``particles_max``."""

    particles_max: int
    z: float
    final: list[int]
    unsettled: int

    @classmethod
    def joined(cls, parts: Sequence[Budgets]) -> Budgets:
        """The budgets of several runs with the same settings (BLiMP's paradigms) as one."""
        first = parts[0]
        final = [n for b in parts for n in b.final]
        return cls(first.particles_max, first.z, final, sum(b.unsettled for b in parts))

    def record(self) -> dict[str, object]:
        """The fields a result JSON keeps (``budgets``: decisions per final N)."""
        counts = {str(n): self.final.count(n) for n in sorted(set(self.final))}
        return {
            "particles_max": float(self.particles_max),
            "settle_z": self.z,
            "budgets": counts,
            "particles_mean": sum(self.final) / max(1, len(self.final)),
            "unsettled": float(self.unsettled),
        }


def level_seed(seed: int, level: int) -> int:
    """The random numbers of budget level ``level`` (0: the scorer's own seed, so a run whose
    decisions all settle at N equals the fixed-budget run)."""
    if level == 0:
        return seed
    return int(np.random.SeedSequence(entropy=seed, spawn_key=(level,)).generate_state(1)[0])


def margin_and_se(scores: Sequence[Any], margin: Margin) -> tuple[float, float]:
    """A decision's pooled (4N) margin and its jackknife standard error over the replicates."""
    names = views()
    reps = [margin(scores, systems) for v, systems in names.items() if v.startswith("jk")]
    return margin(scores, names["score"]), jackknife_se(reps)


def settle(
    scorer: Any,
    texts: Sequence[Sequence[Any]],
    margin: Margin,
    particles_max: int,
    z: float = SETTLE_Z,
    score: Callable[[Any, list[Any]], list[Any]] | None = None,
) -> tuple[list[list[Any]], Budgets]:
    """Score each decision's ``texts`` with ``scorer`` (an smc ``CausalScorer``) at its N, then its
    unsettled decisions at ``BUDGET_GROWTH`` times the particles until each is settled
    (``|margin| >= z se``) or the next budget would pass ``particles_max``.

    ``score(scorer, texts)`` scores a list of texts (default ``scorer.score``; SyntaxGym's texts
    carry their region cuts and score to prefix estimates); ``margin(scores, systems)``: the
    decision's margin from its texts' scores pooled over ``systems`` (positive: the decision holds).
    Returns every decision's scores at its final budget, and the budgets.
    """
    if particles_max < scorer.particles:
        raise ValueError(f"particles_max ({particles_max}) is below the particles ({scorer.particles})")
    out: list[list[Any]] = [[] for _ in texts]
    final = [scorer.particles] * len(texts)
    todo = list(range(len(texts)))
    unsettled: list[int] = []
    n, level = scorer.particles, 0
    while todo:
        at = copy.copy(scorer)  # the same model and options at this level's particles and seed
        at.particles, at.seed = n, level_seed(scorer.seed, level)
        # the decisions' first texts, then their second ones ...: BLiMP's goods then bads, the order
        # of the fixed-budget run
        order = [(d, j) for j in range(max(len(texts[d]) for d in todo)) for d in todo if j < len(texts[d])]
        batch = [texts[d][j] for d, j in order]
        scores = score(at, batch) if score is not None else at.score(batch)
        for d in todo:
            out[d] = []
        for (d, _), sc in zip(order, scores, strict=True):
            out[d].append(sc)
        unsettled = []
        for d in todo:
            final[d] = n
            m, se = margin_and_se(out[d], margin)
            if abs(m) < z * se:
                unsettled.append(d)
        n, level = n * BUDGET_GROWTH, level + 1
        todo = unsettled if n <= particles_max else []
    return out, Budgets(particles_max, z, final, len(unsettled))
