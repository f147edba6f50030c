"""One study's claims across its profiles (scales), read against the baseline's own quality
(``structpe study scaling``).

Each study folder is aggregated by its own :func:`structpe.study.aggregate.aggregate` (paired
per-seed differences signed so that > 0 is the paper's direction, their paired-t 95% interval,
the verdict under that study's Holm family); nothing here recomputes a statistic. What this
module adds is the comparison between two scales, a description and not a test (:func:`change`):

- **flips sign**: the two 95% intervals exclude zero on opposite sides;
- **grows** / **shrinks**: the later scale's interval lies wholly above / below the earlier
  scale's mean (the signed effect moves towards / away from the paper's direction);
- **stays within noise**: both intervals contain zero;
- **not distinguishable at these seed counts**: anything else, or fewer than two paired seeds;
- **not run**: the claim's recipe or metric has no cells at one of the two scales;
- **protocols differ**: the two scales scored the metric under other evaluation settings (the
  pairs, suites or beam width that ``spec.json`` records, :func:`structpe.study.spec.score_settings`):
  their effects are not the same measurement, so no change word is given.

The rules are checked in this order, "protocols differ" first. "Later" is the page's order of
scales (the order given, or the baseline's quality, worst first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structpe.io import atomic_write_text, read_json, save_figure, write_json_atomic
from structpe.study.aggregate import aggregate, better_of, load_cell_metrics, machines_text
from structpe.study.cells import StudyError
from structpe.study.spec import StudySpec, folder_commands, folder_plan, folder_spec, score_settings
from structpe.study.wording import COLUMNS, _num, count_of, md_table, mode_note, pm, portable

NOT_DISTINGUISHABLE = "not distinguishable at these seed counts"
PROTOCOLS_DIFFER = "protocols differ"
CHANGES = (
    "flips sign",
    "grows",
    "shrinks",
    "stays within noise",
    NOT_DISTINGUISHABLE,
    "not run",
    PROTOCOLS_DIFFER,
)
KINDS = ("val LM loss", "word PPL", "BLiMP", "SG")  # the baseline's scores per scale, COLUMNS' names
X_CHOICES = {"syntaxgym": "SG", "val_lm_loss": "val LM loss"}  # --x: the plot's baseline quality
ORDERS = ("given", "quality")


@dataclass
class Scale:
    """One study folder: its spec (at its profile), finished cells, aggregate and chance row."""

    folder: Path
    spec: StudySpec
    cells: list[dict[str, Any]]
    agg: dict[str, Any]
    chance: dict[str, Any] | None
    commands: list[str]  # the folder's runs, in order (a study run in slices has several)
    saved: dict[str, Any]  # spec.json's `spec`: the settings its cells were evaluated under

    @property
    def profile(self) -> str:
        return self.spec.profile

    def baseline_score(self, metric: str | None) -> dict[str, Any]:
        """The baseline's mean ± sd (and n seeds) of ``metric``; n = 0 when it has none."""
        scores = self.agg["recipes"][self.spec.baseline]["scores"]
        return scores.get(metric or "", {"mean": math.nan, "sd": math.nan, "n": 0})


def load_scale(folder: str | Path) -> Scale:
    """Read and aggregate one study folder (its ``spec.json`` and ``cells/*/seed-*/metrics.json``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise StudyError(f"{folder}: not a folder (expected a study folder written by `structpe study run`)")
    spec = folder_spec(folder)
    cells = load_cell_metrics(folder)
    if not cells:
        raise StudyError(f"{folder}: no finished cells (no cells/<recipe>/seed-<s>/metrics.json)")
    chance = read_json(folder / "chance.json") if (folder / "chance.json").is_file() else None
    saved = read_json(folder / "spec.json").get("spec") or {}
    agg = aggregate(cells, spec, folder_plan(folder))
    return Scale(folder, spec, cells, agg, chance, folder_commands(folder), saved)


def protocol_difference(a: Scale, b: Scale, metric: str) -> str | None:
    """The evaluation settings of ``metric`` in which scale ``b`` differs from ``a`` (as their
    ``spec.json`` record them), in words; None when they scored it alike."""
    sa, sb = score_settings(a.saved, metric), score_settings(b.saved, metric)
    unset = "not recorded"
    keys = [k for k in dict.fromkeys([*sa, *sb]) if sa.get(k, unset) != sb.get(k, unset)]
    said = [
        f"`{k}` {_setting(sa.get(k, unset))} at `{a.profile}`, {_setting(sb.get(k, unset))} at `{b.profile}`"
        for k in keys
    ]
    return "; ".join(said) or None


def _setting(value: Any) -> str:
    if isinstance(value, list) and len(value) > 4:
        return f"{len(value)} named ({', '.join(map(str, value[:2]))}, ...)"
    return "null" if value is None else str(value)


def check_scales(scales: Sequence[Scale]) -> None:
    """One study at different profiles: anything else is no scaling comparison."""
    names = {s.spec.name for s in scales}
    if len(names) > 1:
        found = ", ".join(f"{s.folder} is {s.spec.name!r}" for s in scales)
        raise StudyError(f"the folders hold different studies ({found}); compare one study's profiles")
    seen: dict[str, Path] = {}
    for s in scales:
        if s.profile in seen:
            raise StudyError(
                f"{seen[s.profile]} and {s.folder} are both profile {s.profile!r}; "
                "a scaling page compares different profiles"
            )
        seen[s.profile] = s.folder


def kind_metric(kind: str, scales: Sequence[Scale]) -> str | None:
    """The first metric of ``kind`` (a short name of ``COLUMNS``) that some scale's baseline has.
    The baseline reads no tags, so its score is its exact p(x)'s in every likelihood mode."""
    for name, metric in COLUMNS:
        if name == kind and any(s.baseline_score(metric)["n"] for s in scales):
            return metric
    return None


def x_metric(x: str | None, scales: Sequence[Scale]) -> str:
    """The baseline score on the plot's x axis: ``--x``, else SyntaxGym where every scale has it,
    else the validation loss."""
    choices = [x] if x else list(X_CHOICES)
    for choice in choices:
        if choice not in X_CHOICES:
            raise StudyError(f"--x {choice}: choose from {', '.join(X_CHOICES)}")
        metric = kind_metric(X_CHOICES[choice], scales)
        missing = [s for s in scales if not s.baseline_score(metric)["n"]]
        if not missing:
            return str(metric)
        if x:
            raise StudyError(
                f"--x {x}: the baseline of {missing[0].folder} has no {X_CHOICES[x]} score; "
                f"choose from {', '.join(X_CHOICES)}"
            )
    raise StudyError("no baseline score (SyntaxGym or validation loss) at every scale to plot against")


def order_scales(scales: list[Scale], order: str, metric: str) -> list[Scale]:
    """``given``: as listed; ``quality``: by the baseline's ``metric``, worst first."""
    if order not in ORDERS:
        raise StudyError(f"--order {order}: choose from {', '.join(ORDERS)}")
    if order == "given":
        return list(scales)
    sign = 1.0 if better_of(metric) == "higher" else -1.0
    return sorted(scales, key=lambda s: sign * s.baseline_score(metric)["mean"])


def change(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    """How a signed effect moves from an earlier scale's row ``a`` to a later one's ``b`` (rows as
    :func:`structpe.study.aggregate.paired` builds them; None = not in that study). The rule is
    the module docstring's; a description, not a test."""
    if a is None or b is None or not a["ran"] or not b["ran"] or not a["n"] or not b["n"]:
        return "not run"
    if a["n"] < 2 or b["n"] < 2:
        return NOT_DISTINGUISHABLE
    (alo, ahi), (blo, bhi) = a["ci95"], b["ci95"]
    if (alo > 0 and bhi < 0) or (ahi < 0 and blo > 0):
        return "flips sign"
    if blo > a["mean"]:
        return "grows"
    if bhi < a["mean"]:
        return "shrinks"
    if alo <= 0 <= ahi and blo <= 0 <= bhi:
        return "stays within noise"
    return NOT_DISTINGUISHABLE


def claims_across(scales: Sequence[Scale]) -> list[dict[str, Any]]:
    """Per claim (in first-seen order): its verdicts per scale and, per decision metric (role,
    metric), the scale's aggregate row (None: not in that study) and the change between each
    pair of neighbouring scales."""
    found: dict[str, dict[str, Any]] = {}
    for s in scales:
        for c in s.agg["claims"]:
            found.setdefault(c["id"], c)
    out = []
    for cid, first in found.items():
        per = {s.profile: next((c for c in s.agg["claims"] if c["id"] == cid), None) for s in scales}
        keys: list[tuple[str, str]] = []
        for c in per.values():
            for role, group in (("replication", "metrics"), ("honest", "honest")):
                for r in (c or {}).get(group, []):
                    if (role, r["metric"]) not in keys:
                        keys.append((role, r["metric"]))
        rows = []
        for role, metric in keys:
            group = "metrics" if role == "replication" else "honest"
            at = {
                p: next((r for r in c[group] if r["metric"] == metric), None) if c else None
                for p, c in per.items()
            }
            steps = []
            for a, b in zip(scales, scales[1:], strict=False):
                differs = protocol_difference(a, b, metric)
                word = PROTOCOLS_DIFFER if differs else change(at[a.profile], at[b.profile])
                step = {"from": a.profile, "to": b.profile, "change": word}
                steps.append({**step, "protocol": differs} if differs else step)
            rows.append({"role": role, "metric": metric, "at": at, "changes": steps})
        out.append(
            {
                "id": cid,
                "claim": first["claim"],
                "recipe": first["recipe"],
                "against": first["against"],
                "better": first["better"],
                "verdicts": {
                    p: {"replication": c["verdict"], "honest": c["honest_verdict"] if c["honest"] else None}
                    if c
                    else None
                    for p, c in per.items()
                },
                "rows": rows,
            }
        )
    return out


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
    return f"{_num(r['mean'])} [{_num(r['ci95'][0])}, {_num(r['ci95'][1])}] (n {r['n']}{bound})"


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

    from structpe.eval.report import import_pyplot

    plt = import_pyplot()
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
    return save_figure(fig, path)


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
