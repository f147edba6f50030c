"""How each evaluation's result becomes the flat ``scores`` of a cell's ``metrics.json``.

Keys are ``<benchmark>.<likelihood>.<score>`` (``ppl.joint.word_ppl``,
``syntaxgym.conditional.circuit.Agreement``, ``leakage.summary.surviving_share`` ...), the names
the study spec's claims and the report's tables refer to.
"""

from __future__ import annotations

from typing import Any

from structpe.eval.leakage import CAUSAL


def flat(prefix: str, d: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}.{k}": float(v) for k, v in d.items()}


def ppl_scores(r: dict[str, Any]) -> dict[str, float]:
    """Perplexities and counts; a marginal's bound at each width w of its ladder as ``k<w>.*``."""
    out = {k: float(r[k]) for k in ("token_ppl", "word_ppl", "n_sentences", "n_tokens")}
    for w, b in (r.get("by_k") or {}).items():
        out.update({f"k{w}.{k}": float(b[k]) for k in ("token_ppl", "word_ppl")})
        out.update({f"k{w}.{k}": float(r[k]) for k in ("n_sentences", "n_tokens")})
    return out


def blimp_scores(r: dict[str, Any]) -> dict[str, float]:
    return {
        "overall": r["overall"],
        "n_pairs": r["n_pairs"],
        **flat("phenomenon", r["per_phenomenon"]),
        **flat("paradigm", r["per_paradigm"]),
    }


def sg_scores(r: dict[str, Any]) -> dict[str, float]:
    return {
        "sg_score": r["sg_score"],
        "n_suites": r["n_suites"],
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
