"""The words and small tables of a study report: what each likelihood mode and count is, numbers as
text, the verdict rule and each claim's summary sentence, generated from the numbers (no
hand-written verdict prose that could drift). ``structpe.study.report`` assembles them."""

from __future__ import annotations

import math
import re
from typing import Any

from structpe.study.aggregate import ALPHA, bound_of

# what each likelihood mode is, per benchmark (docs/likelihoods.md); "*" marks the leaking ones
MODE_NOTE = {
    "conditional": "conditional*: one fixed parse",
    "joint": "joint p(x, T)",
    "marginal": "k-best marginal",
}
SG_JOINT_NOTE = "joint*: region surprisals leak"  # earlier words' tags come from the whole-sentence parse
SG_MARGINAL_NOTE = "prefix marginal: leak-free"
COUNT_KEYS = {
    "ppl": ("n_sentences", "sentences"),
    "blimp": ("n_pairs", "pairs"),
    "syntaxgym": ("n_suites", "suites"),
}
COLUMNS = (  # the recipes table: (short name, metric); a column appears when a cell or claim has it
    ("val LM loss", "val_lm_loss"),
    ("word PPL", "ppl.conditional.word_ppl"),
    ("word PPL", "ppl.joint.word_ppl"),
    ("word PPL", "ppl.marginal_k1.word_ppl"),
    ("word PPL", "ppl.marginal_k10.word_ppl"),
    ("word PPL", "ppl.marginal_k100.word_ppl"),
    ("word PPL", "ppl.marginal.word_ppl"),
    ("BLiMP", "blimp.conditional.overall"),
    ("BLiMP", "blimp.joint.overall"),
    ("BLiMP", "blimp.marginal.overall"),
    ("SG", "syntaxgym.conditional.sg_score"),
    ("SG", "syntaxgym.joint.sg_score"),
    ("SG", "syntaxgym.marginal.sg_score"),
    ("GLUE macro", "glue.macro"),
)


def mode_of(metric: str) -> str | None:
    """The likelihood mode of a ``bench.mode.score`` metric (``marginal_k10`` is ``marginal`` at k = 10)."""
    parts = metric.split(".")
    return parts[1] if parts[0] in COUNT_KEYS and len(parts) >= 3 else None


def mode_note(metric: str) -> str:
    """What the metric's likelihood is, in words; "*" = leaks, "bound" = a bound for tagged recipes."""
    mode = mode_of(metric)
    if mode is None:
        return ""
    bench = metric.split(".")[0]
    base, _, k = mode.partition("_k")
    if bench == "syntaxgym" and base == "joint":
        return SG_JOINT_NOTE
    note = MODE_NOTE.get(base, mode) + (f" at k = {k}" if k else "")
    if bench == "syntaxgym" and base == "marginal":
        note = SG_MARGINAL_NOTE
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


def glue_note(metric: str, cells: list[dict[str, Any]]) -> str:
    """``best dev epoch; 3 fine-tuning seeds; cola, rte`` for a GLUE score (empty for any other):
    the epoch it is read at, the fine-tuning seeds each cell averages and, for a macro, its tasks."""
    parts = metric.split(".")
    if parts[0] != "glue" or len(parts) < 2:
        return ""
    per_seed = re.compile(r"glue\.[^.]+\.(ft\d+)\.main$")
    runs = sorted({len({m.group(1) for k in c["scores"] if (m := per_seed.match(k))}) for c in cells} - {0})
    tasks = sorted(
        {k.split(".")[1] for c in cells for k in c["scores"] if re.match(r"glue\.[^.]+\.n_dev$", k)}
    )
    last = parts[-1].startswith("last_") or parts[-1] == "macro_last"
    return "; ".join(
        x
        for x in (
            "last epoch" if last else "best dev epoch",
            f"{'-'.join(str(n) for n in sorted({runs[0], runs[-1]}))} fine-tuning seeds" if runs else "",
            ", ".join(tasks) if parts[1].startswith("macro") else "",
        )
        if x
    )


def describe(metric: str, cells: list[dict[str, Any]]) -> str:
    """``metric`` with its mode and count, the way every table names a column or row."""
    parts = [x for x in (mode_note(metric), count_of(metric, cells), glue_note(metric, cells)) if x]
    return f"`{metric}`" + (f" [{'; '.join(parts)}]" if parts else "")


def pm(s: dict[str, Any] | None, scale: float = 1.0) -> str:
    if not s or s.get("n", 0) == 0 or s["mean"] is None or math.isnan(s["mean"]):
        return "-"
    prec = 3 if abs(s["mean"] * scale) < 10 else 1
    sd = s.get("sd")
    tail = "" if sd is None or math.isnan(sd) else f" ± {sd * scale:.{prec}f}"
    return f"{s['mean'] * scale:.{prec}f}{tail}"


def _num(x: float | None, prec: int = 3) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:+.{prec}f}"


def md_table(rows: list[list[str]], header: list[str]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"  # p(x | T) inside a cell

    return [line(header), "|" + "|".join("---" for _ in header) + "|", *(line(r) for r in rows)]


def _paper_cell(paper: dict[str, Any]) -> str:
    if not paper:
        return "-"
    base, rec = paper.get("baseline"), paper.get("recipe")
    where = paper.get("source", "")
    return f"{base} -> {rec} ({where})" if base is not None else str(where)


def _zero_nan(x: float | None) -> float:
    return 0.0 if x is None or math.isnan(x) else float(x)


def _p(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "-"
    return f"{x:.2g}" if x < 0.001 else f"{x:.3f}"


def rule_text(n_seeds: list[int], family: dict[str, int]) -> list[str]:
    """The verdict rule, stated in study.md (the numbers come from :mod:`structpe.study.aggregate`)."""
    mins = ", ".join(f"{2.0**-n:.3g} with {n} seeds" for n in sorted(set(n_seeds)) if n) or "-"
    return [
        f"- **Verdict rule.** Per claim metric: the paired per-seed differences d = recipe - comparison "
        f"(same seed), **signed so that d > 0 is the paper's direction** (every difference in this "
        f"report is signed that way). The decision test is the one-sided paired t-test of mean d > 0 "
        f"(scipy `ttest_1samp`); its p-values over every decision metric of the study (the "
        f"replication `metrics` and the `honest` metrics of all claims) are Holm-Bonferroni adjusted "
        f"as one family (here m = {family['paper_direction']} tests; the opposite tests: "
        f"m = {family['against']}). **replicates** = adjusted p < {ALPHA}; **contradicts** = the "
        f"adjusted p of the opposite one-sided test (mean d < 0, Holm over the opposite tests) < "
        f"{ALPHA}; **not shown** "
        f"= neither (also with fewer than 2 paired seeds); **not run** = the cells have no value. "
        f"A claim with several decision metrics of one kind replicates when one replicates and none "
        f"contradicts (and vice versa), else not shown. The 95% interval is the paired t interval.",
        "- **Bounds are called bounds.** For a recipe that reads tags, the `joint` p(x, T) and the "
        "k-best `marginal` are *lower* bounds on p(x), so the perplexity from them is an *upper* "
        "bound on its perplexity. A difference with one bounded side bounds the true difference "
        'from one side: "X lowers perplexity" judged on X\'s bound can be shown (the bound already '
        "beats the comparison's exact p(x)) but never contradicted (its opposite test is not made "
        "and not in the family); with both sides bounds nothing is decided.",
        f"- **Robustness figure**: the exact sign-flip permutation p of the mean (all 2^n sign "
        f"patterns of n paired seeds, one-sided in the paper's direction). Its smallest possible "
        f"value is 2^-n ({mins}): with 4 seeds or fewer it cannot fall below 0.05, whatever the data.",
    ]


def _seeds_way(r: dict[str, Any]) -> str:
    return f"{r['n_positive']}/{r['n']}" if r["n"] else "-"


def _summary(c: dict[str, Any], cells: list[dict[str, Any]]) -> str:
    """One generated paragraph per claim: its verdicts and the numbers that make them."""
    head = (
        f"- **{c['id']}** ({c['claim']}; `{c['recipe']}` vs `{c['against']}`): replication "
        f"**{c['verdict']}**" + (f"; honest **{c['honest_verdict']}**" if c["honest"] else "") + "."
    )
    parts = []
    for role, rows in (("replication", c["metrics"]), ("honest", c["honest"])):
        for r in rows:
            if not r["ran"]:
                parts.append(f"{role} {describe(r['metric'], cells)}: not run")
                continue
            bound = {
                "lower": " (a bound: can show, cannot contradict)",
                "upper": " (a bound: can contradict, cannot show)",
                "both": " (both sides bounds: no verdict)",
            }.get(r["bound"] or "", "")
            parts.append(
                f"{role} {describe(r['metric'], cells)}{bound}: the paper's way on {_seeds_way(r)} "
                f"seeds, mean {_num(r['mean'])} [{_num(r['ci95'][0])}, {_num(r['ci95'][1])}], "
                f"one-sided p {_p(r['p'])}, Holm p {_p(r['p_adj'])} (opposite direction: "
                f"{_p(r['p_against_adj'])}), sign-flip p {_p(r['p_perm'])} "
                f"(smallest possible {_p(r['p_perm_min'])}) -> {r['verdict']}"
            )
    text = head + (" " + "; ".join(parts) + "." if parts else "")
    if c.get("machines_differ"):
        text += (
            f" Its cells ran on different machines (`{c['recipe']}`: {'; '.join(c['machines'][0])}; "
            f"`{c['against']}`: {'; '.join(c['machines'][1])}): the difference includes the machines' own."
        )
    return text


def _across(agg: dict[str, Any], metrics: list[str], cells: list[dict[str, Any]]) -> list[str]:
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
