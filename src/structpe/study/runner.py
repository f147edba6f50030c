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

from structpe.choices import DEFAULT_PROPOSAL
from structpe.eval.scoring.smc import SMC_SYSTEMS
from structpe.eval.syntaxgym.evaluate import suite_names
from structpe.io import (
    read_json,  # write_json_atomic: also imported from here
    stable_hash,
    write_json_atomic,
)
from structpe.provenance import provenance
from structpe.study.aggregate import precision_of
from structpe.study.cell_scores import (
    blimp_scores,
    flat,
    glue_run_scores,
    glue_scores,
    leakage_summary,
    ppl_scores,
    sg_scores,
)
from structpe.study.cells import (
    CELL_FILE,
    METRICS_FILE,
    await_baseline,
    cached_eval,
    cell_dir,
    cells,
    check_owner,
    claim,
)
from structpe.study.data import StudyData
from structpe.study.spec import StudySpec, folder_spec, saved_runs
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
    """One cache key per evaluation: the model's training hash, the test sentences and that
    evaluation's settings (and, for the leakage audit, the same seed's baseline model's hash)."""
    ev = spec.evaluations
    own = stable_hash([cell_train_hash(spec, label, seed, data), data.fingerprint])
    base = cell_train_hash(spec, spec.baseline, seed, data)
    keys = {}
    for name in ("ppl", "blimp", "syntaxgym"):
        sub = getattr(ev, name)
        if sub is not None:
            # the beam width k (and BLiMP's marginal_limit) shape marginal scores only, the particles
            # smc scores only (its proposal too): changing them re-runs nothing else, and an unset
            # marginal_limit (or adding smc, or the default proposal) keeps the keys from before
            drop = ("k", "marginal_limit", "particles", "proposal")
            settings = {f: v for f, v in dataclasses.asdict(sub).items() if f not in drop}
            settings["likelihoods"] = [m for m in sub.likelihoods if m != "smc"]
            for mode in sub.likelihoods:
                beam = [sub.k] if mode == "marginal" else []
                if mode == "smc":
                    beam.append({"particles": sub.particles, "systems": SMC_SYSTEMS})
                    if sub.proposal != DEFAULT_PROPOSAL:
                        beam.append({"proposal": sub.proposal})
                if mode in ("marginal", "smc") and name == "blimp" and sub.marginal_limit is not None:
                    beam.append({"marginal_limit": sub.marginal_limit})
                keys[f"{name}-{mode}"] = stable_hash([own, name, mode, settings, *beam])
    if ev.leakage is not None:
        leak = dataclasses.asdict(ev.leakage)
        if leak["full_parse"] == "test":  # the default keys as before the option existed
            del leak["full_parse"]
        keys["leakage"] = stable_hash([own, "leakage", leak, base])
    if ev.glue is not None:  # one key per task and fine-tuning seed; the test sentences play no part
        trained = cell_train_hash(spec, label, seed, data)
        settings = {f: v for f, v in dataclasses.asdict(ev.glue).items() if f not in ("tasks", "seeds")}
        for task in ev.glue.tasks:
            for ft in ev.glue.seeds:
                keys[glue_eval_name(task, ft)] = stable_hash([trained, "glue", task, settings, ft])
    return keys


def glue_eval_name(task: str, ft_seed: int) -> str:
    """The cache name of one GLUE run: ``evals/glue-<task>-ft<seed>.json``."""
    return f"glue-{task}-ft{ft_seed}"


def run_cell(
    spec: StudySpec,
    label: str,
    seed: int,
    data: StudyData,
    out: Path,
    *,
    parser: Any,
    data_dir: str | None = None,
    progress: bool = False,
    callbacks: Sequence[Any] = (),
    poll_s: float = 30.0,
) -> Path:
    """Train and evaluate one cell (or skip / resume it); return its ``metrics.json``.

    The caller holds the cell's :func:`claim`; ``poll_s`` paces the wait for a baseline model
    that another worker is still training.
    """
    import torch

    from structpe.eval.blimp import evaluate_blimp
    from structpe.eval.glue.finetune import finetune_task, load_classifier
    from structpe.eval.leakage import leakage_audit
    from structpe.eval.ppl import evaluate_ppl, sentence_text
    from structpe.eval.scoring.types import model_kind, uses_tags
    from structpe.eval.syntaxgym.evaluate import evaluate_syntaxgym
    from structpe.hardware import resolve_bf16
    from structpe.models import load
    from structpe.parser.tag_controls import tag_parser
    from structpe.train.checkpoints import final_model_dir
    from structpe.train.pretrain import pretrain
    from structpe.train.tokenizer import load_tokenizer
    from structpe.train.trainer import read_metrics, val_lm_loss

    started = time.time()
    d = cell_dir(out, label, seed)
    tags = spec.recipe(label).tags
    training = data.training(tags)
    config = train_config(spec, label, seed, training.train_fingerprint)
    train_hash = stable_hash(config)
    keys = eval_keys(spec, label, seed, data)
    config_hash = stable_hash([train_hash, keys])
    metrics_path = d / METRICS_FILE
    name = f"{label}/seed-{seed}"

    def log(msg: str) -> None:
        print(f"study {spec.name} [{name}]: {msg}", flush=True)

    check_owner(d / CELL_FILE, train_hash)
    if metrics_path.is_file() and read_json(metrics_path).get("config_hash") == config_hash:
        log("finished (metrics.json matches the configuration); skipped")
        return metrics_path
    write_json_atomic(d / CELL_FILE, {"train_hash": train_hash, "config": config})

    wall: dict[str, float] = {}
    run_dir = d / "run"
    summary_path = run_dir / "summary.json"
    if summary_path.is_file() and (run_dir / "final" / "config.json").is_file():
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
    summary = read_json(summary_path)
    wall["train"] = float(summary["train_wall_s"])
    val = [m for m in read_metrics(run_dir / "metrics.csv") if val_lm_loss(m) is not None]
    scores: dict[str, float] = {"val_lm_loss": float(val_lm_loss(val[-1]))} if val else {}

    model = load(final_model_dir(run_dir)).eval()
    tokenizer = load_tokenizer(data.tokenizer_dir)
    tagged = uses_tags(model)
    causal = model_kind(model) == "causal"
    ev = spec.evaluations
    evals = d / "evals"
    # a tag control reads its own tags everywhere it is evaluated (the leakage audit keeps the parse)
    cell_parser = tag_parser(tags, parser, training.pool_file)
    test_sentences = data.test_sentences if tags == "parse" else cell_parser.retag(data.test_sentences)

    def run(name: str, compute: Callable[[], dict[str, float]], prefix: str) -> None:
        s, w = cached_eval(evals, name, keys[name], compute, log)
        scores.update(flat(prefix, s))
        wall[name] = w

    def modes(likelihoods: list[str], own: tuple[str, ...] = ()) -> list[str]:
        # a decoder that reads no tags scores p(x) in every mode: run it once and file it under
        # each mode, except the modes in `own` that score other items (BLiMP's marginal_limit); a
        # masked LM has only its PLL (filed as conditional, no joint / marginal)
        if tagged and causal:
            return list(likelihoods)
        return ["conditional", *(m for m in own if m in likelihoods)] if causal else ["conditional"]

    def file_under_all(bench: str, likelihoods: list[str]) -> None:
        if causal and not tagged:
            for m in likelihoods:
                for k, v in list(scores.items()):
                    if k.startswith(f"{bench}.conditional."):
                        scores[k.replace(".conditional.", f".{m}.", 1)] = v
            if "smc" in likelihoods:  # its exact p(x): nothing flips between N and 4N, no MC error
                scores[f"{bench}.smc.particles"] = float(getattr(ev, bench).particles)
                scores[f"{bench}.smc.stderr"] = 0.0
                if bench != "ppl":
                    scores[f"{bench}.smc.flip_share"] = 0.0

    def file_ladder(k: int) -> None:
        # the marginal's bound at each width of the ladder: ppl.marginal_k<w>.*; a model that reads
        # no tags has its plain p(x) there too
        from structpe.eval.scoring.likelihood import MARGINAL_LADDER

        for w in (x for x in MARGINAL_LADDER if x <= k):
            for key, v in list(scores.items()):
                if tagged and key.startswith(f"ppl.marginal.k{w}."):
                    scores[key.replace(f".marginal.k{w}.", f".marginal_k{w}.", 1)] = scores.pop(key)
                elif not tagged and key.startswith("ppl.marginal.") and not key.startswith("ppl.marginal.k"):
                    scores[key.replace(".marginal.", f".marginal_k{w}.", 1)] = v

    if ev.ppl is not None:
        # every mode on the same test sentences (the data stage's stratified sample)
        sents = test_sentences[: ev.ppl.sentences or spec.dataset.test_sentences]
        for mode in modes(ev.ppl.likelihoods):
            run(
                f"ppl-{mode}",
                lambda m=mode: ppl_scores(
                    evaluate_ppl(
                        model,
                        tokenizer,
                        sents,
                        likelihood=m,
                        k=ev.ppl.k,
                        particles=ev.ppl.particles,
                        proposal=ev.ppl.proposal,
                        progress=progress,
                    )
                ),
                f"ppl.{mode}",
            )
        file_under_all("ppl", ev.ppl.likelihoods)
        if "marginal" in ev.ppl.likelihoods and causal:
            file_ladder(ev.ppl.k)
    if ev.blimp is not None:
        paradigms = None if ev.blimp.paradigms == "all" else list(ev.blimp.paradigms)
        own = tuple(m for m in ev.blimp.likelihoods if ev.blimp.limit_for(m) != ev.blimp.limit)
        for mode in modes(ev.blimp.likelihoods, own):
            run(
                f"blimp-{mode}",
                lambda m=mode: blimp_scores(
                    evaluate_blimp(
                        model,
                        tokenizer,
                        cell_parser,
                        Path(_data_root(data_dir)) / "blimp",
                        paradigms,
                        limit=ev.blimp.limit_for(m),
                        likelihood=m,
                        k=ev.blimp.k,
                        particles=ev.blimp.particles,
                        proposal=ev.blimp.proposal,
                        progress=progress,
                    )
                ),
                f"blimp.{mode}",
            )
        file_under_all("blimp", [m for m in ev.blimp.likelihoods if m not in own])
    if ev.syntaxgym is not None:
        root = Path(_data_root(data_dir)) / "syntaxgym"
        suites = suite_names(ev.syntaxgym.suites, root)
        for mode in modes(ev.syntaxgym.likelihoods):
            run(
                f"syntaxgym-{mode}",
                lambda m=mode: sg_scores(
                    evaluate_syntaxgym(
                        model,
                        tokenizer,
                        cell_parser,
                        root,
                        suites,
                        likelihood=m,
                        k=ev.syntaxgym.k,
                        particles=ev.syntaxgym.particles,
                        proposal=ev.syntaxgym.proposal,
                        progress=progress,
                    )
                ),
                f"syntaxgym.{mode}",
            )
        file_under_all("syntaxgym", ev.syntaxgym.likelihoods)
    if ev.leakage is not None and tagged and causal:
        base = load(await_baseline(out, spec, seed, log, poll_s)).eval()
        sents = data.test_sentences[: ev.leakage.sentences]
        run(
            "leakage",
            lambda: leakage_summary(
                leakage_audit(
                    model,
                    tokenizer,
                    [sentence_text(s) for s in sents],
                    parser,
                    parses=sents if ev.leakage.full_parse == "test" else None,
                    baseline=base,
                    variants=ev.leakage.conditions,
                )
            ),
            "leakage",
        )

    if ev.glue is not None:
        # the final model under a fresh classification head, once per task and fine-tuning seed,
        # tagged by the cell's own tag source (structpe.eval.glue: the protocol of finetune glue)
        final = final_model_dir(run_dir)
        device = "cuda" if torch.cuda.is_available() else "cpu"  # a training loop: the GPU when there is one
        runs: dict[str, dict[int, dict[str, float]]] = {}
        for task in ev.glue.tasks:
            runs[task] = {}
            for ft in ev.glue.seeds:
                glue_name = glue_eval_name(task, ft)
                runs[task][ft], wall[glue_name] = cached_eval(
                    evals,
                    glue_name,
                    keys[glue_name],
                    lambda t=task, s=ft: glue_run_scores(
                        finetune_task(
                            lambda n: load_classifier(final, n).to(device),
                            tokenizer,
                            t,
                            cell_parser,
                            data_dir,
                            seeds=(s,),
                            epochs=ev.glue.epochs,
                            lr=ev.glue.lr,
                            weight_decay=ev.glue.weight_decay,
                            batch_size=ev.glue.batch_size,
                            max_length=ev.glue.max_length,
                            max_train=ev.glue.limit,
                            max_eval=ev.glue.limit,
                            bf16=resolve_bf16(ev.glue.bf16),
                            progress=progress,
                        )
                    ),
                    log,
                )
        scores.update(flat("glue", glue_scores(runs)))

    wall["total"] = sum(wall.values())
    metrics = {
        "study": spec.name,
        "profile": spec.profile,
        "recipe_label": label,
        "recipe": spec.recipe_name(label),
        "seed": seed,
        "config_hash": config_hash,
        "train_hash": train_hash,
        "data_fingerprint": data.fingerprint,
        "train": {
            k: summary.get(k)
            for k in ("steps", "parameters", "resumed_from", "train_wall_s", "bf16", "fast_bf16")
        },
        # the training precision this machine resolved (``auto``: bf16 where native; bf16-fast: bf16
        # parameters with float32 masters); with the CPU in ``provenance.hardware`` it decides which
        # cells a claim may pair (structpe.study.aggregate)
        "precision": precision_of({"train": summary}),
        "wall_s": {k: round(v, 1) for k, v in wall.items()},
        "scores": scores,
        # reporting only: neither hash covers it (training and evaluation keys are computed above)
        "provenance": provenance(
            started=started,
            model=final_model_dir(run_dir),
            data=prepared_data_files(data.dataset_dir),
            parser=parser_record(getattr(parser, "name", None)),
            likelihood=None,
            k=ev.ppl.k if ev.ppl is not None else None,
            limits={"test_sentences": len(data.test_sentences)},
            seed=seed,
        ),
    }
    write_json_atomic(metrics_path, metrics)
    log(f"done ({wall['total']:.0f} s of training + evaluation)")
    return metrics_path


def _data_root(data_dir: str | None) -> Path:
    from structpe.data.paths import data_root

    return data_root(data_dir)


def spec_record(
    spec: StudySpec, command: str | None, data_fingerprint: str, earlier: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A study folder's ``spec.json``: the spec file and profile (``folder_spec`` reloads them), the
    data's fingerprint, the spec of the latest selection as it ran (its settings are what a later
    reader compares against, e.g. ``structpe quickstart --reference``; its seed lists are that
    selection's, not the folder's) and ``runs``: every selection (recipes, seeds,
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
        "spec": spec.to_dict(),
    }


def run_study(
    spec: StudySpec,
    out: str | Path,
    *,
    data_dir: str | None = None,
    data: StudyData | None = None,
    parser: Any = None,
    progress: bool = False,
    callbacks: Sequence[Any] = (),
    report: bool = True,
    command: str | None = None,
) -> list[Path]:
    """Run (or resume) every cell of ``spec`` into ``out``; then write the aggregate report.

    ``data`` / ``parser`` replace the data stage and the spec's parser (tests, custom data).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if parser is None:
        from structpe.parser.cached import CachedParser
        from structpe.parser.registry import get_parser

        parser = CachedParser(get_parser(spec.dataset.parser))
    if data is None:
        from structpe.study.data import prepare_study_data

        with FileLock(out / "data.lock"):  # parallel workers: the first prepares, the others reuse it
            tag_sources = tuple(sorted({r.tags for r in spec.recipes} - {"parse"}))
            data = prepare_study_data(
                spec.dataset,
                out / "data",
                data_dir,
                parser=parser,
                progress=progress,
                tag_sources=tag_sources,
            )
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
                    data_dir=data_dir,
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

        write_study_report(out, folder_spec(out), data_dir=data_dir)  # every run's cells, not this one's
    return paths
