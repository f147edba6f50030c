"""``study.md`` / ``study.json`` and the plots of a study folder (``structpe study report``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from structpe.io import atomic_write_text, read_json, write_json_atomic
from structpe.study.aggregate import aggregate, load_cell_metrics
from structpe.study.spec import LIKELIHOODS, StudySpec

SHORT = {"conditional": "conditional: one fixed parse", "joint": "joint p(x, T)"}
TABLE_METRICS = (
    ("val LM loss", "val_lm_loss"),
    ("word PPL cond.*", "ppl.conditional.word_ppl"),
    ("word PPL joint", "ppl.joint.word_ppl"),
    ("word PPL marg.", "ppl.marginal.word_ppl"),
    ("BLiMP cond.*", "blimp.conditional.overall"),
    ("BLiMP joint", "blimp.joint.overall"),
    ("SG cond.*", "syntaxgym.conditional.sg_score"),
    ("SG joint", "syntaxgym.joint.sg_score"),
    ("leak. surviving share", "leakage.summary.surviving_share"),
)


def _pm(s: dict[str, Any] | None, scale: float = 1.0) -> str:
    if not s or s.get("n", 0) == 0 or s["mean"] is None or math.isnan(s["mean"]):
        return "-"
    prec = 3 if abs(s["mean"] * scale) < 10 else 1
    sd = s.get("sd")
    tail = "" if sd is None or math.isnan(sd) else f" ± {sd * scale:.{prec}f}"
    return f"{s['mean'] * scale:.{prec}f}{tail}"


def _num(x: float | None, prec: int = 3) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:+.{prec}f}"


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _paper_cell(paper: dict[str, Any]) -> str:
    if not paper:
        return "-"
    base, rec = paper.get("baseline"), paper.get("recipe")
    where = paper.get("source", "")
    return f"{base} -> {rec} ({where})" if base is not None else str(where)


BLIMP_CHANCE = 0.5  # two sentences per pair, one of them preferred


def chance_row(out: Path, spec: StudySpec, data_dir: str | None = None) -> dict[str, Any] | None:
    """What a model without information scores on the study's benchmarks: BLiMP 0.5, SyntaxGym
    by Monte Carlo per suite and circuit (``chance_scores``; not 0.5 everywhere). Computed once per
    study folder (``chance.json``); None when the study has no SyntaxGym or the data is missing."""
    path = out / "chance.json"
    if path.is_file():
        return read_json(path)
    if spec.evaluations.syntaxgym is None:
        return None
    from structpe.data.paths import data_root
    from structpe.eval.syntaxgym import chance_scores, load_suites, paper_suites

    try:
        root = Path(data_root(data_dir)) / "syntaxgym"
        names = spec.evaluations.syntaxgym.suites
        suites = load_suites(root, paper_suites(root) if names == "paper31" else list(names))
    except FileNotFoundError:
        return None
    sg = chance_scores(suites, seed=0)
    row = {
        "blimp": BLIMP_CHANCE,
        "syntaxgym": sg["sg_score"],
        "syntaxgym_circuits": sg["circuits"],
        "syntaxgym_method": f"{sg['distribution']}, {sg['draws_per_item']} draws per item, seed {sg['seed']}",
    }
    write_json_atomic(path, row)
    return row


def _plots(out: Path, agg: dict[str, Any], chance: dict[str, Any] | None = None) -> list[Path]:
    from structpe.eval.report import bar_plot

    recipes = agg["recipes"]
    plots: list[Path] = []

    def grouped(prefix: str) -> tuple[list[str], dict[str, list[float]], dict[str, list[float]]]:
        keys = sorted({m for r in recipes.values() for m in r["scores"] if m.startswith(prefix)})
        series, errors = {}, {}
        for label, r in recipes.items():
            series[label] = [r["scores"].get(k, {}).get("mean", math.nan) for k in keys]
            errors[label] = [_zero_nan(r["scores"].get(k, {}).get("sd", 0.0)) for k in keys]
        return [k[len(prefix) :] for k in keys], series, errors

    groups = (
        ("syntaxgym", "circuit", "SyntaxGym per circuit"),
        ("blimp", "phenomenon", "BLiMP per phenomenon"),
    )
    for mode in ("conditional", "joint"):
        for bench, group, title in groups:
            labels, series, errors = grouped(f"{bench}.{mode}.{group}.")
            hline = 0.5
            if bench == "syntaxgym" and chance is not None:  # chance differs per circuit: bars, no line
                circuits = chance["syntaxgym_circuits"]
                series["chance"] = [circuits.get(c, math.nan) for c in labels]
                errors["chance"] = [0.0] * len(labels)
                hline = None
            if labels:
                path = out / f"{bench}_{group}_{mode}.png"
                plots.append(
                    bar_plot(
                        path,
                        labels,
                        series,
                        errors=errors,
                        title=f"{title}, {SHORT[mode]} (mean ± sd over seeds)",
                        ylabel="accuracy",
                        hline=hline,
                    )
                )
    modes = [m for m in LIKELIHOODS if any(f"ppl.{m}.word_ppl" in r["scores"] for r in recipes.values())]
    if modes:
        series = {
            lab: [r["scores"].get(f"ppl.{m}.word_ppl", {}).get("mean", math.nan) for m in modes]
            for lab, r in recipes.items()
        }
        errors = {
            lab: [_zero_nan(r["scores"].get(f"ppl.{m}.word_ppl", {}).get("sd", 0.0)) for m in modes]
            for lab, r in recipes.items()
        }
        plots.append(
            bar_plot(
                out / "ppl_modes.png",
                modes,
                series,
                errors=errors,
                title="test word PPL per likelihood mode (mean ± sd over seeds)",
                ylabel="word PPL (lower is better)",
            )
        )
    return plots


def _zero_nan(x: float | None) -> float:
    return 0.0 if x is None or math.isnan(x) else float(x)


def render(
    agg: dict[str, Any],
    spec: StudySpec,
    cells: list[dict[str, Any]],
    plots: list[Path],
    command: str | None = None,
    chance: dict[str, Any] | None = None,
) -> str:
    """The Markdown of study.md (``chance``: the chance row, see :func:`chance_row`)."""
    lines = [f"# Study `{spec.name}` at profile `{spec.profile}`", ""]
    if spec.description:
        lines += [spec.description.strip(), ""]
    lines += [
        f"- Cells finished: {agg['cells_finished']} of {agg['cells_planned']} "
        f"({len(spec.recipes)} recipes x seeds {spec.seeds}); baseline `{spec.baseline}`.",
        f"- Profile `{spec.profile}`: {spec.profile_description or '-'}",
        f"- Recipes at profile `{spec.profile}` (recipe profile `{spec.recipe_profile}`, overrides "
        f"`{' '.join(spec.profile_overrides) or '-'}`); data: {spec.dataset.corpus}, parser "
        f"{spec.dataset.parser}, {spec.dataset.train_sentences} train sentences.",
    ]
    if command:
        lines.append(f"- Reproduce: `{command}`")
    lines += [
        "- Likelihoods: `conditional` = p(x | T(x)), **conditioned on one fixed parse** (the paper's "
        "convention; later words' tags leak into earlier predictions); `joint` = p(x, T) pays for "
        "every tag; `marginal` = a k-best lower bound on p(x). Only `joint` and `marginal` are "
        "comparable with the baseline's p(x); columns marked * are conditioned on one fixed parse.",
        "- Verdict rule: per metric, the paired per-seed differences (recipe - comparison, same seed) "
        "are signed so that > 0 is the paper's direction; the 95% percentile-bootstrap CI of their "
        "mean (seeds resampled, 10,000 draws) above 0 = **replicates**, at or below 0 = **does not**, "
        "straddling 0 or fewer than 2 seeds = **inconclusive**. A claim with several verdict metrics "
        "replicates if all replicate, does not if none does, else inconclusive. With 3 seeds the "
        "lower CI bound is the smallest difference: replicates = every seed moves the paper's way.",
        "- The paper's numbers come from 16-layer models trained 1M steps on BLLIP-LG / WikiText; a "
        "CPU profile tests the *direction* of each claim at small scale, not its size.",
        "",
        "## Claims",
        "",
    ]
    rows = []
    for c in agg["claims"]:
        for kind, group in (("verdict", c["metrics"]), ("shown", c["show"])):
            for r in group:
                mode = r["metric"].split(".")[1] if r["metric"].count(".") >= 2 else ""
                note = " (fixed parse)" if mode == "conditional" else ""
                rows.append(
                    [
                        f"{c['id']}: {c['claim']}",
                        f"`{r['metric']}`{note} ({kind})",
                        _paper_cell(c["paper"]),
                        f"{c['against']}: {_pm(r['against'])}",
                        f"{c['recipe']}: {_pm(r['recipe'])}",
                        ", ".join(_num(d) for d in r["diffs"]) or "-",
                        f"{_num(r['mean_diff'])} [{_num(r['ci95'][0])}, {_num(r['ci95'][1])}]",
                        r["verdict"] if kind == "verdict" else f"({r['verdict']})",
                    ]
                )
        rows.append([f"**{c['id']}**", "", "", "", "", "", "", f"**{c['verdict']}**"])
    lines += _table(
        rows,
        [
            "claim",
            "metric",
            "paper",
            "comparison (mean ± sd)",
            "recipe (mean ± sd)",
            "paired diff per seed",
            "mean diff [95% CI]",
            "verdict",
        ],
    )
    lines += ["", "## Recipes (mean ± sd over seeds)", ""]
    rows = []
    for label, r in agg["recipes"].items():
        s = r["scores"]
        rows.append(
            [
                f"{label} (`{r['recipe']}`)",
                str(len(r["seeds"])),
                *(_pm(s.get(k)) for _, k in TABLE_METRICS),
                _pm(r["wall_s"], 1 / 60),
            ]
        )
    if chance is not None:
        at = {
            "blimp.conditional.overall": chance["blimp"],
            "blimp.joint.overall": chance["blimp"],
            "syntaxgym.conditional.sg_score": chance["syntaxgym"],
            "syntaxgym.joint.sg_score": chance["syntaxgym"],
        }
        rows.append(["*chance*", "-", *(f"*{at[k]:.3f}*" if k in at else "-" for _, k in TABLE_METRICS), "-"])
    lines += _table(rows, ["recipe", "seeds", *(h for h, _ in TABLE_METRICS), "wall min/cell"])
    if chance is not None:
        lines += [
            "",
            f"*chance*: what a model without information scores. BLiMP 0.5; SyntaxGym by Monte Carlo "
            f"({chance['syntaxgym_method']}), per circuit in the SyntaxGym plots (`chance.json`).",
        ]
    lines += ["", f"## Paired differences to the baseline `{spec.baseline}` (same seed)", ""]
    rows = []
    for label, per in agg["vs_baseline"].items():
        for _, k in TABLE_METRICS:
            if k in per and per[k]["diffs"]:
                p = per[k]
                rows.append(
                    [
                        label,
                        f"`{k}`",
                        ", ".join(_num(d) for d in p["diffs"]),
                        f"{_num(p['mean_diff'])} [{_num(p['ci95'][0])}, {_num(p['ci95'][1])}]",
                        p["better"],
                        p["verdict"],
                    ]
                )
    lines += _table(rows, ["recipe", "metric", "diff per seed", "mean [95% CI]", "better", "rule"])
    lines += [
        "",
        "## Leakage audit: how much of the conditional gain survives causal tagging",
        "",
        "Share = max(best causal-condition gain, 0) / full-parse gain, gains = 1 - word PPL / the "
        "same seed's baseline p(x) word PPL (undefined when the full parse gains nothing). 0 = the "
        "whole conditional gain is leakage (or needs non-causal tags), 1 = all of it survives.",
        "",
    ]
    rows = []
    for label, r in agg["recipes"].items():
        s = r["scores"]
        if not s.get("leakage.full.gain", {}).get("n"):
            continue  # no audit for this recipe (e.g. the baseline reads no tags)
        share = s.get("leakage.summary.surviving_share", {})
        causal = [k for k in s if k.startswith("leakage.prefix") and k.endswith(".gain")]
        rows.append(
            [
                label,
                _pm(s["leakage.full.gain"]),
                *(_pm(s[k]) for k in sorted(causal)),
                _pm(share),
                ", ".join(f"{v:.3f}" for v in share.get("by_seed", {}).values()) or "-",
            ]
        )
    if rows:
        causal_names = sorted(
            {
                k.split(".")[1]
                for r in agg["recipes"].values()
                for k in r["scores"]
                if k.startswith("leakage.prefix") and k.endswith(".gain")
            }
        )
        lines += _table(
            rows,
            [
                "recipe",
                "full-parse gain",
                *(f"{c} gain" for c in causal_names),
                "surviving share",
                "per seed",
            ],
        )
    else:
        lines.append("(no leakage audit in this study)")
    lines += [
        "",
        "## Cells",
        "",
        "Wall times in seconds, measured on the machine that ran the cell (possibly shared); `train s` "
        "of a cell resumed after an interruption sums its sittings up to the checkpoint it resumed from "
        "(work redone after that checkpoint is not counted twice).",
        "",
    ]
    rows = []
    for c in cells:
        w = c["wall_s"]
        evals = sum(v for k, v in w.items() if k not in ("train", "total"))
        rows.append(
            [
                c["recipe_label"],
                str(c["seed"]),
                str(c["train"].get("steps")),
                f"{w.get('train', 0):.0f}",
                f"{evals:.0f}",
                f"{w.get('total', 0):.0f}",
                "yes" if c["train"].get("resumed_from") else "no",
                c["config_hash"][:12],
            ]
        )
    lines += _table(
        rows, ["recipe", "seed", "steps", "train s", "eval s", "total s", "resumed", "config hash"]
    )
    lines.append("")
    lines += [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def write_study_report(out: str | Path, spec: StudySpec, command: str | None = None) -> dict[str, Path]:
    """Aggregate the finished cells of ``out`` into study.json, study.md and the plots."""
    out = Path(out)
    cells = load_cell_metrics(out)
    agg = aggregate(cells, spec)
    chance = chance_row(out, spec) if cells else None
    plots = _plots(out, agg, chance) if cells else []
    command = command or _command_from(out)
    summary = {**agg, "spec": spec.to_dict(), "command": command, "chance": chance}
    write_json_atomic(out / "study.json", summary)
    atomic_write_text(out / "study.md", render(agg, spec, cells, plots, command, chance))
    print(f"study {spec.name}: {len(cells)} cells aggregated -> {out / 'study.md'}")
    return {"json": out / "study.json", "markdown": out / "study.md"}


def _command_from(out: Path) -> str | None:
    p = out / "spec.json"
    return read_json(p).get("command") if p.is_file() else None
