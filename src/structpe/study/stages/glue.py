"""The ``glue`` stage: each cell's final model fine-tuned per GLUE task and fine-tuning seed
(``structpe.eval.glue``, the protocol of ``structpe finetune glue``), one cache file per run
(``evals/glue-<task>-ft<seed>.json``); metrics ``glue.<task>.ft<seed>.<metric>``,
``glue.<task>.<metric>`` (mean over fine-tuning seeds) and ``glue.macro``; its table, plot and
majority-class row in the study report."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structpe.errors import closest
from structpe.eval.glue.report import macro_average, summarize
from structpe.eval.glue.tasks import FINETUNE_TASKS, TASKS, task_spec
from structpe.io import stable_hash
from structpe.study.spec_checks import StudySpecError, build_spec, seed_list
from structpe.study.tables import md_table, zero_nan

from .cell import Cell, flat

KEY = "glue"
READS_DATA = True  # it reads the study's data root (Cell.data_root)
COLUMNS = (("GLUE macro", "glue.macro"),)  # its column of the report's recipes table
# how the GLUE section names `evaluations.glue.bf16`
PRECISION = {False: "float32", True: "bf16 autocast", "auto": "bf16 autocast where native (else float32)"}


@dataclass
class GlueSpec:
    """GLUE fine-tuning of each cell's final model (``structpe.eval.glue``, the protocol of
    ``structpe finetune glue`` and its defaults): every task once per fine-tuning seed, scored at its
    best dev epoch; ``limit`` caps the train and the dev examples of each task (None = all)."""

    tasks: list[str] = field(default_factory=lambda: list(FINETUNE_TASKS))
    epochs: int = 3
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])  # fine-tuning seeds
    limit: int | None = None
    lr: float = 2e-5
    weight_decay: float = 0.01
    batch_size: int = 32
    max_length: int = 128
    bf16: bool | str = False  # bf16 autocast of fine-tuning: true / false / auto (where it is native)


SPEC = GlueSpec  # the class of its section in a study spec's ``evaluations``


def build(raw: Any, where: str) -> GlueSpec:
    """The section, ``lr`` / ``weight_decay`` read as floats: YAML reads ``2e-5`` (no dot) as a
    string, ``0`` as an int."""
    if isinstance(raw, dict):
        raw = dict(raw)
        for key in ("lr", "weight_decay"):
            value = raw.get(key)
            if isinstance(value, bool) or value is None:
                continue
            try:
                raw[key] = float(value)
            except (TypeError, ValueError):
                raise StudySpecError(f"{where}.{key}: expected a number, got {value!r}") from None
    return build_spec(GlueSpec, raw, where)


def check(glue: GlueSpec, where: str) -> None:
    """Known fine-tunable tasks (canonical names, in place), fine-tuning seeds, positive sizes."""
    if not isinstance(glue.tasks, list) or not glue.tasks:
        raise StudySpecError(f"{where}.tasks: expected a non-empty list from {', '.join(FINETUNE_TASKS)}")
    names = []
    for task in glue.tasks:
        try:
            name = task_spec(str(task)).name
        except ValueError:
            name = None
        if name not in FINETUNE_TASKS:
            raise StudySpecError(
                f"{where}.tasks: unknown or not fine-tunable GLUE task {task!r}; choose from "
                f"{', '.join(FINETUNE_TASKS)}{closest(str(task).lower(), FINETUNE_TASKS)}"
            )
        if name in names:
            raise StudySpecError(f"{where}.tasks: {task!r} is given twice")
        names.append(name)
    glue.tasks = names
    glue.seeds = seed_list(glue.seeds, f"{where}.seeds")
    if not glue.lr > 0:
        raise StudySpecError(f"{where}.lr: must be > 0, got {glue.lr}")
    if not glue.weight_decay >= 0:
        raise StudySpecError(f"{where}.weight_decay: must be >= 0, got {glue.weight_decay}")
    if not isinstance(glue.bf16, bool) and glue.bf16 != "auto":
        raise StudySpecError(f"{where}.bf16: expected true, false or auto, got {glue.bf16!r}")


def glue_eval_name(task: str, ft_seed: int) -> str:
    """The cache name of one GLUE run: ``evals/glue-<task>-ft<seed>.json``."""
    return f"glue-{task}-ft{ft_seed}"


def cache_keys(sub: GlueSpec, own: str, baseline: str, trained: str) -> dict[str, str]:
    """One key per task and fine-tuning seed, from the trained model's hash (the test sentences
    play no part) and the fine-tuning settings."""
    settings = {f: v for f, v in dataclasses.asdict(sub).items() if f not in ("tasks", "seeds")}
    return {
        glue_eval_name(task, ft): stable_hash([trained, "glue", task, settings, ft])
        for task in sub.tasks
        for ft in sub.seeds
    }


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


def run(sub: GlueSpec, cell: Cell) -> None:
    """The final model under a fresh classification head, once per task and fine-tuning seed,
    tagged by the cell's own tag source."""
    import torch

    from structpe.eval.glue.finetune import finetune_task, load_classifier
    from structpe.hardware import resolve_bf16
    from structpe.train.checkpoints import final_model_dir

    final = final_model_dir(cell.run_dir)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # a training loop: the GPU when there is one

    def finetune(task: str, ft: int) -> dict[str, float]:
        result = finetune_task(
            lambda n: load_classifier(final, n).to(device),
            cell.tokenizer,
            task,
            cell.cell_parser,
            cell.data_root,
            seeds=(ft,),
            epochs=sub.epochs,
            lr=sub.lr,
            weight_decay=sub.weight_decay,
            batch_size=sub.batch_size,
            max_length=sub.max_length,
            max_train=sub.limit,
            max_eval=sub.limit,
            bf16=resolve_bf16(sub.bf16),
            progress=cell.progress,
        )
        return glue_run_scores(result)

    runs = {
        task: {
            ft: cell.cached(glue_eval_name(task, ft), lambda t=task, s=ft: finetune(t, s)) for ft in sub.seeds
        }
        for task in sub.tasks
    }
    cell.scores.update(flat(KEY, glue_scores(runs)))


def planned(glue: GlueSpec, parts: list[str]) -> bool:
    """``glue.macro`` / ``glue.macro_last``, ``glue.<task>.<metric>`` (mean over the fine-tuning
    seeds) and ``glue.<task>.ft<seed>.<metric>`` (one seed), as :func:`glue_scores` writes them."""
    parts = parts[1:]
    if len(parts) == 1:
        return parts[0] in ("macro", "macro_last")
    if parts[0] not in glue.tasks or len(parts) not in (2, 3):
        return False
    if len(parts) == 3 and parts[1] not in {f"ft{s}" for s in glue.seeds}:
        return False
    names = (*task_spec(parts[0]).metrics, "main")
    return parts[-1] in names or parts[-1].removeprefix("last_") in names


def chance(sub: GlueSpec, row: dict[str, Any], data_root: Path | None) -> dict[str, Any] | None:
    """The majority class of each task's (limited) training examples on its dev examples, again
    when the tasks or the limit change; None without the tasks' data."""
    settings = {"tasks": sub.tasks, "limit": sub.limit}
    if row.get("glue_settings") == settings:
        return None
    from structpe.eval.glue.tasks import load_glue, majority_baseline

    try:
        scores = {}
        for task in sub.tasks:
            train = [e.label for e in load_glue(task, "train", data_root, sub.limit)]
            dev = [e.label for e in load_glue(task, "dev", data_root, sub.limit)]
            scores[task] = majority_baseline(task, train, dev)
    except FileNotFoundError:
        return None
    return {"glue": scores, "glue_settings": settings}


def note(metric: str, cells: list[dict[str, Any]]) -> str:
    """How the report describes a GLUE score beside its name, e.g. ``best dev epoch; 3 fine-tuning
    seeds; cola, rte`` (empty for a score that is not GLUE's):
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


def _report_tasks(agg: dict[str, Any], spec: Any) -> list[str]:
    """The GLUE tasks the cells hold, in the spec's order (then any others the cells have)."""
    found = {m.split(".")[1] for r in agg["recipes"].values() for m in r["scores"] if m.endswith(".n_dev")}
    order = spec.evaluations.glue.tasks if spec.evaluations.glue is not None else []
    return [t for t in order if t in found] + sorted(t for t in found - set(order) if t in TASKS)


def plot(out: Path, agg: dict[str, Any], spec: Any, chance: dict[str, Any] | None) -> Path | None:
    """Per task (and the macro) each recipe's GLUE score in points, error bars the sd over
    pre-training seeds; the majority class beside them when known."""
    from structpe.eval.report import bar_plot

    tasks = _report_tasks(agg, spec)
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


def section(
    agg: dict[str, Any], spec: Any, cells: list[dict[str, Any]], chance: dict[str, Any] | None
) -> list[str]:
    """The GLUE table: per recipe and task the fine-tuned score in points (mean ± sd over
    pre-training seeds of each cell's mean over fine-tuning seeds; the fine-tuning spread apart),
    the majority class, and the paper's numbers for the recipes its GLUE claims name."""
    tasks = _report_tasks(agg, spec)
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
    for label, numbers, macro, source in _paper_rows(spec):
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
        *(f"{t} [{TASKS[t].metric}; n = {_dev_counts(agg, t)} dev]" for t in tasks),
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


def _paper_rows(spec: Any) -> list[tuple[str, dict[str, float], Any, str]]:
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


def _dev_counts(agg: dict[str, Any], task: str) -> str:
    ns = sorted(
        {
            int(v)
            for r in agg["recipes"].values()
            for v in r["scores"].get(f"glue.{task}.n_dev", {}).get("by_seed", {}).values()
        }
    )
    return "-".join(str(n) for n in sorted({ns[0], ns[-1]})) if ns else "-"
