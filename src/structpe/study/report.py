"""``study.md`` / ``study.json`` and the plots of a study folder (``structpe study report``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from structpe.eval.glue.tasks import TASKS
from structpe.eval.syntaxgym.evaluate import suite_names
from structpe.io import atomic_write_text, read_json, write_json_atomic
from structpe.study.aggregate import aggregate, load_cell_metrics, machine_of
from structpe.study.spec import LIKELIHOODS, GlueSpec, StudySpec, folder_commands, folder_plan
from structpe.study.wording import (
    COLUMNS,
    across_rows,
    claim_summary,
    count_of,
    describe,
    fmt_num,
    fmt_p,
    md_table,
    mode_note,
    paper_cell,
    pm,
    portable,
    rule_text,
    zero_nan,
)

BLIMP_CHANCE = 0.5  # two sentences per pair, one of them preferred
# how the GLUE section names `evaluations.glue.bf16`
PRECISION = {False: "float32", True: "bf16 autocast", "auto": "bf16 autocast where native (else float32)"}


def chance_row(out: Path, spec: StudySpec, data_dir: str | None = None) -> dict[str, Any] | None:
    """What a model without information scores on the study's benchmarks: BLiMP 0.5, SyntaxGym
    by Monte Carlo per suite and circuit (``chance_scores``; not 0.5 everywhere), GLUE the majority
    class of each task's (limited) training examples on its dev examples (``majority_baseline``).
    Computed once per study folder (``chance.json``; the GLUE part again when its tasks or limit
    change); None when the study has neither SyntaxGym nor GLUE, or their data is missing."""
    path = out / "chance.json"
    row: dict[str, Any] = read_json(path) if path.is_file() else {}
    before = dict(row)
    if spec.evaluations.syntaxgym is not None and "syntaxgym" not in row:
        row.update(_syntaxgym_chance(spec, data_dir) or {})
    glue = spec.evaluations.glue
    if glue is not None and row.get("glue_settings") != {"tasks": glue.tasks, "limit": glue.limit}:
        row.update(_glue_chance(glue, data_dir) or {})
    if row != before:
        write_json_atomic(path, row)
    return row or None


def _syntaxgym_chance(spec: StudySpec, data_dir: str | None) -> dict[str, Any] | None:
    from structpe.data.paths import data_root
    from structpe.eval.syntaxgym.evaluate import chance_scores
    from structpe.eval.syntaxgym.suites import load_suites

    try:
        root = Path(data_root(data_dir)) / "syntaxgym"
        suites = load_suites(root, suite_names(spec.evaluations.syntaxgym.suites, root))
    except FileNotFoundError:
        return None
    sg = chance_scores(suites, seed=0)
    return {
        "blimp": BLIMP_CHANCE,
        "syntaxgym": sg["sg_score"],
        "syntaxgym_circuits": sg["circuits"],
        "syntaxgym_method": f"{sg['distribution']}, {sg['draws_per_item']} draws per item, seed {sg['seed']}",
    }


def _glue_chance(glue: GlueSpec, data_dir: str | None) -> dict[str, Any] | None:
    from structpe.eval.glue.tasks import load_glue, majority_baseline

    try:
        scores = {}
        for task in glue.tasks:
            train = [e.label for e in load_glue(task, "train", data_dir, glue.limit)]
            dev = [e.label for e in load_glue(task, "dev", data_dir, glue.limit)]
            scores[task] = majority_baseline(task, train, dev)
    except FileNotFoundError:
        return None
    return {"glue": scores, "glue_settings": {"tasks": glue.tasks, "limit": glue.limit}}


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

    groups = (
        ("syntaxgym", "circuit", "SyntaxGym per circuit", "sg_score"),
        ("blimp", "phenomenon", "BLiMP per phenomenon", "overall"),
    )
    for mode in LIKELIHOODS:
        for bench, group, title, total in groups:
            labels, series, errors = grouped(f"{bench}.{mode}.{group}.")
            hline = 0.5
            if bench == "syntaxgym" and chance and "syntaxgym" in chance:  # per circuit: bars, no line
                circuits = chance["syntaxgym_circuits"]
                series["chance"] = [circuits.get(c, math.nan) for c in labels]
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
    glue_plot = _glue_plot(out, agg, spec, chance)
    if glue_plot is not None:
        plots.append(glue_plot)
    return plots


def _glue_tasks(agg: dict[str, Any], spec: StudySpec) -> list[str]:
    """The GLUE tasks the cells hold, in the spec's order (then any others the cells have)."""
    found = {m.split(".")[1] for r in agg["recipes"].values() for m in r["scores"] if m.endswith(".n_dev")}
    order = spec.evaluations.glue.tasks if spec.evaluations.glue is not None else []
    return [t for t in order if t in found] + sorted(t for t in found - set(order) if t in TASKS)


def _glue_plot(out: Path, agg: dict[str, Any], spec: StudySpec, chance: dict[str, Any] | None) -> Path | None:
    """Per task (and the macro) each recipe's GLUE score in points, error bars the sd over
    pre-training seeds; the majority class beside them when known."""
    from structpe.eval.report import bar_plot

    tasks = _glue_tasks(agg, spec)
    if not tasks:
        return None
    keys = [f"glue.{t}.main" for t in tasks] + ["glue.macro"]
    series, errors = {}, {}
    for label, r in agg["recipes"].items():
        series[label] = [100 * r["scores"].get(k, {}).get("mean", math.nan) for k in keys]
        errors[label] = [100 * zero_nan(r["scores"].get(k, {}).get("sd", 0.0)) for k in keys]
    majority = (chance or {}).get("glue") or {}
    if all(t in majority for t in tasks):
        values = [100 * majority[t] for t in tasks]
        series["majority class"] = [*values, sum(values) / len(values)]
        errors["majority class"] = [0.0] * len(keys)
    return bar_plot(
        out / "glue_tasks.png",
        [f"{t} ({TASKS[t].metric})" for t in tasks] + ["macro"],
        series,
        errors=errors,
        title="GLUE dev per task: best epoch, mean over fine-tuning seeds\n"
        "(mean ± sd over pre-training seeds)",
        ylabel="task metric (points)",
    )


def _glue_section(agg: dict[str, Any], spec: StudySpec, chance: dict[str, Any] | None) -> list[str]:
    """The GLUE table: per recipe and task the fine-tuned score in points (mean ± sd over
    pre-training seeds of each cell's mean over fine-tuning seeds; the fine-tuning spread apart),
    the majority class, and the paper's numbers for the recipes its GLUE claims name."""
    tasks = _glue_tasks(agg, spec)
    glue = spec.evaluations.glue
    if not tasks or glue is None:
        return []

    def pts(s: dict[str, Any] | None) -> str:  # points, as the paper's tables
        if not s or not s.get("n") or math.isnan(s["mean"]):
            return "-"
        return f"{100 * s['mean']:.1f}" + ("" if math.isnan(s["sd"]) else f" ± {100 * s['sd']:.1f}")

    rows = []
    for label, r in agg["recipes"].items():
        sc = r["scores"]
        if not sc.get("glue.macro", {}).get("n"):
            continue
        cells = []
        for t in tasks:
            spread = sc.get(f"glue.{t}.ft_sd", {})
            ft = f" (ft sd {100 * spread['mean']:.1f})" if spread.get("n") else ""
            cells.append(pts(sc.get(f"glue.{t}.main")) + ft)
        rows.append(
            [
                label,
                str(sc["glue.macro"]["n"]),
                *cells,
                pts(sc.get("glue.macro")),
                pts(sc.get("glue.macro_last")),
            ]
        )
    majority = (chance or {}).get("glue") or {}
    if all(t in majority for t in tasks):
        values = [100 * majority[t] for t in tasks]
        rows.append(
            [
                "*majority class*",
                "-",
                *(f"*{v:.1f}*" for v in values),
                f"*{sum(values) / len(values):.1f}*",
                "-",
            ]
        )
    for label, numbers, macro, source in _glue_paper(spec):
        here = [numbers.get(t) for t in tasks]
        same = f"*{sum(here) / len(here):.2f}*" if None not in here else "-"
        rows.append(
            [
                f"*paper: {label}* ({source})",
                "-",
                *(f"*{v:.2f}*" if v is not None else "-" for v in here),
                f"{same} (its {len(numbers)} tasks: {macro})",
                "-",
            ]
        )
    header = [
        "recipe",
        "pre-training seeds",
        *(f"{t} [{TASKS[t].metric}; n = {_glue_n(agg, t)} dev]" for t in tasks),
        "macro",
        "macro, last epoch",
    ]
    limit = f"the first {glue.limit} train and dev examples of each task" if glue.limit else "every example"
    return [
        "",
        "## GLUE: each cell's final model fine-tuned",
        "",
        f"Per cell and task: the dev metric at the **best dev epoch** (selected on the dev split it "
        f"reports, as the paper's tables and `structpe finetune glue` do: optimistic), averaged over "
        f"the {len(glue.seeds)} fine-tuning seeds {glue.seeds}; the table gives the mean ± sd of "
        f"those cell means over the pre-training seeds, in points, and after it `ft sd`, the sd over "
        f"fine-tuning seeds averaged over the cells. Macro = the mean over the tasks run (last epoch: "
        f"the same after the last epoch, no selection). Settings: {glue.epochs} epochs, lr {glue.lr}, "
        f"weight decay {glue.weight_decay}, batch {glue.batch_size}, {glue.max_length} tokens, "
        f"{PRECISION[glue.bf16]}, {limit}. Metrics: MCC (CoLA), F1 (MRPC), Spearman (STS-B), "
        f"accuracy (SST-2, RTE). "
        f"*majority class*: the most frequent training label predicted for every dev example (0 for "
        f"MCC and correlations). The paper fine-tunes 20 epochs on whole tasks and averages 8 tasks "
        f"(CoLA, SST-2, QQP, QNLI, MNLI, RTE, STS-B, MRPC); its rows give its per-task numbers, "
        f"their mean over the tasks run here, and its own 8-task macro.",
        "",
        *md_table(rows, header),
    ]


def _glue_paper(spec: StudySpec) -> list[tuple[str, dict[str, float], Any, str]]:
    """(recipe label, the paper's score per task, its macro, source) for each side of each claim on
    a GLUE metric whose ``paper`` gives ``tasks: {task: [comparison, recipe]}``; a label once."""
    out: dict[str, tuple[str, dict[str, float], Any, str]] = {}
    for c in spec.claims:
        numbers = c.paper.get("tasks") or {}
        if not numbers or not any(m.startswith("glue.") for m in [*c.metrics, *c.honest, *c.show]):
            continue
        for side, label in ((0, c.against), (1, c.recipe)):
            macro = c.paper.get("recipe" if side else "baseline")
            per_task = {t: float(v[side]) for t, v in numbers.items()}
            out.setdefault(label, (label, per_task, macro, str(c.paper.get("source", ""))))
    return list(out.values())


def _glue_n(agg: dict[str, Any], task: str) -> str:
    ns = sorted(
        {
            int(v)
            for r in agg["recipes"].values()
            for v in r["scores"].get(f"glue.{task}.n_dev", {}).get("by_seed", {}).values()
        }
    )
    return "-".join(str(n) for n in sorted({ns[0], ns[-1]})) if ns else "-"


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
) -> str:
    """The Markdown of study.md (``commands``: the runs' commands in order, see :func:`folder_commands`;
    ``chance``: the chance row, see :func:`chance_row`). Every verdict word and summary line is
    generated from the numbers; nothing is written by hand."""
    claimed = {r["metric"] for c in agg["claims"] for g in ("metrics", "honest", "show") for r in c[g]}
    present = {m for c in cells for m in c["scores"]}
    columns = [(h, m) for h, m in COLUMNS if m in present or m in claimed]
    ns = sorted({p["n"] for per in agg["vs_baseline"].values() for p in per.values() if p["n"]})
    chance_same = ", ".join(f"{2.0 ** (1 - n):.3g} with {n} seeds" for n in ns) or "-"
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
        *(claim_summary(c, cells) for c in agg["claims"]),
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
    lines += [
        "",
        f"## Paired differences to the baseline `{spec.baseline}` (same seed)",
        "",
        "Signed so that > 0 = the recipe is better (lower PPL / loss, higher accuracy). Descriptive: "
        "no verdict, not in the claims' family.",
        "",
    ]
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
    lines += _glue_section(agg, spec, chance)
    lines += [
        "",
        "## Leakage audit: how much of the conditional gain survives causal tagging",
        "",
        "Gain = 1 - word PPL / the same seed's baseline p(x) word PPL. Surviving share = best "
        "causal-condition gain / full-parse gain, **unclipped**: 1 = all of the gain survives "
        "leak-free tags, 0 = none, < 0 = causal tags make the model worse than the baseline by that "
        "many full-parse gains (undefined when the full parse gains nothing). The causal conditions "
        "feed tag contexts a model trained on whole-sentence parses never saw, so a low share says "
        "the gain needs non-causal tags, not only that it is leakage. `causal` gives each word the "
        "tags of its word-prefix parse: the tags `position_causal` is trained on, so that row "
        "compares the leak-free model on its own tags with the baseline.",
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
                *(
                    f"{pm(s.get(f'leakage.{c}.word_ppl'))} ({pm(s.get(f'leakage.{c}.gain'))})"
                    for c in conds
                ),
                pm(share),
                ", ".join(f"{v:.2f}" for v in share["by_seed"].values()) or "-",
            ]
        )
    if rows:
        lines += md_table(
            rows,
            [
                "recipe",
                f"baseline p(x) word PPL [{n_leak}]",
                *(f"{c} word PPL (gain) [{n_leak}]" for c in conds),
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
                machine_of(c) or "not recorded",
                c["config_hash"][:12],
            ]
        )
    lines += md_table(
        rows, ["recipe", "seed", "steps", "train s", "eval s", "total s", "resumed", "machine", "config hash"]
    )
    lines.append("")
    lines += [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def write_study_report(
    out: str | Path, spec: StudySpec, command: str | None = None, data_dir: str | None = None
) -> dict[str, Path]:
    """Aggregate the finished cells of ``out`` into study.json, study.md and the plots
    (``command``: the command to print when the folder records none; ``data_dir``: the data root
    the chance row reads, default ``$STRUCTPE_DATA``)."""
    out = Path(out)
    cells = load_cell_metrics(out)
    agg = aggregate(cells, spec, folder_plan(out))
    chance = chance_row(out, spec, data_dir) if cells else None
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
    atomic_write_text(out / "study.md", render(agg, spec, cells, plots, commands, chance))
    print(f"study {spec.name}: {len(cells)} cells aggregated -> {out / 'study.md'}")
    return {"json": out / "study.json", "markdown": out / "study.md"}

