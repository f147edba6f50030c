"""Budgets N and 4N of an ``smc`` score: the views of its particle systems, the decisions that flip
between them, its standard error, and the rule for an honest verdict (docs/likelihoods.md).

Every text is scored by ``SMC_SYSTEMS`` independent systems of N particles (``structpe.eval.scoring.smc``):
system 0 alone is the budget-N check, systems 1..``SMC_REPLICATES`` pooled the reported 4N score.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from structpe.eval.scoring.types import TokenScores

# independent systems of N pooled into the reported (4N) score, plus one more alone (the N check)
SMC_REPLICATES = 4
SMC_SYSTEMS = SMC_REPLICATES + 1
# the largest share of decisions that may flip between N and 4N particles for an honest verdict
FLIP_SHARE_MAX = 0.02


def log_mean_exp(values: Sequence[float]) -> float:
    """log mean exp: the pooled estimate of independent unbiased estimates given as logs."""
    m = max(values)
    if m == -math.inf:
        return m
    return m + math.log(sum(math.exp(v - m) for v in values) / len(values))


def view_prefixes(open_est: Sequence[Sequence[float]], systems: Sequence[int]) -> list[float]:
    """Pooled log prefix estimates at each position over the given systems."""
    return [log_mean_exp([open_est[r][t] for r in systems]) for t in range(len(open_est[0]))]


def views(systems: int = SMC_SYSTEMS) -> dict[str, list[int]]:
    """The systems each estimate pools: ``score`` (1..R, the reported 4N estimate), ``check``
    (system 0 alone, N particles, independent of the score's) and ``jk<r>`` (the score without
    replicate r, for the jackknife)."""
    if systems < 3:
        raise ValueError(f"budgets N and 4N need at least 3 systems, got {systems}")
    reps = list(range(1, systems))
    out = {"score": reps, "check": [0]}
    out.update({f"jk{r}": [q for q in reps if q != r] for r in reps})
    return out


def view_scores(ts: TokenScores, systems: Sequence[int]) -> TokenScores:
    """``ts`` (an smc result) as the pooled estimate of the given systems: per-token log-ratios of
    their pooled prefix estimates and the closing to their pooled sentence estimate."""
    if ts.likelihood != "smc":
        return ts
    opened = view_prefixes(ts.meta["open"], systems)
    lps, prev = [], 0.0
    for b in opened:
        lps.append(b - prev)
        prev = b
    n_tok = len(ts.token_ids)
    eos = lps[n_tok] if ts.eos_logprob is not None else None
    close = log_mean_exp([ts.meta["closed"][r] for r in systems]) - prev
    return dataclasses.replace(ts, logprobs=lps[:n_tok], eos_logprob=eos, close_logprob=close)


def jackknife_se(replicates: Sequence[float]) -> float:
    """The jackknife standard error of a statistic from its leave-one-out values over R independent,
    identically distributed replicates: sqrt((R - 1) / R * sum_r (theta_(-r) - mean)^2)."""
    r = len(replicates)
    mean = sum(replicates) / r
    return math.sqrt((r - 1) / r * sum((x - mean) ** 2 for x in replicates))


def flip_bound_se(weights: Sequence[float], flips: Sequence[bool]) -> float:
    """An upper bound on the Monte Carlo standard error of a score sum_d w_d c_d over decisions c_d,
    from the independent N check alone: sqrt(sum_d w_d^2 flip_d / 2).

    With p_d the chance that decision d comes out right at 4N and p'_d at N, P(flip_d) = p_d + p'_d
    - 2 p_d p'_d >= 2 p_d (1 - p_d) whenever the N check is at least as uncertain as the 4N score
    (p'_d no further from 1/2 than p_d, on its side or beyond), so sum_d w_d^2 flip_d / 2 bounds the
    score's variance sum_d w_d^2 p_d (1 - p_d) in expectation. Per-decision budgets need it: their
    rule stops a decision only where every leave-one-out margin has the margin's sign (|m| >= z se
    with z > 3 makes (m - x_r) / 3 > |m| impossible), so the jackknife of the score sees the
    unsettled decisions alone and falls to zero."""
    return math.sqrt(sum(w * w for w, f in zip(weights, flips, strict=True) if f) / 2)


def convergence(
    decide: Callable[[str], tuple[float, Sequence[bool]]],
    particles: int,
    systems: int = SMC_SYSTEMS,
    weights: Sequence[float] | None = None,
) -> dict[str, Any]:
    """Budgets N and 4N of one metric: ``decide(view)`` gives the metric and its decisions (SyntaxGym
    items, BLiMP pairs; none for perplexity) from the systems of ``views()[view]``.

    ``flip_share``: the share of decisions that differ between the check (N) and the score (4N),
    independent systems; ``stderr``: the jackknife standard error of the 4N score over its R
    replicates (``jackknife_se``; the replicates are independent
    and identically distributed, so the leave-one-out spread measures the estimator's own Monte
    Carlo noise, decisions included, without any model of it); ``score_at_n``: the metric at N.
    ``weights`` (each decision's weight in the metric): per-decision budgets, whose rule leaves the
    jackknife at zero for every settled decision; ``stderr`` is then ``flip_bound_se`` and
    ``stderr_method`` is ``flip bound`` (absent: the jackknife).
    """
    names = views(systems)
    score, dec = decide("score")
    at_n, dec_n = decide("check")
    jk = [decide(v)[0] for v in names if v.startswith("jk")]
    out = {
        "particles": float(particles),
        "replicates": float(len(jk)),
        "score_at_n": float(at_n),
        "stderr": jackknife_se(jk),
    }
    if len(dec):
        flips = [a != b for a, b in zip(dec, dec_n, strict=True)]
        out["flip_share"] = sum(flips) / len(dec)
        out["decisions"] = float(len(dec))
        if weights is not None:
            out["stderr"] = flip_bound_se(weights, flips)
            out["stderr_method"] = "flip bound"
    return out


def estimator_converged(flip_share: float | None) -> bool:
    """Whether a metric's smc estimate may carry an honest verdict: at most ``FLIP_SHARE_MAX`` of
    its decisions flip between N and 4N particles (None: no record, not shown converged)."""
    return flip_share is not None and math.isfinite(flip_share) and flip_share <= FLIP_SHARE_MAX
