"""How each evaluation's result becomes the flat ``scores`` of a cell's ``metrics.json``.

Keys are ``<benchmark>.<likelihood>.<score>`` (``ppl.joint.word_ppl``,
``syntaxgym.conditional.circuit.Agreement``, ``leakage.summary.surviving_share`` ...), the names
the study spec's claims and the report's tables refer to; GLUE has no likelihood mode:
``glue.<task>.ft<seed>.<metric>``, ``glue.<task>.<metric>`` and ``glue.macro`` (:func:`glue_scores`).
"""

from __future__ import annotations

from typing import Any

from structpe.eval.glue.report import macro_average, summarize
from structpe.eval.leakage import CAUSAL


def flat(prefix: str, d: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}.{k}": float(v) for k, v in d.items()}


# what an smc result records about its budgets N and 4N (structpe.eval.scoring.smc.convergence):
# the share of decisions that flip between them, N, the 4N score's standard error, the score at N
SMC_FIELDS = ("flip_share", "particles", "stderr", "score_at_n", "word_ppl_at_n", "decisions")


def _smc(r: dict[str, Any]) -> dict[str, float]:
    return {k: float(r[k]) for k in SMC_FIELDS if r.get(k) is not None}


def ppl_scores(r: dict[str, Any]) -> dict[str, float]:
    """Perplexities and counts; a marginal's bound at each width w of its ladder as ``k<w>.*``; an
    smc estimate's ``particles``, ``stderr`` and ``word_ppl_at_n``."""
    out = {k: float(r[k]) for k in ("token_ppl", "word_ppl", "n_sentences", "n_tokens")}
    out.update(_smc(r))
    for w, b in (r.get("by_k") or {}).items():
        out.update({f"k{w}.{k}": float(b[k]) for k in ("token_ppl", "word_ppl")})
        out.update({f"k{w}.{k}": float(r[k]) for k in ("n_sentences", "n_tokens")})
    return out


def blimp_scores(r: dict[str, Any]) -> dict[str, float]:
    return {
        "overall": r["overall"],
        "n_pairs": r["n_pairs"],
        **_smc(r),
        **flat("phenomenon", r["per_phenomenon"]),
        **flat("paradigm", r["per_paradigm"]),
    }


def sg_scores(r: dict[str, Any]) -> dict[str, float]:
    return {
        "sg_score": r["sg_score"],
        "n_suites": r["n_suites"],
        **_smc(r),
        **flat("circuit", r["circuits"]),
        **flat("suite", r["suite_accuracy"]),
    }


def surviving_share(scores: dict[str, float], prefix: str = "leakage.") -> float | None:
    """Best causal-condition gain / full-parse gain over the same seed's baseline p(x), unclipped.

    1 = the whole conditional gain survives leak-free (causal) tags, 0 = none of it, < 0 = the
    causal tags make the model worse than the baseline (by that many full-parse gains). None when
    the full parse gains nothing (a ratio of two losses says nothing) or no causal condition ran.
    """
    full = scores.get(f"{prefix}full.gain")
    causal = [scores[f"{prefix}{c}.gain"] for c in CAUSAL if f"{prefix}{c}.gain" in scores]
    if full is None or full <= 0 or not causal:
        return None
    return max(causal) / full


def leakage_summary(report: dict[str, Any]) -> dict[str, float]:
    """Per-condition perplexities and gains, plus :func:`surviving_share` (``summary.``)."""
    out: dict[str, float] = {}
    for cond, r in report["variants"].items():
        out[f"{cond}.word_ppl"] = r["word_ppl"]
        out[f"{cond}.token_ppl"] = r["token_ppl"]
    gains = report.get("gain_vs_baseline", {})
    for cond, g in gains.items():
        out[f"{cond}.gain"] = g
    out["baseline.word_ppl"] = report["baseline"]["word_ppl"]
    out["summary.n_sentences"] = report["n_sentences"]
    share = surviving_share(out, prefix="")
    if share is not None:
        out["summary.surviving_share"] = share
    return out


def glue_run_scores(result: dict[str, Any]) -> dict[str, float]:
    """One task at one fine-tuning seed (a ``finetune_task`` result of one seed), as its cache file
    keeps it: the best dev epoch's metrics (``main``, the task's own, ``epoch``), the last epoch's as
    ``last_<name>``, and the example counts."""
    (run,) = result["runs"]
    best = {k: float(v) for k, v in run["best"].items() if k != "train_loss"}
    last = {f"last_{k}": float(v) for k, v in run["last"].items() if k != "train_loss"}
    return {**best, **last, "n_train": float(result["n_train"]), "n_dev": float(result["n_dev"])}


def glue_scores(runs: dict[str, dict[int, dict[str, float]]]) -> dict[str, float]:
    """A cell's GLUE scores from its runs (task -> fine-tuning seed -> :func:`glue_run_scores`).

    ``<task>.ft<seed>.<name>``: one run (best dev epoch; ``last_<name>`` the last epoch);
    ``<task>.<name>`` the mean over the fine-tuning seeds and ``<task>.ft_sd`` their sample sd of
    ``main``; ``macro`` / ``macro_last`` the mean over tasks of those means, and ``macro_ft_sd`` /
    ``macro_last_ft_sd`` the sd over fine-tuning seeds of each seed's own macro, exactly as
    ``structpe finetune glue`` reports them (``structpe.eval.glue.report.macro_average``).
    """
    out: dict[str, float] = {}
    per_task: dict[str, Any] = {}
    for task, by_seed in runs.items():
        rows = []
        for seed, r in by_seed.items():
            out.update({f"{task}.ft{seed}.{k}": v for k, v in r.items() if not k.startswith("n_")})
            best = {k: v for k, v in r.items() if not k.startswith(("last_", "n_"))}
            last = {k.removeprefix("last_"): v for k, v in r.items() if k.startswith("last_")}
            rows.append({"best": best, "last": last})
        summary = {w: summarize([row[w] for row in rows]) for w in ("best", "last")}
        out.update({f"{task}.{k}": v for k, v in summary["best"]["mean"].items()})
        out.update({f"{task}.last_{k}": v for k, v in summary["last"]["mean"].items()})
        if summary["best"]["sd"]["main"] is not None:
            out[f"{task}.ft_sd"] = summary["best"]["sd"]["main"]
        first = next(iter(by_seed.values()))
        out[f"{task}.n_train"], out[f"{task}.n_dev"] = first["n_train"], first["n_dev"]
        per_task[task] = {"summary": summary, "seeds": list(by_seed), "runs": rows}
    for which, key in (("best", "macro"), ("last", "macro_last")):
        mean, sd = macro_average(per_task, which)
        out[key] = mean
        if sd is not None:
            out[f"{key}_ft_sd"] = sd
    return out
