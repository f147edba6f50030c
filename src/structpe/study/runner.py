"""Running a study: every (recipe, seed) cell in turn, resumably, each writing a ``metrics.json``.

Layout of the output folder::

    data/                        tokenizer, prepared train/validation data (shared by all cells)
    cells/<recipe>/seed-<s>/
        cell.json                the cell's configuration and its hash (written first)
        run/                     the pre-training run folder (checkpoints, final/, metrics.csv)
        evals/<name>.json        one cached result per evaluation (ppl-joint, blimp-conditional, ...;
                                 GLUE: glue-<task>-ft<seed>, one per task and fine-tuning seed)
        metrics.json             written last: config hash, data fingerprint, seed, wall times, scores
    study.json, study.md, *.png  the aggregate (``structpe study report``)

Resume rules: a cell whose ``metrics.json`` carries the current configuration hash is skipped; a
cell without one continues where it stopped (pre-training from its newest complete checkpoint,
exactly as ``structpe pretrain --resume``; finished evaluations from their cache files). Changed
evaluation settings re-run only the evaluations whose cache keys changed. A cell folder whose
model was trained under another configuration (recipe, overrides, seed, data) is never
overwritten: the run stops with a message.

Cells run seed-major with the baseline first, so that each seed's baseline model exists when the
other recipes' leakage audits need it, and a partly finished study already has complete seeds.

Parallel workers: the same command may run in several shells (or on machines sharing the folder).
Each worker claims a cell with a lock file (``cells/<recipe>/seed-<s>.lock``, released by the
operating system when its process dies, so a killed worker leaves no stale claim), skips cells
that another worker holds, and waits for a seed's baseline model only when its leakage audit
needs it. Every worker writes the report of the cells finished so far when it runs out of cells;
the last one to stop writes the complete report.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from structpe.io import read_json, stable_hash, write_json_atomic
from structpe.provenance import provenance
from structpe.study.cell_metrics import precision_of
from structpe.study.cells import (
    CELL_FILE,
    METRICS_FILE,
    await_baseline,
    cell_dir,
    cells,
    check_owner,
    claim,
    trained_model,
)
from structpe.study.data import StudyData, study_data_root
from structpe.study.selection import folder_spec, saved_runs, with_recipes_of
from structpe.study.spec import StudySpec
from structpe.study.stages import STAGES
from structpe.study.stages.cell import Cell
from structpe.train.prepare_settings import parser_record, prepared_data_files

# The dataset fields that shape a trained model. The test set is an evaluation setting: changing
# how test sentences are drawn re-runs evaluations, never training.
TRAIN_DATA_FIELDS = (
    "corpus",
    "parser",
    "tokenizer",
    "vocab_size",
    "train_sentences",
    "valid_sentences",
    "seq_len",
)


def train_config(spec: StudySpec, label: str, seed: int, data_fingerprint: str) -> dict[str, Any]:
    """What determines a cell's trained model (its hash owns the cell folder).

    ``data_fingerprint`` is the prepared training data's (:attr:`StudyData.train_fingerprint`, or
    the tag variant's for a tag control). A recipe's tag source enters only when it is not the
    parse, so the recipes trained before the controls existed keep their hashes.
    """
    dataset = dataclasses.asdict(spec.dataset)
    config = {
        "recipe": spec.recipe_name(label),
        "overrides": spec.cell_overrides(label),
        "seed": seed,
        "data_fingerprint": data_fingerprint,
        "dataset": {k: dataset[k] for k in TRAIN_DATA_FIELDS},
    }
    if spec.recipe(label).tags != "parse":
        config["tags"] = spec.recipe(label).tags
    return config


def cell_train_hash(spec: StudySpec, label: str, seed: int, data: StudyData) -> str:
    """The training hash of a cell, on its own training data (the parse's or its tag variant's)."""
    fp = data.training(spec.recipe(label).tags).train_fingerprint
    return stable_hash(train_config(spec, label, seed, fp))


def eval_keys(spec: StudySpec, label: str, seed: int, data: StudyData) -> dict[str, str]:
    """One cache key per evaluation, from each stage (``structpe.study.stages``): the model's
    training hash, the test sentences and that evaluation's settings (and, for the leakage audit,
    the same seed's baseline model's hash)."""
    trained = cell_train_hash(spec, label, seed, data)
    own = stable_hash([trained, data.fingerprint])
    base = cell_train_hash(spec, spec.baseline, seed, data)
    keys: dict[str, str] = {}
    for stage in STAGES:
        sub = getattr(spec.evaluations, stage.KEY)
        if sub is not None:
            keys.update(stage.cache_keys(sub, own, base, trained))
    return keys


def cell_config_hash(spec: StudySpec, label: str, seed: int, data: StudyData) -> str:
    """The hash a cell's ``metrics.json`` must carry to be skipped: its training hash and every
    evaluation's cache key (a finished cell with another one runs again)."""
    return stable_hash([cell_train_hash(spec, label, seed, data), eval_keys(spec, label, seed, data)])


def expected_config_hashes(
    spec: StudySpec, out: Path, data_dir: str | Path | None = None
) -> dict[tuple[str, int], str] | None:
    """Each planned cell's current configuration hash, for ``--dry-run`` to tell a finished cell
    from one that runs again. None while ``out``'s data is not prepared: the hashes cover the
    prepared data, and preparing it (parsing a corpus) is the run's work, not a dry run's."""
    from structpe.study.data import is_prepared

    if not is_prepared(out / "data", _tag_sources(spec)):
        return None
    data = _study_data(spec, out, study_data_root(data_dir, required=True), _study_parser(spec), False)
    return {(label, seed): cell_config_hash(spec, label, seed, data) for label, seed in cells(spec)}


def _tag_sources(spec: StudySpec) -> tuple[str, ...]:
    """The tag controls whose own training data the study prepares beside the parse's."""
    return tuple(sorted({r.tags for r in spec.recipes} - {"parse"}))


def _study_parser(spec: StudySpec) -> Any:
    from structpe.parser.cached import CachedParser
    from structpe.parser.registry import get_parser

    return CachedParser(get_parser(spec.dataset.parser))


def _study_data(spec: StudySpec, out: Path, root: Path | None, parser: Any, progress: bool) -> StudyData:
    """The folder's prepared data, prepared by the first of several parallel workers (the others
    wait on the lock, then reuse it)."""
    from structpe.study.data import prepare_study_data

    with FileLock(out / "data.lock"):
        return prepare_study_data(
            spec.dataset, out / "data", root, parser=parser, progress=progress, tag_sources=_tag_sources(spec)
        )


def run_cell(
    spec: StudySpec,
    label: str,
    seed: int,
    data: StudyData,
    out: Path,
    *,
    parser: Any,
    data_root: Path | None = None,
    progress: bool = False,
    callbacks: Sequence[Any] = (),
    poll_s: float = 30.0,
) -> Path:
    """Train and evaluate one cell (or skip / resume it); return its ``metrics.json``.

    The caller holds the cell's :func:`claim`; ``poll_s`` paces the wait for a baseline model
    that another worker is still training; ``data_root`` is the resolved data root the stages
    read (BLiMP, SyntaxGym, GLUE).
    """
    started = time.time()
    d = cell_dir(out, label, seed)
    training = data.training(spec.recipe(label).tags)
    config = train_config(spec, label, seed, training.train_fingerprint)
    train_hash = stable_hash(config)
    keys = eval_keys(spec, label, seed, data)
    config_hash = cell_config_hash(spec, label, seed, data)
    metrics_path = d / METRICS_FILE

    def log(msg: str) -> None:
        print(f"study {spec.name} [{label}/seed-{seed}]: {msg}", flush=True)

    check_owner(d / CELL_FILE, train_hash)
    if metrics_path.is_file():
        if read_json(metrics_path).get("config_hash") == config_hash:
            log("finished (metrics.json matches the configuration); skipped")
            return metrics_path
        log(
            "metrics.json was written under other evaluation settings or test data: "
            + (
                "the evaluations whose settings changed run again"
                if trained_model(d / "run")
                else "its model is not in run/final, so it trains again (checkpoints are resumed)"
            )
        )
    write_json_atomic(d / CELL_FILE, {"train_hash": train_hash, "config": config})
    summary, val_loss = _pretrain(spec, label, seed, training, d / "run", log, progress, callbacks)

    def baseline() -> Path:  # the same seed's baseline model, waited for when a stage asks (leakage)
        return await_baseline(out, spec, seed, log, poll_s)

    cell = _cell(spec, label, data, d / "run", keys, parser, data_root, log, progress, baseline)
    cell.wall["train"] = float(summary["train_wall_s"])
    if val_loss is not None:
        cell.scores["val_lm_loss"] = val_loss
    for stage in STAGES:
        sub = getattr(spec.evaluations, stage.KEY)
        if sub is not None:
            stage.run(sub, cell)
    cell.wall["total"] = sum(cell.wall.values())
    metrics = {
        "study": spec.name,
        "profile": spec.profile,
        "recipe_label": label,
        "recipe": spec.recipe_name(label),
        "seed": seed,
        "config_hash": config_hash,
        "train_hash": train_hash,
        "data_fingerprint": data.fingerprint,
        "train": {k: summary.get(k) for k in TRAIN_SUMMARY_FIELDS},
        # the training precision this machine resolved (``auto``: bf16 where native; bf16-fast: bf16
        # parameters with float32 masters); with the CPU in ``provenance.hardware`` it decides which
        # cells a claim may pair (structpe.study.aggregate)
        "precision": precision_of({"train": summary}),
        "wall_s": {k: round(v, 1) for k, v in cell.wall.items()},
        "scores": cell.scores,
        # reporting only: neither hash covers it (training and evaluation keys are computed above)
        "provenance": _provenance(spec, data, parser, d / "run", started, seed),
    }
    write_json_atomic(metrics_path, metrics)
    log(f"done ({cell.wall['total']:.0f} s of training + evaluation)")
    return metrics_path


# the pre-training run's summary fields a cell's metrics.json keeps
TRAIN_SUMMARY_FIELDS = (
    "steps", "parameters", "resumed_from", "train_wall_s", "train_cpu_s", "bf16", "fast_bf16",
)


def _pretrain(
    spec: StudySpec,
    label: str,
    seed: int,
    training: Any,
    run_dir: Path,
    log: Callable[[str], None],
    progress: bool,
    callbacks: Sequence[Any],
) -> tuple[dict[str, Any], float | None]:
    """Pre-train the cell's model (resuming from its newest complete checkpoint; a finished run is
    reused); its ``summary.json`` and its last validation LM loss (None without one)."""
    from structpe.train.pretrain import pretrain
    from structpe.train.trainer import read_metrics, val_lm_loss

    if trained_model(run_dir):
        log("pre-training finished earlier; reusing run/final")
    else:
        overrides = [
            *spec.cell_overrides(label),
            f"train.dataset={training.dataset_dir}",
            f"train.output_dir={run_dir}",
            f"train.seed={seed}",
            f"train.progress={str(progress).lower()}",
        ]
        log(f"pre-train {spec.recipe_name(label)}")
        pretrain(spec.recipe_name(label), overrides, resume=True, callbacks=callbacks)
    summary = read_json(run_dir / "summary.json")
    val = [m for m in read_metrics(run_dir / "metrics.csv") if val_lm_loss(m) is not None]
    return summary, (float(val_lm_loss(val[-1])) if val else None)


def _cell(
    spec: StudySpec,
    label: str,
    data: StudyData,
    run_dir: Path,
    keys: dict[str, str],
    parser: Any,
    data_root: Path | None,
    log: Callable[[str], None],
    progress: bool,
    baseline_model: Callable[[], Path],
) -> Cell:
    """The trained cell as its evaluation stages see it: the final model, the tokenizer, and the
    cell's tag source, which a tag control reads everywhere it is evaluated (the leakage audit
    keeps the parse)."""
    from structpe.eval.scoring.types import model_kind, uses_tags
    from structpe.models import load
    from structpe.parser.tag_controls import tag_parser
    from structpe.train.checkpoints import final_model_dir
    from structpe.train.tokenizer import load_tokenizer

    tags = spec.recipe(label).tags
    model = load(final_model_dir(run_dir)).eval()
    cell_parser = tag_parser(tags, parser, data.training(tags).pool_file)
    return Cell(
        spec=spec,
        run_dir=run_dir,
        data_root=data_root,
        model=model,
        tokenizer=load_tokenizer(data.tokenizer_dir),
        parser=parser,
        cell_parser=cell_parser,
        test_sentences=data.test_sentences if tags == "parse" else cell_parser.retag(data.test_sentences),
        parsed_sentences=data.test_sentences,
        keys=keys,
        log=log,
        tagged=uses_tags(model),
        causal=model_kind(model) == "causal",
        baseline_model=baseline_model,
        progress=progress,
    )


def _provenance(
    spec: StudySpec, data: StudyData, parser: Any, run_dir: Path, started: float, seed: int
) -> dict[str, Any]:
    """The cell's provenance record (reporting only)."""
    from structpe.train.checkpoints import final_model_dir

    ev = spec.evaluations
    return provenance(
        started=started,
        model=final_model_dir(run_dir),
        data=prepared_data_files(data.dataset_dir),
        parser=parser_record(getattr(parser, "name", None)),
        likelihood=None,
        k=ev.ppl.k if ev.ppl is not None else None,
        limits={"test_sentences": len(data.test_sentences)},
        seed=seed,
    )


def spec_record(
    spec: StudySpec, command: str | None, data_fingerprint: str, earlier: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A study folder's ``spec.json``: the spec file and profile (``folder_spec`` reloads them), the
    data's fingerprint, the spec of the latest selection as it ran with the recipes of earlier
    selections added as they ran (``selection.with_recipes_of``: its settings are what a later
    reader compares against, e.g. ``structpe quickstart --reference``; its seed lists are the
    latest selection's, not the folder's) and ``runs``: every selection (recipes, seeds,
    command) run into the folder, ``earlier``'s first, so that a study run in slices over several
    sittings plans, and reports, the cells of all of them. ``recipes`` / ``seeds`` are their union,
    ``command`` the latest (a resume without a command keeps the earlier one)."""
    if command is None and earlier is not None:
        command = earlier.get("command")
    run = {"recipes": [r.label for r in spec.recipes], "seeds": spec.all_seeds(), "command": command}
    runs = [] if earlier is None else saved_runs(earlier)
    if run not in runs:
        runs.append(run)
    return {
        "source": spec.source,
        "profile": spec.profile,
        "recipes": list(dict.fromkeys(label for r in runs for label in r["recipes"] or [])),
        "seeds": list(dict.fromkeys(s for r in runs for s in r["seeds"] or [])),
        "command": command,
        "runs": runs,
        "data_fingerprint": data_fingerprint,
        "spec": with_recipes_of(spec.to_dict(), (earlier or {}).get("spec")),
    }


def run_study(
    spec: StudySpec,
    out: str | Path,
    *,
    data_dir: str | Path | None = None,
    data: StudyData | None = None,
    parser: Any = None,
    progress: bool = False,
    callbacks: Sequence[Any] = (),
    report: bool = True,
    command: str | None = None,
) -> list[Path]:
    """Run (or resume) every cell of ``spec`` into ``out``; then write the aggregate report.

    ``data`` / ``parser`` replace the data stage and the spec's parser (tests, custom data).
    ``data_dir`` (default: ``$STRUCTPE_DATA``) is resolved here, once, for every cell and stage.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    reads = any(getattr(s, "READS_DATA", False) and getattr(spec.evaluations, s.KEY) for s in STAGES)
    root = study_data_root(data_dir, required=data is None or reads)
    if parser is None:
        parser = _study_parser(spec)
    if data is None:
        data = _study_data(spec, out, root, parser, progress)
    with FileLock(out / "spec.lock"):  # workers started together must not drop each other's run
        earlier = read_json(out / "spec.json") if (out / "spec.json").is_file() else None
        write_json_atomic(out / "spec.json", spec_record(spec, command, data.fingerprint, earlier))
    paths: list[Path] = []
    busy: list[tuple[str, int]] = []
    for label, seed in cells(spec):
        with claim(out, label, seed) as mine:
            if not mine:
                print(
                    f"study {spec.name} [{label}/seed-{seed}]: another worker is running it; next cell",
                    flush=True,
                )
                busy.append((label, seed))
                continue
            paths.append(
                run_cell(
                    spec,
                    label,
                    seed,
                    data,
                    out,
                    parser=parser,
                    data_root=root,
                    progress=progress,
                    callbacks=callbacks,
                )
            )
    unfinished = [(lab, s) for lab, s in busy if not (cell_dir(out, lab, s) / METRICS_FILE).is_file()]
    stopped = []  # free again but unfinished: their worker ended without finishing (killed, failed)
    for lab, s in unfinished:
        with claim(out, lab, s) as free:
            if free:
                stopped.append(f"{lab}/seed-{s}")
    if stopped:
        print(
            f"study {spec.name}: {', '.join(stopped)} stopped unfinished in another worker (killed or "
            "failed: see its output); rerun this command to resume them",
            flush=True,
        )
    pending = [f"{lab}/seed-{s}" for lab, s in unfinished if f"{lab}/seed-{s}" not in stopped]
    if pending:  # skipped while another worker had them, and not finished since
        print(
            f"study {spec.name}: {len(pending)} cell(s) still running in other workers "
            f"({', '.join(pending)}); the last worker to stop writes the complete report",
            flush=True,
        )
    if report:
        from structpe.study.report import write_study_report

        write_study_report(
            out, folder_spec(out), data_dir=root or data_dir
        )  # every run's cells, not this one's
    return paths
