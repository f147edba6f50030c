"""The ``leakage`` stage: the leakage audit (``structpe eval leakage``) of a tagged decoder against
the same seed's baseline model; metrics ``leakage.<condition>.word_ppl`` / ``.token_ppl`` /
``.gain``, ``leakage.baseline.word_ppl`` and ``leakage.summary.*`` (with the surviving share)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from structpe.choices import LEAKAGE_VARIANTS
from structpe.eval.leakage import CAUSAL
from structpe.io import stable_hash
from structpe.study.spec_checks import StudySpecError, check_choices
from structpe.study.tables import md_table, pm

from .cell import Cell

KEY = "leakage"
# where the full-sentence tags come from (LeakageSpec.full_parse)
FULL_PARSES = ("test", "text")


@dataclass
class LeakageSpec:
    """The leakage audit (``structpe eval leakage``) against the same seed's baseline model."""

    conditions: list[str] = field(default_factory=lambda: ["full", "prefix", "prefix_drop_last"])
    sentences: int = 50
    # where the full-sentence tags come from: ``test`` = the test sentences' parse (the one PPL is
    # scored with); ``text`` = each audited text parsed whole by the study's parser, the text form
    # the causal conditions parse (the quickstart's audit)
    full_parse: str = "test"


SPEC = LeakageSpec  # the class of its section in a study spec's ``evaluations``


def check(sub: LeakageSpec, where: str) -> None:
    """Known conditions, ``full`` among them (every gain is measured against it), a known full parse."""
    check_choices(sub.conditions, LEAKAGE_VARIANTS, f"{where}.conditions")
    if "full" not in sub.conditions:
        raise StudySpecError(f"{where}.conditions must include 'full'")
    check_choices([sub.full_parse], FULL_PARSES, f"{where}.full_parse")


def cache_keys(sub: LeakageSpec, own: str, baseline: str, trained: str) -> dict[str, str]:
    """``leakage``: the model and test sentences (``own``), the settings and the baseline model's
    training hash; the default ``full_parse`` keys as before the option existed."""
    leak = dataclasses.asdict(sub)
    if leak["full_parse"] == "test":
        del leak["full_parse"]
    return {KEY: stable_hash([own, KEY, leak, baseline])}


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


def run(sub: LeakageSpec, cell: Cell) -> None:
    """A tagged decoder only (the others have nothing to leak), once the same seed's baseline model
    exists (another worker may still train it); on the parse's test sentences."""
    if not (cell.tagged and cell.causal):
        return
    from structpe.eval.leakage import leakage_audit
    from structpe.eval.ppl import sentence_text
    from structpe.models import load

    base = load(cell.baseline_model()).eval()
    sents = cell.parsed_sentences[: sub.sentences]

    def audit() -> dict[str, float]:
        report = leakage_audit(
            cell.model,
            cell.tokenizer,
            [sentence_text(s) for s in sents],
            cell.parser,
            parses=sents if sub.full_parse == "test" else None,
            baseline=base,
            variants=sub.conditions,
        )
        return leakage_summary(report)

    cell.record(KEY, audit, KEY)


def planned(sub: LeakageSpec, parts: list[str]) -> bool:
    """``leakage.<condition>.<score>`` for a condition it runs, and ``leakage.summary.*``."""
    return len(parts) >= 3 and parts[1] in (*sub.conditions, "summary")


SECTION_TEXT = (
    "Gain = 1 - word PPL / the same seed's baseline p(x) word PPL. Surviving share = best "
    "causal-condition gain / full-parse gain, **unclipped**: 1 = all of the gain survives "
    "leak-free tags, 0 = none, < 0 = causal tags make the model worse than the baseline by that "
    "many full-parse gains (undefined when the full parse gains nothing). The causal conditions "
    "feed tag contexts a model trained on whole-sentence parses never saw, so a low share says "
    "the gain needs non-causal tags, not only that it is leakage. `causal` gives each word the "
    "tags of its word-prefix parse: the tags `position_causal` is trained on, so that row "
    "compares the leak-free model on its own tags with the baseline."
)


def section(agg: dict[str, Any], spec: Any, cells: list[dict[str, Any]], chance: Any) -> list[str]:
    """study.md's leakage table: per recipe the baseline's p(x) PPL, each condition's PPL and gain,
    the surviving share (always shown: a study without the audit says so)."""
    lines = [
        "",
        "## Leakage audit: how much of the conditional gain survives causal tagging",
        "",
        SECTION_TEXT,
        "",
    ]
    leak_ns = sorted(
        {
            int(c["scores"]["leakage.summary.n_sentences"])
            for c in cells
            if "leakage.summary.n_sentences" in c["scores"]
        }
    )
    n_leak = (
        f"n = {'-'.join(str(n) for n in sorted({leak_ns[0], leak_ns[-1]}))} sentences"
        if leak_ns
        else f"n = {spec.evaluations.leakage.sentences if spec.evaluations.leakage else '-'} sentences (spec)"
    )
    conds = sorted(
        {
            k.split(".")[1]
            for r in agg["recipes"].values()
            for k in r["scores"]
            if k.startswith("leakage.") and k.endswith(".word_ppl") and k.split(".")[1] != "baseline"
        },
        key=lambda c: (c != "full", c),
    )
    rows = []
    for label, r in agg["recipes"].items():
        s = r["scores"]
        if not s.get("leakage.full.gain", {}).get("n"):
            continue  # no audit for this recipe (e.g. the baseline reads no tags)
        share = r["surviving_share"]
        rows.append(
            [
                label,
                pm(s.get("leakage.baseline.word_ppl")),
                *(f"{pm(s.get(f'leakage.{c}.word_ppl'))} ({pm(s.get(f'leakage.{c}.gain'))})" for c in conds),
                pm(share),
                ", ".join(f"{v:.2f}" for v in share["by_seed"].values()) or "-",
            ]
        )
    if not rows:
        return [*lines, "(no leakage audit in this study)"]
    header = [
        "recipe",
        f"baseline p(x) word PPL [{n_leak}]",
        *(f"{c} word PPL (gain) [{n_leak}]" for c in conds),
        "surviving share",
        "per seed",
    ]
    return [*lines, *md_table(rows, header)]
