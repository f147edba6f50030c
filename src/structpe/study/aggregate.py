"""Aggregating a study: mean ± sd per recipe, paired differences, tests and verdicts.

Verdict rule (the one study.md states, ``structpe.study.wording.rule_text``): for a claim "recipe R beats A on
metric m", take the paired per-seed differences d_s = m(R, s) - m(A, s), signed so that d_s > 0
is the direction the paper claims. The decision test is the one-sided paired t-test of mean d > 0
(scipy's ``ttest_1samp`` on the signed differences, ``alternative="greater"``); its p-values over
every decision metric of the study (each claim's ``metrics`` and ``honest`` metrics) are
Holm-Bonferroni adjusted as one family. The metric **replicates** when its adjusted p is < 0.05,
**contradicts** when the adjusted p of the opposite one-sided test (mean d < 0, the same family
correction over the opposite tests) is < 0.05, and is **not shown** otherwise (also with fewer than
two paired seeds). A metric with no cell values is **not run**.

Bounds: a tagged model's joint p(x, T) and k-best marginal are lower bounds on its p(x), so the
perplexity computed from them is an upper bound on its perplexity. A difference with such a side
bounds the true difference from one side only: "X lowers perplexity" judged on X's bound can be
shown (the bound already beats the baseline's exact p(x)) but never contradicted; the opposite
test is not made (and is not in the family). With both sides bounds nothing can be decided.

The decision family: only tests that can reach a verdict enter Holm. A perplexity computed from a
bound (above) is shown with its one-sided p, never counted: at cpu-small the k = 100 marginal of
a tagged model sat 2.6x above the baseline's exact perplexity, so such a test can only ever say
"not shown", and counting it would move the other claims' adjusted p when unrelated recipes are
added. An ``honest`` metric from an *estimator* of p(x) (the particle estimator, mode ``smc``)
decides only where it has converged: every involved cell's ``<bench>.smc.flip_share`` (the share of
item / pair decisions that differ between N and 4N particles) is at most ``FLIP_SHARE_MAX``; else
the test is shown as "estimator not converged at N". An honest metric from a k-best marginal (or
an estimator result without a ``flip_share``) is a lower bound with no convergence check: shown,
never decided. A model that reads no tags has its exact p(x) in every mode and needs no check.
A claim marked ``cost`` (the paper's small BLiMP drop) is a cost check, not a discovery: its tests
are shown with the largest cost their 95% interval allows, outside the family.

A claim with several deciding metrics of one kind (the replication ``metrics`` or the ``honest``
ones) replicates when at least one of them replicates and none contradicts (the family-wise
correction covers every metric), contradicts in the mirror case, and is not shown otherwise.

Pairs: a seed's cells pair only on the same machine and precision (``cell_metrics.pair_key``) and,
per metric, on the same test set (``cell_metrics.eval_set_difference``). Where they differ, either
side's re-run on the other side's machine (``machines/<name>/cells``, ``cell_metrics.load_rerun_cells``)
stands in for it, and the convergence check reads the cells that were paired.

Robustness figure beside each test: the exact sign-flip permutation p of the mean (all 2^n sign
patterns of n paired seeds enumerated); its smallest possible value is 2^-n (0.125 with 3 seeds).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from structpe.eval.scoring.smc_views import estimator_converged
from structpe.study.cell_metrics import (
    by_seed,
    cells_by_seed,
    eval_set_difference,
    key_text,
    machine_of,
    pair_key,
)
from structpe.study.spec import StudySpec
from structpe.study.stages.leakage import surviving_share

ALPHA = 0.05
# a claim's verdict words: decided, or why not (and "estimator not converged at N = <n>")
VERDICTS = (
    "replicates",
    "contradicts",
    "not shown",
    "not run",
    "no pairs",
    "no verdict (bounds only)",
    "lower bound, no convergence check",
    "estimate, no convergence check",
    "cost check",
)
# likelihood modes whose perplexity is an upper bound for a model that reads tags (docs/likelihoods.md)
BOUND_MODES = ("joint", "marginal")
# modes whose honest scores come from a k-best lower bound on p(x): never converged, never decide
LOWER_BOUND_MODES = ("marginal",)
# the particle estimator of p(x): decides where its N vs 4N decisions agree (docs/studies/README.md)
ESTIMATOR_MODES = ("smc",)


def mean_sd(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation (ddof 1; nan for one value) and count."""
    xs = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if xs.size == 0:
        return {"mean": math.nan, "sd": math.nan, "n": 0}
    sd = float(xs.std(ddof=1)) if xs.size > 1 else math.nan
    return {"mean": float(xs.mean()), "sd": sd, "n": int(xs.size)}


def paired_test(signed: Sequence[float]) -> dict[str, Any]:
    """Tests of mean(signed) > 0 on paired differences already signed to the paper's direction.

    ``p`` / ``p_against``: one-sided t-test p of mean > 0 / mean < 0; ``ci95``: the two-sided 95%
    t interval of the mean; ``p_perm``: the exact one-sided sign-flip permutation p (every one of
    the 2^n sign patterns), whose smallest possible value ``p_perm_min`` is 2^-n.
    Fewer than two differences: every p is nan (no test).
    """
    d = np.asarray(signed, dtype=float)
    n = int(d.size)
    nan = math.nan
    out: dict[str, Any] = {
        "n": n,
        "mean": float(d.mean()) if n else nan,
        "ci95": [nan, nan],
        "p": nan,
        "p_against": nan,
        "p_perm": nan,
        "p_perm_min": 2.0**-n if n else nan,
        "n_positive": int((d > 0).sum()),
        "n_negative": int((d < 0).sum()),
    }
    if n < 2:
        return out
    with warnings.catch_warnings():  # nearly equal differences: scipy warns, the result stands
        warnings.simplefilter("ignore", RuntimeWarning)
        two = stats.ttest_1samp(d, 0.0)
        ci = two.confidence_interval(0.95)
        out["p"] = float(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)
        out["p_against"] = float(stats.ttest_1samp(d, 0.0, alternative="less").pvalue)
    out["ci95"] = [float(ci.low), float(ci.high)]
    perm = stats.permutation_test(
        (d,),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",  # one sample: the signs are flipped, all 2^n patterns
        alternative="greater",
        n_resamples=np.inf,
        vectorized=True,
    )
    out["p_perm"] = float(perm.pvalue)
    return out


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values; nan entries (no test) stay nan and are not counted.

    Written out because scipy has none (``false_discovery_control`` is Benjamini-Hochberg) and
    statsmodels is too heavy a dependency for six lines: sort the m p-values, multiply the i-th
    smallest (i from 0) by m - i, make the sequence non-decreasing, cap at 1.
    """
    p = np.asarray(pvalues, dtype=float)
    adj = np.full(p.shape, math.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    if m:
        order = ok[np.argsort(p[ok], kind="stable")]
        steps = np.maximum.accumulate((m - np.arange(m)) * p[order])
        adj[order] = np.minimum(steps, 1.0)
    return [float(x) for x in adj]


def bound_of(metric: str, reads_tags: bool) -> str | None:
    """``"upper"`` when a cell's value of ``metric`` is an upper bound on the true quantity.

    A tagged model's joint p(x, T) and k-best marginal (``ppl.marginal``, ``ppl.marginal_k<k>``)
    are lower bounds on p(x), so their perplexities are upper bounds; a model that reads no tags
    gets its exact p(x) in every mode. Accuracies (BLiMP, SyntaxGym) are no bounds.
    """
    parts = metric.split(".")
    if not reads_tags or len(parts) != 3 or parts[0] != "ppl" or not parts[2].endswith("ppl"):
        return None
    return "upper" if parts[1].split("_k")[0] in BOUND_MODES else None


def diff_bound(better: str, recipe_bound: str | None, against_bound: str | None) -> str | None:
    """How the observed signed difference bounds the true one: ``"lower"`` (true >= observed: it
    can show the paper's direction, never contradict it), ``"upper"`` (only contradict),
    ``"both"`` (neither: both sides are bounds), None (exact)."""
    sign = 1 if better == "higher" else -1
    kinds = set()
    if recipe_bound == "upper":  # recipe_true <= recipe_observed
        kinds.add("upper" if sign > 0 else "lower")
    if against_bound == "upper":  # against_true <= against_observed
        kinds.add("lower" if sign > 0 else "upper")
    if len(kinds) > 1:
        return "both"
    return kinds.pop() if kinds else None


def paired(
    cells: Sequence[dict[str, Any]],
    label: str,
    against: str,
    metric: str,
    better: str,
    bound: str | None = None,
    reruns: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """``label`` against ``against`` on ``metric``, paired by seed: raw differences (recipe -
    comparison), the same signed to ``better`` (> 0 = better / the paper's way) and their tests.
    ``bound``: :func:`diff_bound` of the comparison. A seed whose two cells differ in
    ``cell_metrics.pair_key`` pairs with a cell of ``reruns`` (``cell_metrics.load_rerun_cells``) of
    the same recipe and seed that matches the other side's machine, listed in ``reruns``; else it is
    no pair and listed in ``missing`` with the reason, as is a seed that only one side has a value for
    or whose two cells were scored on different test sets (``cell_metrics.eval_set_difference``).
    Where neither way gives both sides a value (a metric added after the primary cells ran, which
    only re-runs were evaluated with), both sides' re-runs on one machine pair (:func:`_rerun_pair`)."""
    mine, theirs = cells_by_seed(cells, label), cells_by_seed(cells, against)
    seeds, missing, used, a, b = [], [], [], [], []
    for s in _seeds_with(cells, reruns, (label, against), metric):
        x, y = mine.get(s), theirs.get(s)
        if _value(x, metric) is not None:
            y = _same_machine(y, x, against, s, metric, reruns)
        if _value(y, metric) is not None:
            x = _same_machine(x, y, label, s, metric, reruns)
        if _value(x, metric) is None or _value(y, metric) is None:
            x, y = _rerun_pair(x, y, (label, against), s, metric, reruns)
        if (u := _value(x, metric)) is None or (v := _value(y, metric)) is None:
            missing.append({"seed": s, "why": _no_value(cells, reruns, (label, against), s, metric)})
        elif (ka := pair_key(x)) != (kb := pair_key(y)):
            missing.append({"seed": s, "why": f"`{label}` {key_text(ka)}; `{against}` {key_text(kb)}"})
        elif differs := eval_set_difference(x, y, metric):
            missing.append({"seed": s, "why": f"test sets differ (`{label}` against `{against}`: {differs})"})
        else:
            seeds.append(s)
            a.append(u)
            b.append(v)
            used += [
                {"seed": s, "recipe": c["recipe_label"], "folder": c["rerun_folder"]}
                for c in (x, y)
                if "rerun_folder" in c
            ]
    diffs = [u - v for u, v in zip(a, b, strict=True)]
    sign = 1.0 if better == "higher" else -1.0
    signed = [sign * d for d in diffs]
    return {
        "metric": metric,
        "better": better,
        "bound": bound,
        "seeds": seeds,
        "missing": missing,
        "reruns": used,
        "diffs": diffs,
        "signed": signed,
        "recipe": mean_sd(a),
        "against": mean_sd(b),
        "ran": all(_seeds_with(cells, reruns, (side,), metric) for side in (label, against)),
        **paired_test(signed),
    }


def _value(cell: dict[str, Any] | None, metric: str) -> float | None:
    v = None if cell is None else cell["scores"].get(metric)
    return None if v is None else float(v)


def _same_machine(
    cell: dict[str, Any] | None,
    other: dict[str, Any],
    label: str,
    seed: int,
    metric: str,
    reruns: Sequence[dict[str, Any]],
) -> dict[str, Any] | None:
    """``cell`` where it has a value of ``metric`` and pairs with ``other``, else ``label``'s re-run
    of ``seed`` on ``other``'s machine that has one, else ``cell``."""
    if _value(cell, metric) is not None and pair_key(cell) == pair_key(other):
        return cell
    key = pair_key(other)
    return next((c for c in _reruns_with(reruns, label, seed, metric) if pair_key(c) == key), cell)


def _reruns_with(
    reruns: Sequence[dict[str, Any]], label: str, seed: int, metric: str
) -> list[dict[str, Any]]:
    """``label``'s re-runs of ``seed`` that have a value of ``metric``."""
    return [
        c
        for c in reruns
        if c["recipe_label"] == label and int(c["seed"]) == seed and _value(c, metric) is not None
    ]


def _seeds_with(
    cells: Sequence[dict[str, Any]], reruns: Sequence[dict[str, Any]], labels: Sequence[str], metric: str
) -> list[int]:
    """The seeds at which a primary cell or a re-run of one of ``labels`` has a value of ``metric``."""
    having = (c for c in [*cells, *reruns] if c["recipe_label"] in labels and _value(c, metric) is not None)
    return sorted({int(c["seed"]) for c in having})


def _no_value(
    cells: Sequence[dict[str, Any]],
    reruns: Sequence[dict[str, Any]],
    labels: tuple[str, str],
    seed: int,
    metric: str,
) -> str:
    """Why ``seed`` has no pair on ``metric``: the side(s) with no value in any cell or re-run, else
    (each side has one, e.g. only in a re-run) that no two of them share a machine."""
    lacking = [label for label in labels if seed not in _seeds_with(cells, reruns, (label,), metric)]
    if lacking:
        return "no " + " or ".join(f"`{label}`" for label in lacking) + " value"
    return f"the `{labels[0]}` and `{labels[1]}` values are on different machines"


def _rerun_pair(
    x: dict[str, Any] | None,
    y: dict[str, Any] | None,
    labels: tuple[str, str],
    seed: int,
    metric: str,
    reruns: Sequence[dict[str, Any]],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Both sides' re-runs of ``seed`` on one machine that have a value of ``metric`` (machine
    folders in their sorted order; the choice reads which cells were evaluated with the metric,
    never their values), else ``(x, y)`` unchanged."""
    theirs = _reruns_with(reruns, labels[1], seed, metric)
    for rx in _reruns_with(reruns, labels[0], seed, metric):
        ry = next((c for c in theirs if pair_key(c) == pair_key(rx)), None)
        if ry is not None:
            return rx, ry
    return x, y


def paired_cell(
    cells: Sequence[dict[str, Any]],
    reruns: Sequence[dict[str, Any]],
    row: dict[str, Any],
    label: str,
    seed: int,
) -> dict[str, Any]:
    """The cell of ``label`` that :func:`paired` used for ``seed`` in ``row``: its re-run where the
    row lists one, else the primary cell."""
    folder = next((u["folder"] for u in row["reruns"] if u["seed"] == seed and u["recipe"] == label), None)
    pool = cells if folder is None else [c for c in reruns if c["rerun_folder"] == folder]
    return cells_by_seed(pool, label)[seed]


def standing_of(
    row: dict[str, Any],
    cells: Sequence[dict[str, Any]],
    sides: dict[str, bool],
    cost: bool = False,
    reruns: Sequence[dict[str, Any]] = (),
) -> None:
    """Set ``row["standing"]``: ``decides`` (the only one in the Holm family), ``bound``,
    ``unchecked``, ``not converged`` or ``cost`` (module docstring); and, for
    an estimator's metric, ``row["convergence"]``: the largest ``flip_share`` and the particle
    counts of the paired cells that read tags (``sides``: label -> reads tags; a paired re-run is
    read from ``reruns``), and ``mc_se``, the Monte Carlo standard error of the mean paired
    difference from those cells' ``stderr`` (sqrt of their summed variances over the n seeds, / n;
    a side that reads no tags is exact). It separates the estimator's own noise from the seeds':
    a score can be precise while single decisions still flip."""
    parts = row["metric"].split(".")
    mode = parts[1].split("_k")[0] if len(parts) >= 3 else ""
    tagged = [label for label, reads in sides.items() if reads]
    if cost:
        row["standing"] = "cost"
    elif row["bound"]:
        row["standing"] = "bound"
    elif mode in LOWER_BOUND_MODES and tagged:
        row["standing"] = "unchecked"
    elif mode in ESTIMATOR_MODES and tagged:
        involved = [
            paired_cell(cells, reruns, row, label, s)["scores"] for label in tagged for s in row["seeds"]
        ]
        shares = [sc.get(f"{parts[0]}.{mode}.flip_share") for sc in involved]
        particles = sorted(
            {int(n) for sc in involved if (n := sc.get(f"{parts[0]}.{mode}.particles")) is not None}
        )
        largest = {int(n) for sc in involved if (n := sc.get(f"{parts[0]}.{mode}.particles_max")) is not None}
        known = [float(x) for x in shares if x is not None]
        ses = [sc.get(f"{parts[0]}.{mode}.stderr") for sc in involved]
        row["convergence"] = {
            "max_flip_share": max(known) if known else None,
            "particles": particles,
            "particles_max": sorted(largest),
            "checked": len(known) == len(shares),
            "mc_se": (
                math.sqrt(sum(float(x) ** 2 for x in ses)) / len(row["seeds"])
                if row["seeds"] and None not in ses
                else None
            ),
        }
        if len(known) < len(shares):
            row["standing"] = "unchecked"
        elif not all(estimator_converged(x) for x in known):
            row["standing"] = "not converged"
        else:
            row["standing"] = "decides"
    else:
        row["standing"] = "decides"


def _particles(row: dict[str, Any]) -> str:
    conv = row.get("convergence") or {}
    ns, largest = conv.get("particles") or [], conv.get("particles_max") or []
    text = "-".join(str(n) for n in sorted({ns[0], ns[-1]})) if ns else "?"
    return f"{text} (per decision up to {largest[-1]})" if largest else text


def decide(row: dict[str, Any]) -> str:
    """One tested row's verdict: from its adjusted p-values where it decides (module docstring),
    else what keeps it from deciding."""
    if not row["ran"]:
        return "not run"
    if not row["n"]:
        return "no pairs"  # both recipes ran, never one seed on one machine (``missing`` says why)
    standing = row.get("standing", "decides")
    if standing == "bound":
        return "bound, not counted"
    if standing == "unchecked":  # a k-best marginal, or an estimator's result without its N vs 4N check
        lower = row["metric"].split(".")[1].split("_k")[0] in LOWER_BOUND_MODES
        return f"{'lower bound' if lower else 'estimate'}, no convergence check"
    if standing == "not converged":
        return f"estimator not converged at N = {_particles(row)}"
    if standing == "cost":
        return "cost check"
    if row.get("p_adj", math.nan) < ALPHA:
        return "replicates"
    if row.get("p_against_adj", math.nan) < ALPHA:
        return "contradicts"
    return "not shown"


def combine(verdicts: Sequence[str]) -> str:
    """A claim's verdict from its deciding metrics' verdicts (module docstring)."""
    if not verdicts:
        return "-"
    if all(v == "not run" for v in verdicts):
        return "not run"
    rep, con = "replicates" in verdicts, "contradicts" in verdicts
    if rep and not con:
        return "replicates"
    if con and not rep:
        return "contradicts"
    return "not shown"


def claim_verdict(rows: Sequence[dict[str, Any]]) -> str:
    """A claim's verdict over one role's rows: its deciding rows' (:func:`combine`); where none ran,
    what keeps the others from deciding (a cost check, an unconverged estimator, a bound)."""
    if not rows:
        return "-"
    ran = [r for r in rows if r["ran"]]
    if ran and not any(r["n"] for r in ran):
        return "no pairs"
    deciding = [r["verdict"] for r in ran if r.get("standing", "decides") == "decides" and r["n"]]
    if deciding:
        return combine(deciding)
    for standing in ("cost", "not converged", "unchecked"):
        hit = [r for r in ran if r["standing"] == standing]
        if hit:
            return str(hit[0]["verdict"])
    return "no verdict (bounds only)" if ran else "not run"


def adjust(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Holm over the rows that decide (in place): ``p_adj`` over the tests in the paper's
    direction, ``p_against_adj`` over the opposite ones; a row that does not decide (a bound, an
    unconverged or unchecked estimate, a cost check: ``standing``; a row without one is a bound
    when it has a ``bound``) stays out of both families (nan). Then each row's ``verdict``.
    Returns the two family sizes."""
    for r in rows:
        r.setdefault("standing", "bound" if r["bound"] else "decides")
    counted = [r["standing"] == "decides" for r in rows]
    p = holm([r["p"] if ok else math.nan for r, ok in zip(rows, counted, strict=True)])
    q = holm([r["p_against"] if ok else math.nan for r, ok in zip(rows, counted, strict=True)])
    for r, pa, qa in zip(rows, p, q, strict=True):
        r["p_adj"], r["p_against_adj"] = pa, qa
        r["verdict"] = decide(r)
    return {
        "paper_direction": sum(not math.isnan(x) for x in p),
        "against": sum(not math.isnan(x) for x in q),
    }


def headline(metric: str) -> bool:
    """Metrics summarised and paired in study.json (not every BLiMP paradigm / SyntaxGym suite, nor
    a single GLUE fine-tuning seed or its spread)."""
    return (
        ".paradigm." not in metric
        and ".suite." not in metric
        and not re.search(r"^glue\..*(\.ft\d+\.|ft_sd$)", metric)
        and not metric.endswith(("n_sentences", "n_tokens", "n_pairs", "n_suites", "n_train", "n_dev"))
    )


def better_of(metric: str) -> str:
    """Direction of improvement of a score: perplexities and losses go down, accuracies up."""
    low = ("ppl", "loss")
    last = metric.rsplit(".", 1)[-1]
    return "lower" if any(t in last for t in low) else "higher"


def aggregate(
    cells: Sequence[dict[str, Any]],
    spec: StudySpec,
    planned: Sequence[tuple[str, int]] | None = None,
    reruns: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """study.json's content: per-recipe summaries, paired differences to the baseline, claims.
    ``planned``: the (recipe, seed) cells the profile plans (default: ``spec``'s), which "cells
    finished" counts against: a study run in slices has not finished what it has not run.
    ``reruns``: ``cell_metrics.load_rerun_cells``; a recipe's re-run pairs with the other side's
    cells of its machine (:func:`paired`)."""
    labels = [r.label for r in spec.recipes]
    tagged = {label: spec.reads_tags(label) for label in labels}
    metrics = sorted({k for c in cells for k in c["scores"]})
    recipes: dict[str, Any] = {}
    for label in labels:
        mine = [c for c in cells if c["recipe_label"] == label]
        shares = {int(c["seed"]): surviving_share(c["scores"]) for c in mine}
        recipes[label] = {
            "recipe": spec.recipe_name(label),
            "reads_tags": tagged[label],
            "seeds": sorted(c["seed"] for c in mine),
            "machines": sorted({m for c in mine if (m := machine_of(c))}),
            "wall_s": mean_sd([c["wall_s"].get("total", math.nan) for c in mine]),
            "scores": {
                m: {**mean_sd(list(by_seed(cells, label, m).values())), "by_seed": by_seed(cells, label, m)}
                for m in metrics
            },
            "surviving_share": {
                **mean_sd([v for v in shares.values() if v is not None]),
                "by_seed": {s: v for s, v in shares.items() if v is not None},
            },
        }

    def compare(label: str, against: str, metric: str, better: str) -> dict[str, Any]:
        b = diff_bound(better, bound_of(metric, tagged[label]), bound_of(metric, tagged[against]))
        return paired(cells, label, against, metric, better, b, reruns)

    vs_baseline = {
        label: {m: compare(label, spec.baseline, m, better_of(m)) for m in metrics if headline(m)}
        for label in labels
        if label != spec.baseline
    }
    claims = []
    for c in spec.claims:
        claims.append(
            {
                "id": c.id,
                "claim": c.claim,
                "recipe": c.recipe,
                "against": c.against,
                "better": c.better,
                "paper": c.paper,
                "cost": c.cost,
                "metrics": [compare(c.recipe, c.against, m, c.better) for m in c.metrics],
                "honest": [compare(c.recipe, c.against, m, c.better) for m in c.honest],
                "show": [compare(c.recipe, c.against, m, c.better) for m in c.show],
            }
        )
    tested = [(c, r) for c in claims for r in (*c["metrics"], *c["honest"])]
    for c, r in tested:
        sides = {c["recipe"]: tagged[c["recipe"]], c["against"]: tagged[c["against"]]}
        standing_of(r, cells, sides, c["cost"], reruns)
    family = adjust([r for _, r in tested])
    family["tests"] = [f"{c['id']}: {r['metric']}" for c, r in tested if not math.isnan(r["p_adj"])]
    family["not_counted"] = [
        {"test": f"{c['id']}: {r['metric']}", "why": r["verdict"]}
        for c, r in tested
        if r["standing"] != "decides" and r["ran"]
    ]
    plan = (
        list(planned)
        if planned is not None
        else [(r.label, s) for r in spec.recipes for s in spec.recipe_seeds(r.label)]
    )
    for c in claims:
        c["machines"] = [recipes[c["recipe"]]["machines"], recipes[c["against"]]["machines"]]
        # a missing pair is a seed both recipes plan (a seed one of them never runs is no loss)
        both = {s for lab, s in plan if lab == c["recipe"]} & {s for lab, s in plan if lab == c["against"]}
        seen: dict[tuple[int, str], None] = {}
        for r in (*c["metrics"], *c["honest"]):
            seen.update({(m["seed"], m["why"]): None for m in r["missing"] if m["seed"] in both})
        c["missing_pairs"] = [{"seed": s, "why": why} for s, why in seen]
        rows = (*c["metrics"], *c["honest"])
        c["reruns"] = sorted({(u["seed"], u["recipe"], u["folder"]) for r in rows for u in r["reruns"]})
        c["verdict"] = claim_verdict(c["metrics"])
        c["honest_verdict"] = claim_verdict(c["honest"])
    have = {(c["recipe_label"], int(c["seed"])) for c in cells}
    return {
        "study": spec.name,
        "profile": spec.profile,
        "baseline": spec.baseline,
        "alpha": ALPHA,
        "holm_family": family,
        "cells_finished": sum(cell in have for cell in plan),
        "cells_planned": len(plan),
        "cells_missing": [f"{label}/seed-{s}" for label, s in plan if (label, s) not in have],
        "recipes": recipes,
        "vs_baseline": vs_baseline,
        "claims": claims,
    }
