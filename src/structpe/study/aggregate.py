"""Aggregating a study: mean ± sd per recipe, paired differences with bootstrap CIs, verdicts.

Verdict rule (the one study.md states): for a claim "recipe R beats A on metric m", take the
paired per-seed differences d_s = m(R, s) - m(A, s), signed so that d_s > 0 is the direction the
paper claims, and the 95% percentile-bootstrap confidence interval of their mean (resampling
seeds with replacement). The metric *replicates* when the interval lies above 0, *does not*
when it lies at or below 0 (no gain, or a loss, in the claimed direction), and is
*inconclusive* when it straddles 0 or fewer than two seeds are paired. A claim with several
verdict metrics replicates when all of them replicate, does not when all of them do not, and is
inconclusive otherwise.

With 3 seeds the bootstrap has only 10 distinct resamples: its 2.5% quantile is the smallest
difference, so "replicates" then means "every seed improves". That is stated, not hidden.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from structpe.io import read_json
from structpe.study.spec import StudySpec

VERDICTS = ("replicates", "does not", "inconclusive")
N_BOOT = 10000


def load_cell_metrics(out: str | Path) -> list[dict[str, Any]]:
    """Every finished cell's ``metrics.json`` under ``out/cells`` (sorted by recipe, seed)."""
    found = []
    for p in sorted(Path(out).glob("cells/*/seed-*/metrics.json")):
        found.append(read_json(p, finite=True))
    return sorted(found, key=lambda m: (m["recipe_label"], m["seed"]))


def mean_sd(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation (ddof 1; nan for one value) and count."""
    xs = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if xs.size == 0:
        return {"mean": math.nan, "sd": math.nan, "n": 0}
    sd = float(xs.std(ddof=1)) if xs.size > 1 else math.nan
    return {"mean": float(xs.mean()), "sd": sd, "n": int(xs.size)}


def bootstrap_ci(
    diffs: Sequence[float], level: float = 0.95, n_boot: int = N_BOOT, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``diffs`` (seeds resampled with replacement).

    numpy rather than scipy.stats.bootstrap: scipy's BCa default fails on the degenerate
    resamples a 3-seed study produces; the percentile method is what the verdict rule states.
    """
    xs = np.asarray(diffs, dtype=float)
    if xs.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = xs[rng.integers(0, xs.size, size=(n_boot, xs.size))].mean(axis=1)
    a = (1.0 - level) / 2.0
    return float(np.quantile(means, a)), float(np.quantile(means, 1.0 - a))


def verdict(diffs: Sequence[float], better: str) -> tuple[str, tuple[float, float]]:
    """The rule of the module docstring for one metric; returns (verdict, CI of the raw mean)."""
    lo, hi = bootstrap_ci(diffs)
    if len(diffs) < 2:
        return "inconclusive", (lo, hi)
    s_lo, s_hi = (lo, hi) if better == "higher" else (-hi, -lo)
    if s_lo > 0:
        return "replicates", (lo, hi)
    if s_hi <= 0:
        return "does not", (lo, hi)
    return "inconclusive", (lo, hi)


def combine(verdicts: Sequence[str]) -> str:
    """A claim's verdict from its metrics' verdicts (module docstring)."""
    if verdicts and all(v == "replicates" for v in verdicts):
        return "replicates"
    if verdicts and all(v == "does not" for v in verdicts):
        return "does not"
    return "inconclusive"


def by_seed(cells: Sequence[dict[str, Any]], label: str, metric: str) -> dict[int, float]:
    return {
        int(c["seed"]): float(c["scores"][metric])
        for c in cells
        if c["recipe_label"] == label and metric in c["scores"] and c["scores"][metric] is not None
    }


def paired(
    cells: Sequence[dict[str, Any]], label: str, against: str, metric: str, better: str
) -> dict[str, Any]:
    """Per-seed differences of ``label`` minus ``against`` on ``metric`` with CI and verdict."""
    a, b = by_seed(cells, label, metric), by_seed(cells, against, metric)
    seeds = sorted(set(a) & set(b))
    diffs = [a[s] - b[s] for s in seeds]
    v, (lo, hi) = verdict(diffs, better)
    return {
        "metric": metric,
        "better": better,
        "seeds": seeds,
        "diffs": diffs,
        "recipe": mean_sd([a[s] for s in seeds]),
        "against": mean_sd([b[s] for s in seeds]),
        "mean_diff": float(np.mean(diffs)) if diffs else math.nan,
        "ci95": [lo, hi],
        "verdict": v,
    }


def headline(metric: str) -> bool:
    """Metrics summarised and paired in study.json (not every BLiMP paradigm / SyntaxGym suite)."""
    return (
        ".paradigm." not in metric
        and ".suite." not in metric
        and not metric.endswith(("n_sentences", "n_tokens", "n_pairs", "n_suites"))
    )


def better_of(metric: str) -> str:
    """Direction of improvement of a score: perplexities and losses go down, accuracies up."""
    low = ("ppl", "loss")
    last = metric.rsplit(".", 1)[-1]
    return "lower" if any(t in last for t in low) else "higher"


def aggregate(cells: Sequence[dict[str, Any]], spec: StudySpec) -> dict[str, Any]:
    """study.json's content: per-recipe summaries, paired differences to the baseline, claims."""
    labels = [r.label for r in spec.recipes]
    metrics = sorted({k for c in cells for k in c["scores"]})
    recipes: dict[str, Any] = {}
    for label in labels:
        mine = [c for c in cells if c["recipe_label"] == label]
        recipes[label] = {
            "recipe": spec.recipe_name(label),
            "seeds": sorted(c["seed"] for c in mine),
            "wall_s": mean_sd([c["wall_s"].get("total", math.nan) for c in mine]),
            "scores": {
                m: {**mean_sd(list(by_seed(cells, label, m).values())), "by_seed": by_seed(cells, label, m)}
                for m in metrics
            },
        }
    vs_baseline = {
        label: {m: paired(cells, label, spec.baseline, m, better_of(m)) for m in metrics if headline(m)}
        for label in labels
        if label != spec.baseline
    }
    claims = []
    for c in spec.claims:
        rows = [paired(cells, c.recipe, c.against, m, c.better) for m in c.metrics]
        shown = [paired(cells, c.recipe, c.against, m, c.better) for m in c.show]
        claims.append(
            {
                "id": c.id,
                "claim": c.claim,
                "recipe": c.recipe,
                "against": c.against,
                "paper": c.paper,
                "metrics": rows,
                "show": shown,
                "verdict": combine([r["verdict"] for r in rows]),
            }
        )
    expected = len(spec.recipes) * len(spec.seeds)
    return {
        "study": spec.name,
        "profile": spec.profile,
        "baseline": spec.baseline,
        "cells_finished": len(cells),
        "cells_planned": expected,
        "recipes": recipes,
        "vs_baseline": vs_baseline,
        "claims": claims,
    }
