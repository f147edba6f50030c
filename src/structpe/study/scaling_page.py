"""The page of ``structpe study scaling``: ``scaling.md`` (the studies, the baseline's quality per
scale, each claim's effect and verdict per scale, generated change sentences), its plot and
``scaling.json``; the numbers come from :mod:`structpe.study.scaling`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from structpe.io import atomic_write_text, save_figure, write_json_atomic
from structpe.study.aggregate import better_of
from structpe.study.cell_metrics import machines_text
from structpe.study.cells import StudyError
from structpe.study.scaling import (
    KINDS,
    NOT_DISTINGUISHABLE,
    PROTOCOLS_DIFFER,
    Scale,
    check_scales,
    claims_across,
    kind_metric,
    load_scale,
    order_scales,
    x_metric,
)
from structpe.study.tables import fmt_num, md_table, pm
from structpe.study.wording import count_of, mode_note, portable


def rule_text() -> str:
    """The change rule as the page states it (the module docstring's, in one paragraph)."""
    return (
        "**Change rule** (a description between neighbouring scales, not a test): **flips sign** = "
        "the two 95% intervals exclude zero on opposite sides; **grows** / **shrinks** = the later "
        "scale's 95% interval lies wholly above / below the earlier scale's mean (the signed effect "
        "moves towards / away from the paper's direction; the earlier scale's own spread is not "
        f"used); **stays within noise** = both intervals contain zero; **{NOT_DISTINGUISHABLE}** = "
        "anything else, or fewer than two paired seeds at a scale; **not run** = no cells for the "
        f"claim's recipe or metric at a scale; **{PROTOCOLS_DIFFER}** = the two scales scored the "
        "metric under other evaluation settings (pairs, suites, beam width; each folder's "
        "`spec.json`), so their effects are no one measurement and get no change word. Checked in "
        f"this order, {PROTOCOLS_DIFFER} first."
    )


def _effect(r: dict[str, Any] | None) -> str:
    if r is None or not r["ran"] or not r["n"]:
        return "not run"
    bound = f", bound: {r['bound']}" if r["bound"] else ""
    return f"{fmt_num(r['mean'])} [{fmt_num(r['ci95'][0])}, {fmt_num(r['ci95'][1])}] (n {r['n']}{bound})"


def _change_text(step: dict[str, Any]) -> str:
    return step["change"] + (f" ({step['protocol']})" if step.get("protocol") else "")


def _changes(steps: list[dict[str, Any]], many: bool) -> str:
    if not many:
        return _change_text(steps[0])
    return "; ".join(f"{s['from']} -> {s['to']}: {_change_text(s)}" for s in steps)


def _seed_counts(s: Scale) -> str:
    return ", ".join(f"{label} {len(r['seeds'])}" for label, r in s.agg["recipes"].items() if r["seeds"])


def baseline_table(scales: Sequence[Scale]) -> dict[str, Any]:
    """The baseline's own scores per scale (mean ± sd, n seeds) and each scale's chance row."""
    metrics = {kind: kind_metric(kind, scales) for kind in KINDS}
    rows = {}
    for s in scales:
        rows[s.profile] = {
            "baseline": s.spec.baseline,
            "seeds": s.agg["recipes"][s.spec.baseline]["seeds"],
            "scores": {m: s.baseline_score(m) for m in metrics.values() if m},
            "evaluated_on": {m: count_of(m, s.cells) for m in metrics.values() if m and count_of(m, s.cells)},
            "chance": s.chance,
        }
    return {"metrics": metrics, "scales": rows}


def render(
    scales: Sequence[Scale],
    base: dict[str, Any],
    claims: list[dict[str, Any]],
    xm: str,
    order: str,
    plot: Path,
    command: str | None,
) -> str:
    """The scaling page's Markdown; every number and change word comes from the arguments."""
    name = scales[0].spec.name
    profiles = [s.profile for s in scales]
    many = len(scales) > 2
    ordered = (
        "in the order given"
        if order == "given"
        else f"by the baseline's `{xm}`, worst first ({better_of(xm)} is better)"
    )
    families = ", ".join(f"{s.profile} m = {s.agg['holm_family']['paper_direction']}" for s in scales)
    lines = [
        f"# Study `{name}` across scales: {', '.join(f'`{p}`' for p in profiles)}",
        "",
        f"Each scale is one study folder at one profile, aggregated by `structpe study report`'s own "
        f"statistics: per claim metric the paired per-seed differences (signed so that > 0 is the "
        f"paper's direction), their mean and paired-t 95% interval, and the verdict under that "
        f"study's own Holm family (family sizes: {families}). "
        f"Scales are ordered {ordered}. An effect is read against the baseline's own quality at the "
        f"same scale: a claim about a model near chance says little about a trained one.",
        "",
        "```bash",
        portable(
            command or f"structpe study scaling {' '.join(str(s.folder) for s in scales)} --output <page>.md"
        ),
        "```",
        "",
        "## Studies",
        "",
    ]
    lines += _studies_section(scales)
    lines += _baseline_section(scales, base)
    lines += _claims_section(claims, profiles, many)
    ran = [c for c in claims if ran_anywhere(c)]
    lines += ["", "## What changes with scale (generated from the table)", ""]
    lines += [_sentence(c, scales) for c in ran]
    lines += [
        "",
        f"![{plot.stem}]({plot.name})",
        "",
        "The plot: one panel per claim run at some scale, one line per decision metric; x = the "
        f"baseline's mean `{xm}` at each scale, y = the signed effect with its 95% interval (> 0 = "
        "the paper's direction; no bar with fewer than two paired seeds).",
    ]
    return "\n".join(lines) + "\n"


def _studies_section(scales: Sequence[Scale]) -> list[str]:
    """One row per study folder (profile, commands, cells, seeds, CPU) and each profile's description."""
    lines: list[str] = []
    lines += md_table(
        [
            [
                f"`{s.profile}`",
                f"`{portable(str(s.folder))}`",
                "<br>".join(f"`{portable(c)}`" for c in s.commands) or "-",
                f"{s.agg['cells_finished']} of {s.agg['cells_planned']}",
                _seed_counts(s),
                machines_text(s.cells),
            ]
            for s in scales
        ],
        ["profile", "folder", "commands", "cells finished", "seeds per recipe", "CPU (cells' provenance)"],
    )
    lines += ["", *(f"- `{s.profile}`: {s.spec.profile_description or '-'}" for s in scales), ""]
    return lines


def _baseline_section(scales: Sequence[Scale], base: dict[str, Any]) -> list[str]:
    """The baseline's own quality at each scale, with each scale's chance row."""
    lines: list[str] = []
    metrics = {k: m for k, m in base["metrics"].items() if m}
    lines += [
        "## The baseline's own quality per scale",
        "",
        "Mean ± sd over the baseline's seeds. The baseline reads no tags: its score is its exact "
        "p(x)'s in every likelihood mode. *chance*: what a model without information scores (the "
        "study's `chance.json`: BLiMP 0.5, SyntaxGym by Monte Carlo on the study's own suites).",
        "",
    ]
    rows = []
    for s in scales:
        b = base["scales"][s.profile]
        rows.append(
            [
                f"`{s.profile}`",
                f"`{b['baseline']}`",
                str(len(b["seeds"])),
                *(pm(b["scores"][m]) if b["scores"][m]["n"] else "not run" for m in metrics.values()),
                "; ".join(b["evaluated_on"].values()) or "-",
            ]
        )
        if s.chance is not None:
            at = {"BLiMP": s.chance.get("blimp"), "SG": s.chance.get("syntaxgym")}
            rows.append(
                [
                    f"*chance* (`{s.profile}`)",
                    "-",
                    "-",
                    *(f"*{at[k]:.3f}*" if at.get(k) is not None else "-" for k in metrics),
                    "-",
                ]
            )
    lines += md_table(
        rows, ["scale", "baseline", "seeds", *(f"{k} (`{m}`)" for k, m in metrics.items()), "evaluated on"]
    )
    return lines


def _claims_section(claims: list[dict[str, Any]], profiles: list[str], many: bool) -> list[str]:
    """Each decision metric's effect and verdict per scale, and the change between scales."""
    lines: list[str] = []
    lines += [
        "",
        "## Claims across scales",
        "",
        "Per decision metric (`replication`: the paper's protocol; `honest`: leak-free likelihoods): "
        "the signed mean effect [95% t interval] (n paired seeds; bound: see the study pages), and "
        "the verdict under that scale's study. " + rule_text(),
        "",
    ]
    ran = [c for c in claims if ran_anywhere(c)]
    rows = []
    for c in ran:
        for r in c["rows"]:
            rows.append(
                [
                    f"{c['id']}: {c['claim']}",
                    r["role"],
                    f"`{r['metric']}`" + (f" [{mode_note(r['metric'])}]" if mode_note(r["metric"]) else ""),
                    *(
                        _effect(r["at"][p]) + (f" **{r['at'][p]['verdict']}**" if _ran(r["at"][p]) else "")
                        for p in profiles
                    ),
                    _changes(r["changes"], many),
                ]
            )
        rows.append(
            [
                f"**{c['id']}**",
                "",
                "claim verdicts",
                *(_claim_verdicts(c["verdicts"][p]) for p in profiles),
                "",
            ]
        )
    change_head = "change" + (" per step" if many else "")
    header = ["claim", "role", "metric", *(f"`{p}`" for p in profiles), change_head]
    lines += md_table(rows, header)
    idle = [c["id"] for c in claims if not ran_anywhere(c)]
    if idle:
        lines += ["", f"Not run at any of these scales: {', '.join(f'`{i}`' for i in idle)}."]
    return lines


def _ran(r: dict[str, Any] | None) -> bool:
    return r is not None and r["ran"] and bool(r["n"])


def ran_anywhere(c: dict[str, Any]) -> bool:
    """Whether some decision metric of claim ``c`` has paired cells at some scale."""
    return any(_ran(a) for r in c["rows"] for a in r["at"].values())


def _claim_verdicts(v: dict[str, Any] | None) -> str:
    if v is None:
        return "not run"
    return f"**{v['replication']}**" + (f" / honest **{v['honest']}**" if v["honest"] else "")


def _sentence(c: dict[str, Any], scales: Sequence[Scale]) -> str:
    """One generated line per claim: each decision metric's effect per scale and its change."""
    parts = []
    for r in c["rows"]:
        chain = f"{_effect(r['at'][scales[0].profile])} at `{scales[0].profile}`"
        for s, step in zip(scales[1:], r["changes"], strict=True):
            chain += f" -> {_effect(r['at'][s.profile])} at `{s.profile}`: **{_change_text(step)}**"
        parts.append(f"{r['role']} `{r['metric']}`: {chain}")
    return (
        f"- **{c['id']}** ({c['claim']}; `{c['recipe']}` vs `{c['against']}`): "
        + ("; ".join(parts) or "no decision metric")
        + "."
    )


def plot_effects(path: Path, scales: Sequence[Scale], claims: list[dict[str, Any]], xm: str) -> Path:
    """Signed effect (95% interval bars) against the baseline's ``xm`` per scale, a panel per claim
    that ran somewhere."""
    import textwrap

    from matplotlib.transforms import ScaledTranslation

    from structpe.eval.report import pyplot

    plt = pyplot()
    claims = [c for c in claims if ran_anywhere(c)]
    n = max(1, len(claims))
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    xs = [s.baseline_score(xm)["mean"] for s in scales]
    for ax, c in zip(axes.flat, claims, strict=False):
        ys = [0.0]  # the panel's y range: every mean and interval end, and zero
        for j, r in enumerate(c["rows"]):
            # lines of one panel side by side by a few points, so equal x values do not hide each other
            dodge = ScaledTranslation((j - (len(c["rows"]) - 1) / 2) * 4 / 72, 0, fig.dpi_scale_trans)
            pts = [(x, r["at"][s.profile]) for x, s in zip(xs, scales, strict=True)]
            pts = [(x, a) for x, a in pts if _ran(a)]
            if not pts:
                continue
            ys += [v for _, a in pts for v in (a["mean"], *a["ci95"]) if v is not None and math.isfinite(v)]
            ax.errorbar(
                [x for x, _ in pts],
                [a["mean"] for _, a in pts],
                yerr=[
                    [_finite(a["mean"] - a["ci95"][0]) for _, a in pts],
                    [_finite(a["ci95"][1] - a["mean"]) for _, a in pts],
                ],
                marker="o",
                capsize=3,
                transform=ax.transData + dodge,
                label=f"{r['role']}: {r['metric']}",
            )
        ax.axhline(0.0, color="grey", lw=0.8, ls="--")
        # the dodge transform hides the bars from autoscaling, so the limits are set here
        ax.set_ylim(*_span(ys))
        ax.set_xlim(*_span([x for x in xs if math.isfinite(x)]))
        ax.set_title(textwrap.fill(f"{c['id']}: {c['claim']}", 48), fontsize=8)
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{s.profile}\n{x:.3f}" for s, x in zip(scales, xs, strict=True)], fontsize=7)
        ax.set_xlabel(f"baseline {xm}", fontsize=7)
        ax.set_ylabel("signed effect (> 0 = paper's way)", fontsize=7)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(claims) :]:
        ax.axis("off")
    return save_figure(fig, path, dpi=80)  # one panel per claim: 120 dpi made a 760 KB file


def _span(values: list[float], pad: float = 0.12) -> tuple[float, float]:
    """Axis limits around ``values`` with a margin of ``pad`` x their range (a unit range for one value)."""
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    margin = pad * (hi - lo) if hi > lo else max(abs(lo), 1.0) * pad
    return lo - margin, hi + margin


def _finite(x: float) -> float:
    return 0.0 if x is None or math.isnan(x) else float(x)


def write_scaling(
    folders: Sequence[str | Path],
    output: str | Path,
    x: str | None = None,
    order: str = "given",
    command: str | None = None,
) -> dict[str, Path]:
    """Aggregate each study folder and write the scaling page ``output`` (``.md``) with
    ``<stem>.json`` and ``<stem>.png`` beside it."""
    output = Path(output)
    if output.suffix != ".md":
        raise StudyError(f"--output {output}: must be a Markdown file (.md); the plot and JSON go beside it")
    if len(folders) < 2:
        raise StudyError(f"give at least two study folders, one per profile (got {len(folders)})")
    scales = [load_scale(f) for f in folders]
    check_scales(scales)
    xm = x_metric(x, scales)
    scales = order_scales(scales, order, xm)
    base = baseline_table(scales)
    claims = claims_across(scales)
    plot = plot_effects(output.with_suffix(".png"), scales, claims, xm)
    summary = {
        "study": scales[0].spec.name,
        "order": order,
        "x_metric": xm,
        "rule": rule_text(),
        "scales": [
            {
                "profile": s.profile,
                "folder": portable(str(s.folder)),
                "command": s.commands[-1] if s.commands else None,
                "commands": s.commands,
                "cells_finished": s.agg["cells_finished"],
                "cells_planned": s.agg["cells_planned"],
                "seeds": {label: r["seeds"] for label, r in s.agg["recipes"].items()},
                "hardware": machines_text(s.cells),
                "holm_family": s.agg["holm_family"],
            }
            for s in scales
        ],
        "baseline": base,
        "claims": claims,
        "command": command,
    }
    write_json_atomic(output.with_suffix(".json"), summary)
    atomic_write_text(output, render(scales, base, claims, xm, order, plot, command))
    print(f"study {summary['study']}: {len(scales)} scales compared -> {output}")
    return {"markdown": output, "json": output.with_suffix(".json"), "plot": plot}
