"""The words and small tables of a study report: what each likelihood mode and count is, numbers as
text, the verdict rule and each claim's summary sentence, generated from the numbers (no
hand-written verdict prose that could drift). ``structpe.study.report`` assembles them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from structpe.eval.scoring.smc_views import FLIP_SHARE_MAX
from structpe.study.aggregate import ALPHA, bound_of
from structpe.study.stages import STAGES, stage
from structpe.study.tables import fmt_num, fmt_p

# what each likelihood mode is, per benchmark (docs/likelihoods.md); "*" marks the leaking ones
MODE_NOTE = {
    "conditional": "conditional*: one fixed parse",
    "joint": "joint p(x, T)",
    "marginal": "k-best marginal",
}
KEYS = tuple(s.KEY for s in STAGES)
COUNT_KEYS = {s.KEY: s.COUNT for s in STAGES if hasattr(s, "COUNT")}  # bench: (n_* score, its noun)
# the recipes table: (short name, metric), each stage's columns in order; a column appears when a
# cell or claim has it
COLUMNS = (("val LM loss", "val_lm_loss"), *(c for s in STAGES for c in getattr(s, "COLUMNS", ())))


# an absolute POSIX path inside a command line or a folder name (not the "//" of a URL)
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/(?:[\w.+-]+/)*[\w.+-]+")


def portable(text: str) -> str:
    """``text`` with every absolute path made machine-free: relative to the working directory when
    under it, else its last component (a page must not print where it was made: the folder names
    say what ran, the machine's layout does not)."""

    def short(m: re.Match[str]) -> str:
        path = Path(m.group(0))
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return path.name

    return ABSOLUTE_PATH.sub(short, text)


def mode_of(metric: str) -> str | None:
    """The likelihood mode of a ``bench.mode.score`` metric (``marginal_k10`` is ``marginal`` at k = 10)."""
    parts = metric.split(".")
    return parts[1] if parts[0] in COUNT_KEYS and len(parts) >= 3 else None


def mode_note(metric: str) -> str:
    """What the metric's likelihood is, in words; "*" = leaks, "bound" = a bound for tagged recipes."""
    mode = mode_of(metric)
    if mode is None:
        return ""
    own = getattr(stage(metric.split(".")[0]), "MODE_NOTES", {})  # a bench's own word for a mode
    base, _, k = mode.partition("_k")
    note = own.get(base) or MODE_NOTE.get(base, mode) + (f" at k = {k}" if k else "")
    if bound_of(metric, reads_tags=True):
        note += ": upper bound if tagged"
    return note


def count_of(metric: str, cells: list[dict[str, Any]]) -> str:
    """``n = 500 sentences`` (the range when cells differ) from the cells' ``<bench>.<mode>.n_*``."""
    mode = mode_of(metric)
    if mode is None:
        return ""
    key, noun = COUNT_KEYS[metric.split(".")[0]]
    ns = sorted(
        {
            int(c["scores"][f"{metric.split('.')[0]}.{mode}.{key}"])
            for c in cells
            if f"{metric.split('.')[0]}.{mode}.{key}" in c["scores"]
        }
    )
    if not ns:
        return "not run"
    return f"n = {ns[0]} {noun}" if len(ns) == 1 else f"n = {ns[0]}-{ns[-1]} {noun}"


def stage_note(metric: str, cells: list[dict[str, Any]]) -> str:
    """What the metric's stage says of it beyond its mode and count (GLUE: the epoch, the
    fine-tuning seeds, a macro's tasks); empty for the others."""
    bench = metric.split(".")[0]
    if bench not in KEYS or not hasattr(stage(bench), "note"):
        return ""
    return stage(bench).note(metric, cells)


def describe(metric: str, cells: list[dict[str, Any]]) -> str:
    """``metric`` with its mode and count, the way every table names a column or row."""
    parts = [x for x in (mode_note(metric), count_of(metric, cells), stage_note(metric, cells)) if x]
    return f"`{metric}`" + (f" [{'; '.join(parts)}]" if parts else "")


def paper_cell(paper: dict[str, Any]) -> str:
    """The paper's numbers of a claim as one table cell."""
    if not paper:
        return "-"
    base, rec = paper.get("baseline"), paper.get("recipe")
    where = paper.get("source", "")
    return f"{base} -> {rec} ({where})" if base is not None else str(where)


def rule_text(n_seeds: list[int], family: dict[str, Any]) -> list[str]:
    """The verdict rule and this page's Holm family, stated in study.md (the numbers come from
    :mod:`structpe.study.aggregate`)."""
    mins = ", ".join(
        f"{2.0**-n:.3g} with {n} seed{'' if n == 1 else 's'}" for n in sorted(set(n_seeds)) if n
    ) or "-"
    tests = family.get("tests") or []
    others = family.get("not_counted") or []
    return [
        f"- **Verdict rule.** Per claim metric: the paired per-seed differences d = recipe - comparison "
        f"(same seed; a seed is paired only when both cells ran on the same CPU type in the same "
        f"training precision; where they differ, a re-run of either recipe on the other's machine, "
        f"`machines/<name>/cells`, stands in for its cell of that seed; a metric that only re-runs "
        f"carry, e.g. an evaluation added after the primary cells ran, pairs both recipes' re-runs on one "
        f"machine), **signed so that d > 0 is the "
        f"paper's direction** (every difference in this report is signed that way). The decision test is "
        f"the one-sided paired t-test of mean "
        f"d > 0 (scipy `ttest_1samp`); the p-values of the tests that can reach a verdict are "
        f"Holm-Bonferroni adjusted as one family (here m = {family['paper_direction']} tests; the "
        f"opposite tests: m = {family['against']}). **replicates** = adjusted p < {ALPHA}; "
        f"**contradicts** = the adjusted p of the opposite one-sided test (mean d < 0, Holm over the "
        f"opposite tests) < {ALPHA}; **not shown** = neither (also with fewer than 2 paired seeds); "
        f"**not run** = the cells have no value. A claim with several deciding metrics of one kind "
        f"replicates when one replicates and none contradicts (and vice versa), else not shown. The "
        f"95% interval is the paired t interval.",
        "- **The family** (the tests Holm counts): "
        + ("; ".join(f"`{t}`" for t in tests) or "none")
        + ". **Shown, not counted**: "
        + ("; ".join(f"`{t['test']}` ({t['why']})" for t in others) or "none")
        + ". A test outside the family never moves another claim's adjusted p.",
        "- **Bounds are shown, not counted.** For a recipe that reads tags, the `joint` p(x, T) and the "
        "k-best `marginal` are *lower* bounds on p(x), so the perplexity from them is an *upper* "
        "bound on its perplexity: a test on it is shown with its one-sided p and never decides. An "
        "`honest` accuracy from the k-best marginal is a lower bound with **no convergence check**: "
        "shown, no honest verdict. An honest score from the particle estimator (`smc`) decides only "
        f"where every involved cell's N vs 4N decisions differ on at most {FLIP_SHARE_MAX:.0%} of "
        "items (`flip_share`); otherwise the page says **estimator not converged at N**. Each "
        "estimator row also gives the Monte Carlo standard error of its mean difference (from the "
        "cells' `stderr`): the estimator's own noise, beside the seeds' interval; a score can be "
        "precise while single decisions still flip. A model that reads no tags has its exact p(x) "
        "in every mode.",
        "- **Cost checks** (`cost` claims, e.g. the paper's small BLiMP drop) are not discoveries: "
        "shown with the largest cost their 95% interval allows, never in the family.",
        f"- **Robustness figure**: the exact sign-flip permutation p of the mean (all 2^n sign "
        f"patterns of n paired seeds, one-sided in the paper's direction). Its smallest possible "
        f"value is 2^-n ({mins}): with 4 seeds or fewer it cannot fall below 0.05, whatever the data.",
    ]


def _seeds_way(r: dict[str, Any]) -> str:
    return f"{r['n_positive']}/{r['n']}" if r["n"] else "-"


def claim_summary(c: dict[str, Any], cells: list[dict[str, Any]]) -> str:
    """One generated paragraph per claim: its verdicts and the numbers that make them."""
    head = (
        f"- **{c['id']}** ({c['claim']}; `{c['recipe']}` vs `{c['against']}`): "
        + ("**cost check**" if c.get("cost") else f"replication **{c['verdict']}**")
        + (f"; honest **{c['honest_verdict']}**" if c["honest"] else "")
        + "."
    )
    parts = []
    for role, rows in (("replication", c["metrics"]), ("honest", c["honest"])):
        for r in rows:
            if not r["ran"]:
                parts.append(f"{role} {describe(r['metric'], cells)}: not run")
                continue
            bound = {
                "lower": " (a bound: shown, not counted)",
                "upper": " (a bound: shown, not counted)",
                "both": " (both sides bounds: shown, not counted)",
            }.get(r["bound"] or "", "")
            head_p = (
                f"Holm p {fmt_p(r['p_adj'])} (opposite direction: {fmt_p(r['p_against_adj'])}), "
                if r.get("standing", "decides") == "decides"
                else "not in the family, "
            )
            conv = r.get("convergence") or {}
            share = conv.get("max_flip_share")
            conv_text = (
                f", largest N vs 4N flip share {share:.3f}"
                if share is not None and conv.get("checked")
                else ""
            )
            if conv.get("mc_se") is not None:
                conv_text += f", Monte Carlo se of the mean {conv['mc_se']:.3f}"
            cost = (
                f", the largest cost its interval allows {fmt_num(r['ci95'][1])}"
                if r.get("standing") == "cost"
                else ""
            )
            parts.append(
                f"{role} {describe(r['metric'], cells)}{bound}: the paper's way on {_seeds_way(r)} "
                f"seeds, mean {fmt_num(r['mean'])} [{fmt_num(r['ci95'][0])}, {fmt_num(r['ci95'][1])}]{cost}, "
                f"one-sided p {fmt_p(r['p'])}, {head_p}sign-flip p {fmt_p(r['p_perm'])} "
                f"(smallest possible {fmt_p(r['p_perm_min'])}){conv_text} -> {r['verdict']}"
            )
    text = head + (" " + "; ".join(parts) + "." if parts else "")
    if c.get("reruns"):
        text += (
            " Paired with re-runs on the other side's machine: "
            + "; ".join(f"seed {s}: `{label}` of {folder}" for s, label, folder in c["reruns"])
            + "."
        )
    if c.get("missing_pairs"):
        text += (
            " Missing pairs: " + "; ".join(f"seed {m['seed']}: {m['why']}" for m in c["missing_pairs"]) + "."
        )
    return text


def across_rows(agg: dict[str, Any], metrics: list[str], cells: list[dict[str, Any]]) -> list[str]:
    """Descriptive lines per metric: how many recipes beat / trail the baseline on every seed."""
    lines = []
    others = list(agg["vs_baseline"])
    for m in metrics:
        rows = {lab: per[m] for lab, per in agg["vs_baseline"].items() if m in per and per[m]["n"]}
        if not rows:
            continue
        up = [lab for lab, r in rows.items() if r["n_positive"] == r["n"]]
        down = [lab for lab, r in rows.items() if r["n_negative"] == r["n"]]
        said = []
        for word, labs in (("better", up), ("worse", down)):
            if labs:
                said.append(
                    f"{word} on every seed for {len(labs)} of {len(rows)} recipes ({', '.join(labs)})"
                )
        lines.append(
            f"- {describe(m, cells)}: "
            + ("; ".join(said) if said else f"no recipe of {len(others)} moves the same way on every seed")
            + "."
        )
    return lines
