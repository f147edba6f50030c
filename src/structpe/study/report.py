"""``study.md`` / ``study.json`` and the plots of a study folder (``structpe study report``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from structpe.choices import LIKELIHOODS
from structpe.io import atomic_write_text, read_json, write_json_atomic
from structpe.study.aggregate import aggregate
from structpe.study.cell_metrics import load_cell_metrics, load_rerun_cells, machine_of
from structpe.study.data import study_data_root
from structpe.study.selection import folder_commands, folder_plan
from structpe.study.spec import StudySpec
from structpe.study.stages import REPORT_PLOTS, REPORT_SECTIONS, STAGES
from structpe.study.tables import fmt_num, fmt_p, md_table, pm, zero_nan
from structpe.study.wording import (
    COLUMNS,
    across_rows,
    claim_summary,
    count_of,
    describe,
    mode_note,
    paper_cell,
    portable,
    rule_text,
)


def chance_row(out: Path, spec: StudySpec, data_root: Path | None) -> dict[str, Any] | None:
    """What a model without information scores on the study's benchmarks, from each stage that
    has a chance row (``chance``): BLiMP 0.5, SyntaxGym by Monte Carlo per suite and circuit (not
    0.5 everywhere), GLUE the majority class of each task's (limited) training examples on its dev
    examples. Computed once per study folder (``chance.json``; a stage's part again when its
    settings change); None when no stage has one or their data is missing."""
    path = out / "chance.json"
    row: dict[str, Any] = read_json(path) if path.is_file() else {}
    before = dict(row)
    for stage in STAGES:
        sub = getattr(spec.evaluations, stage.KEY)
        if sub is not None and hasattr(stage, "chance"):
            row.update(stage.chance(sub, row, data_root) or {})
    if row != before:
        write_json_atomic(path, row)
    return row or None


def _ppl_modes(recipes: dict[str, Any]) -> list[str]:
    """The PPL modes the cells hold, in the order conditional, joint, marginal_k1 < k10 < ..., marginal."""
    modes = {
        m.split(".")[1]
        for r in recipes.values()
        for m in r["scores"]
        if m.startswith("ppl.") and m.endswith(".word_ppl")
    }

    def key(mode: str) -> tuple[int, int]:
        base, _, k = mode.partition("_k")
        rank = LIKELIHOODS.index(base) if base in LIKELIHOODS else len(LIKELIHOODS)
        return rank, int(k) if k.isdigit() else 1 << 30  # plain `marginal` (the largest k) last

    return sorted(modes, key=key)


def _plots(
    out: Path,
    agg: dict[str, Any],
    cells: list[dict[str, Any]],
    spec: StudySpec,
    chance: dict[str, Any] | None = None,
) -> list[Path]:
    from structpe.eval.blimp import CHANCE as BLIMP_CHANCE
    from structpe.eval.report import bar_plot

    recipes = agg["recipes"]
    plots: list[Path] = []

    def grouped(prefix: str) -> tuple[list[str], dict[str, list[float]], dict[str, list[float]]]:
        keys = sorted({m for r in recipes.values() for m in r["scores"] if m.startswith(prefix)})
        series, errors = {}, {}
        for label, r in recipes.items():
            series[label] = [r["scores"].get(k, {}).get("mean", math.nan) for k in keys]
            errors[label] = [zero_nan(r["scores"].get(k, {}).get("sd", 0.0)) for k in keys]
        return [k[len(prefix) :] for k in keys], series, errors

    for mode in LIKELIHOODS:
        for stage in REPORT_PLOTS:  # each stage's accuracy per group (circuit, phenomenon), per mode
            bench, (group, title, total) = stage.KEY, stage.GROUP_PLOT
            labels, series, errors = grouped(f"{bench}.{mode}.{group}.")
            hline = BLIMP_CHANCE  # a two-way choice's chance line, unless the stage has its own bars
            bars = stage.chance_bars(chance, labels) if hasattr(stage, "chance_bars") else None
            if bars is not None:
                series["chance"] = bars
                errors["chance"] = [0.0] * len(labels)
                hline = None
            if labels:
                metric = f"{bench}.{mode}.{total}"
                path = out / f"{bench}_{group}_{mode}.png"
                plots.append(
                    bar_plot(
                        path,
                        labels,
                        series,
                        errors=errors,
                        title=f"{title} (mean ± sd)\n{mode_note(metric)}; {count_of(metric, cells)}",
                        ylabel="accuracy",
                        hline=hline,
                    )
                )
    modes = _ppl_modes(recipes)
    if modes:
        series = {
            lab: [r["scores"].get(f"ppl.{m}.word_ppl", {}).get("mean", math.nan) for m in modes]
            for lab, r in recipes.items()
        }
        errors = {
            lab: [zero_nan(r["scores"].get(f"ppl.{m}.word_ppl", {}).get("sd", 0.0)) for m in modes]
            for lab, r in recipes.items()
        }
        plots.append(
            bar_plot(
                out / "ppl_modes.png",
                [f"{m} ({count_of(f'ppl.{m}.word_ppl', cells)})" for m in modes],
                series,
                errors=errors,
                title="test word PPL per likelihood mode (mean ± sd over seeds)\n"
                "joint / marginal of tagged recipes: upper bounds on their perplexity",
                ylabel="word PPL (lower is better)",
            )
        )
    for stage in STAGES:
        plot = stage.plot(out, agg, spec, chance) if hasattr(stage, "plot") else None
        if plot is not None:
            plots.append(plot)
    return plots


def _masked_lm_study(spec: StudySpec) -> bool:
    """Whether every recipe of the study is a masked LM (our encoders), which has no p(x)."""
    from structpe.train.recipe import load_recipe

    recipes = [load_recipe(spec.recipe_name(r.label)) for r in spec.recipes]
    return all(r.adapter is None and r.model.get("family") != "txl" for r in recipes)


def _likelihoods_line(spec: StudySpec) -> str:
    """What the likelihood modes mean for this study's models (a decoder's three, an encoder's PLL)."""
    if _masked_lm_study(spec):
        return (
            "- Likelihoods: a masked LM has no p(x); every score is its **pseudo-log-likelihood** "
            "(PLL, `within_word_l2r`: each token masked in turn with the later subwords of its word, "
            "Kauf & Ivanova 2023), perplexity its pseudo-perplexity, filed as `conditional`. A recipe "
            "that reads tags is **conditioned on one fixed parse** of the whole sentence (the paper's "
            "convention; marked *): the masked word's own tags are hidden, but the other words' tags "
            "come from a parse that saw it, so they can leak it. There is no leak-free (joint or "
            "marginal) score for a masked LM."
        )
    return (
        "- Likelihoods: `conditional` = p(x | T(x)), **conditioned on one fixed parse** of the whole "
        "sentence (the paper's convention; later words' tags leak into earlier predictions; marked *); "
        "`joint` = p(x, T) pays for every tag: honest for sentence totals (PPL, BLiMP), but its "
        "SyntaxGym *region* surprisals leak (earlier words' tags come from the whole-sentence parse, "
        "which differs between conditions; marked *); `marginal` = a k-best sum over tag sequences, "
        "a lower bound on p(x) (for SyntaxGym and BLiMP the leak-free prefix marginal). A recipe "
        "that reads no tags has its exact p(x) in every mode."
    )


def render(
    agg: dict[str, Any],
    spec: StudySpec,
    cells: list[dict[str, Any]],
    plots: list[Path],
    commands: list[str] | None = None,
    chance: dict[str, Any] | None = None,
    reruns: list[dict[str, Any]] | None = None,
) -> str:
    """The Markdown of study.md (``commands``: the runs' commands in order, see ``selection.folder_commands``;
    ``chance``: the chance row, see :func:`chance_row`; ``reruns``: the re-run cells the claims may
    pair, whose counts describe a metric only they have). Every verdict word and summary line is
    generated from the numbers; nothing is written by hand."""
    paired = [*cells, *(reruns or [])]
    claimed = {r["metric"] for c in agg["claims"] for g in ("metrics", "honest", "show") for r in c[g]}
    present = {m for c in cells for m in c["scores"]}
    columns = [(h, m) for h, m in COLUMNS if m in present or m in claimed]
    ns = sorted({p["n"] for per in agg["vs_baseline"].values() for p in per.values() if p["n"]})
    chance_same = ", ".join(f"{2.0 ** (1 - n):.3g} with {n} seed{'' if n == 1 else 's'}" for n in ns) or "-"
    lines = [f"# Study `{spec.name}` at profile `{spec.profile}`", ""]
    if spec.description:
        lines += [spec.description.strip(), ""]
    missing = agg.get("cells_missing") or []
    where = f"--profile {spec.profile} --output <folder>"
    lines += [
        f"- Cells finished: {agg['cells_finished']} of the {agg['cells_planned']} the profile plans"
        + (f" (not yet run: {', '.join(missing)})" if missing else "")
        + "; recipes on this page: "
        + ", ".join(f"{r.label} x {len(spec.recipe_seeds(r.label))}" for r in spec.recipes)
        + f" seeds; baseline `{spec.baseline}`.",
        f"- Profile `{spec.profile}`: {spec.profile_description or '-'}",
        f"- Recipes at profile `{spec.profile}` (recipe profile `{spec.recipe_profile}`, overrides "
        f"`{' '.join(spec.profile_overrides) or '-'}`); data: {spec.dataset.corpus}, parser "
        f"{spec.dataset.parser}, {spec.dataset.train_sentences} train sentences.",
        "- Commands (resumable; `report` rebuilds this page from the cells' `metrics.json`):",
        "",
        "```bash",
        *([portable(c) for c in commands or []] or [f"structpe study run {spec.name} {where}"]),
        "structpe study report <folder>",
        "```",
        "",
        _likelihoods_line(spec),
        *rule_text(
            [r["n"] for c in agg["claims"] for g in ("metrics", "honest") for r in c[g]], agg["holm_family"]
        ),
        "- The paper's numbers come from models far larger and trained far longer (its decoders: 16 "
        "layers, 1M steps on BLLIP-LG / WikiText); a CPU profile tests the *direction* of each claim at "
        "small scale, not its size.",
        "",
        "## Verdicts (generated from the tables below)",
        "",
        *(claim_summary(c, paired) for c in agg["claims"]),
        "",
        "## Claims",
        "",
        "Differences signed so that > 0 = the paper's direction. Roles: `replication` decides the "
        "replication verdict (the paper's protocol), `honest` the second verdict on leak-free "
        "likelihoods, `shown` is reported beside them and not tested (no verdict, not in the family). "
        "Holm p: the adjusted p of the test in the paper's direction (< 0.05: replicates) / of the "
        "opposite test (< 0.05: contradicts); - for a test outside the family (a bound, an estimate "
        "without a passed convergence check, a cost check: its verdict column says which).",
        "",
    ]
    lines += _claims_table(agg, paired)
    lines += [
        "",
        f"## Across recipes against `{spec.baseline}` (descriptive, not tests)",
        "",
        "With n seeds a null effect moves every seed the same way (either way) with probability "
        f"2^(1-n) ({chance_same}), so these counts are descriptions, not evidence.",
        "",
        *across_rows(agg, [m for _, m in columns], cells),
        "",
        "## Recipes (mean ± sd over seeds)",
        "",
        "Column headers give the likelihood mode and the count of sentences / pairs / suites; * leaks; "
        "joint / marginal PPL of a tagged recipe is an upper bound on its perplexity.",
        "",
    ]
    lines += _recipes_table(agg, columns, cells, chance)
    lines += [
        "",
        f"## Paired differences to the baseline `{spec.baseline}` (same seed)",
        "",
        "Signed so that > 0 = the recipe is better (lower PPL / loss, higher accuracy). Descriptive: "
        "no verdict, not in the claims' family.",
        "",
    ]
    lines += _paired_table(agg, columns, cells)
    for stage in REPORT_SECTIONS:
        lines += stage.section(agg, spec, cells, chance)
    lines += [
        "",
        "## Cells",
        "",
        "Wall times in seconds, measured on the machine that ran the cell (possibly shared); `train s` "
        "of a cell resumed after an interruption sums its sittings up to the checkpoint it resumed from "
        "(work redone after that checkpoint is not counted twice).",
        "",
    ]
    lines += _cells_table(cells)
    lines.append("")
    lines += [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def _claims_table(agg: dict[str, Any], cells: list[dict[str, Any]]) -> list[str]:
    """The claims table: each test of each claim by role, and each claim's verdicts."""
    lines: list[str] = []
    rows = []
    for c in agg["claims"]:
        for role, group in (("replication", c["metrics"]), ("honest", c["honest"]), ("shown", c["show"])):
            for r in group:
                tested = role != "shown"
                rows.append(
                    [
                        f"{c['id']}: {c['claim']}",
                        role,
                        describe(r["metric"], cells) + (f" (bound: {r['bound']})" if r["bound"] else ""),
                        paper_cell(c["paper"]),
                        f"{c['against']}: {pm(r['against'])}",
                        f"{c['recipe']}: {pm(r['recipe'])}",
                        ", ".join(fmt_num(d) for d in r["signed"]) or "-",
                        f"{fmt_num(r['mean'])} [{fmt_num(r['ci95'][0])}, {fmt_num(r['ci95'][1])}]",
                        fmt_p(r["p"]),
                        f"{fmt_p(r['p_adj'])} / {fmt_p(r['p_against_adj'])}" if tested else "-",
                        f"{fmt_p(r['p_perm'])} (min {fmt_p(r['p_perm_min'])})",
                        (r["verdict"] if tested else "-") if r["ran"] else "not run",
                    ]
                )
        verdicts = ("**cost check**" if c.get("cost") else f"**{c['verdict']}**") + (
            f" / honest **{c['honest_verdict']}**" if c["honest"] else ""
        )
        rows.append([f"**{c['id']}**", "", "", "", "", "", "", "", "", "", "", verdicts])
    lines += md_table(
        rows,
        [
            "claim",
            "role",
            "metric [mode; n]",
            "paper",
            "comparison (mean ± sd)",
            "recipe (mean ± sd)",
            "signed diff per seed",
            "mean [95% t CI]",
            "one-sided p",
            "Holm p (paper's way / opposite)",
            "sign-flip p",
            "verdict",
        ],
    )
    return lines


def _recipes_table(
    agg: dict[str, Any],
    columns: list[tuple[str, str]],
    cells: list[dict[str, Any]],
    chance: dict[str, Any] | None,
) -> list[str]:
    """The recipes table (mean ± sd per column), with the chance row where it is known."""
    lines: list[str] = []
    rows = []
    for label, r in agg["recipes"].items():
        s = r["scores"]
        rows.append(
            [
                f"{label} (`{r['recipe']}`{', reads tags' if r['reads_tags'] else ''})",
                str(len(r["seeds"])),
                *(pm(s[k]) if s.get(k, {}).get("n") else "not run" for _, k in columns),
                pm(r["wall_s"], 1 / 60),
            ]
        )
    if chance and "syntaxgym" in chance:
        at = {
            **{f"blimp.{m}.overall": chance["blimp"] for m in LIKELIHOODS},
            **{f"syntaxgym.{m}.sg_score": chance["syntaxgym"] for m in LIKELIHOODS},
        }
        rows.append(["*chance*", "-", *(f"*{at[k]:.3f}*" if k in at else "-" for _, k in columns), "-"])
    header = [f"{h} [{'; '.join(x for x in (mode_note(k), count_of(k, cells)) if x)}]" for h, k in columns]
    lines += md_table(rows, ["recipe", "seeds", *(h.replace(" []", "") for h in header), "wall min/cell"])
    if chance and "syntaxgym" in chance:
        lines += [
            "",
            f"*chance*: what a model without information scores. BLiMP 0.5; SyntaxGym by Monte Carlo "
            f"({chance['syntaxgym_method']}), per circuit in the SyntaxGym plots (`chance.json`).",
        ]
    return lines


def _paired_table(
    agg: dict[str, Any], columns: list[tuple[str, str]], cells: list[dict[str, Any]]
) -> list[str]:
    """The paired differences of each recipe to the baseline, per column."""
    lines: list[str] = []
    rows = []
    for label, per in agg["vs_baseline"].items():
        for _, k in columns:
            if k in per and per[k]["n"]:
                p = per[k]
                rows.append(
                    [
                        label,
                        describe(k, cells) + (f" (bound: {p['bound']})" if p["bound"] else ""),
                        ", ".join(fmt_num(d) for d in p["signed"]),
                        f"{p['n_positive']}/{p['n']}",
                        f"{fmt_num(p['mean'])} [{fmt_num(p['ci95'][0])}, {fmt_num(p['ci95'][1])}]",
                    ]
                )
    lines += md_table(
        rows, ["recipe", "metric [mode; n]", "signed diff per seed", "seeds better", "mean [95% t CI]"]
    )
    return lines


def _cells_table(cells: list[dict[str, Any]]) -> list[str]:
    """One row per cell: its steps, wall times, machine and configuration hash."""
    lines: list[str] = []
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
                machine_of(c) or "not recorded",
                c["config_hash"][:12],
            ]
        )
    lines += md_table(
        rows, ["recipe", "seed", "steps", "train s", "eval s", "total s", "resumed", "machine", "config hash"]
    )
    return lines


def write_study_report(
    out: str | Path, spec: StudySpec, command: str | None = None, data_dir: str | Path | None = None
) -> dict[str, Path]:
    """Aggregate the finished cells of ``out`` into study.json, study.md and the plots
    (``command``: the command to print when the folder records none; ``data_dir``: the data root
    the chance row reads, default ``$STRUCTPE_DATA``)."""
    out = Path(out)
    cells = load_cell_metrics(out)
    reruns = load_rerun_cells(out)
    agg = aggregate(cells, spec, folder_plan(out), reruns)
    chance = chance_row(out, spec, study_data_root(data_dir, required=False)) if cells else None
    plots = _plots(out, agg, cells, spec, chance) if cells else []
    commands = folder_commands(out) or ([command] if command else [])
    summary = {
        **agg,
        "spec": spec.to_dict(),
        "command": commands[-1] if commands else None,
        "commands": commands,
        "chance": chance,
    }
    write_json_atomic(out / "study.json", summary)
    atomic_write_text(out / "study.md", render(agg, spec, cells, plots, commands, chance, reruns))
    print(f"study {spec.name}: {len(cells)} cells aggregated -> {out / 'study.md'}")
    return {"json": out / "study.json", "markdown": out / "study.md"}
