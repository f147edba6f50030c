"""Model-size sweep at one CPU-time budget: which TXL ``none`` size learns most in the same time.

A profile's model size should be chosen by measurement: on a CPU, a wider model may cost little
more per token (large matmuls run nearer the machine's peak) while a deeper one costs more. The
sweep trains each size of ``sizes`` (``LAYERSxWIDTH``: 4x256, 6x384, ...) for the same CPU-time
budget on the study's own data and evaluates it with the study's own evaluations, one study cell
per size (so a killed sweep resumes like a study):

1. calibrate: ``calibrate_steps`` training steps of each size, timed in CPU seconds of this
   process (model build and the one validation pass included, so the rate is a slight
   overestimate of the cost per step, the same way for every size);
2. train ``budget_cpu_s / (CPU s per step)`` steps (the cosine schedule then ends with the budget,
   which stopping a longer schedule early would not do), then every evaluation of the spec.

Sizes: ``n_heads = d_model / 64`` (at least 2), ``d_ff = 4 d_model``; everything else (batch,
sequence length, learning rate, dropout) is the profile's. One row per size: parameters, steps,
tokens seen (steps x batch x sequence length: packed sequences are full but for each split's
last), validation loss, SyntaxGym and BLiMP.
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import Any

from structpe.study.spec import RecipeSpec, StudySpec
from structpe.study.spec_checks import StudySpecError

SIZE = re.compile(r"^(\d+)x(\d+)$")


def size_overrides(size: str) -> list[str]:
    """``LAYERSxWIDTH`` -> the recipe overrides of that model size (one clear error otherwise)."""
    m = SIZE.match(size)
    if m is None or int(m.group(1)) < 1 or int(m.group(2)) < 64 or int(m.group(2)) % 64:
        raise StudySpecError(f"size {size!r}: expected LAYERSxWIDTH with WIDTH a multiple of 64, e.g. 6x384")
    layers, width = int(m.group(1)), int(m.group(2))
    heads = max(2, width // 64)
    return [
        f"model.n_layers={layers}",
        f"model.d_model={width}",
        f"model.n_heads={heads}",
        f"model.d_ff={4 * width}",
    ]


def sweep_spec(spec: StudySpec, steps: dict[str, int], seed: int) -> StudySpec:
    """The spec with one ``none`` recipe per size (label ``none-LxW``) trained ``steps[size]`` steps,
    one seed, no claims and no leakage audit (no tagged model to audit)."""
    base = next(r for r in spec.recipes if r.label == spec.baseline)
    recipes = [
        RecipeSpec(
            f"none-{size}", base.recipe, [*base.overrides, *size_overrides(size), f"train.max_steps={n}"]
        )
        for size, n in steps.items()
    ]
    evaluations = dataclasses.replace(spec.evaluations, leakage=None)
    return dataclasses.replace(
        spec,
        name=f"{spec.name}-size-sweep",
        baseline=recipes[0].label,
        seeds=[seed],
        recipes=recipes,
        evaluations=evaluations,
        claims=[],
    )


def calibrate(spec: StudySpec, size: str, data: Any, out: Path, steps: int) -> float:
    """CPU seconds per training step of ``size`` (``steps`` steps on the study's data)."""
    from structpe.train.pretrain import pretrain

    base = next(r for r in spec.recipes if r.label == spec.baseline)
    overrides = [
        *spec.cell_overrides(base.label),
        *size_overrides(size),
        f"train.dataset={data.dataset_dir}",
        f"train.output_dir={out / f'calibrate-{size}'}",
        f"train.max_steps={steps}",
        f"train.warmup={min(steps, 10)}",
        f"train.eval_every={steps}",
        "train.eval_batches=1",
        "train.progress=false",
    ]
    t0 = time.process_time()
    pretrain(spec.recipe_name(base.label), overrides)
    return (time.process_time() - t0) / steps


def size_sweep(
    spec: StudySpec,
    sizes: list[str],
    budget_cpu_s: float,
    out: str | Path,
    *,
    seed: int = 1,
    calibrate_steps: int = 20,
    data: Any = None,
    parser: Any = None,
    data_dir: str | None = None,
) -> dict[str, Any]:
    """Calibrate, train and evaluate every size (see the module docstring); returns the table and,
    once no size is left to another worker (``pending``), writes it to ``out/sweep.json``. Start a
    second worker once ``out/calibration.json`` lists every size, so both train the same cells.
    ``data`` / ``parser`` replace the study's data stage (tests)."""
    from structpe.io import read_json, write_json_atomic
    from structpe.parser.cached import CachedParser
    from structpe.study.cells import METRICS_FILE, cell_dir
    from structpe.study.runner import run_study
    from structpe.train.recipe import load_recipe

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for size in sizes:
        size_overrides(size)  # every size is checked before anything runs
    if parser is None:
        from structpe.parser.registry import get_parser

        parser = CachedParser(get_parser(spec.dataset.parser))
    if data is None:
        from filelock import FileLock

        from structpe.study.data import prepare_study_data

        with FileLock(out / "data.lock"):
            data = prepare_study_data(spec.dataset, out / "data", data_dir, parser=parser, progress=False)
    cal_file = out / "calibration.json"
    cal = read_json(cal_file) if cal_file.is_file() else {}
    for size in sizes:
        if size not in cal:  # a resumed sweep keeps its step counts (and so its cells' hashes)
            cal[size] = calibrate(spec, size, data, out / "calibration", calibrate_steps)
            write_json_atomic(cal_file, cal)
    steps = {s: max(1, int(budget_cpu_s / cal[s])) for s in sizes}
    sweep = sweep_spec(spec, steps, seed)
    run_study(sweep, out / "study", data=data, parser=parser, data_dir=data_dir, report=False)
    # parallel workers (the same command in several shells) each train the sizes they claim: the
    # table holds every finished size, and the worker that finds none pending writes sweep.json
    done = {s: cell_dir(out / "study", f"none-{s}", seed) / METRICS_FILE for s in sizes}
    pending = [s for s, path in done.items() if not path.is_file()]
    rows = []
    for size, path in done.items():
        if size in pending:
            continue
        m = read_json(path)
        label = f"none-{size}"
        train = load_recipe(sweep.recipe_name(label), sweep.cell_overrides(label)).train
        s = m["scores"]
        rows.append(
            {
                "size": size,
                "parameters": m["train"]["parameters"],
                "cpu_s_per_step": round(cal[size], 4),
                "steps": m["train"]["steps"],
                "tokens_seen": m["train"]["steps"] * train.batch_size * train.seq_len,
                "train_wall_s": m["train"]["train_wall_s"],
                "dev_loss": s.get("val_lm_loss"),
                "syntaxgym": s.get("syntaxgym.conditional.sg_score"),
                "blimp": s.get("blimp.conditional.overall"),
                "cell_wall_s": m["wall_s"].get("total"),
            }
        )
    result = {
        "spec": spec.source,
        "profile": spec.profile,
        "seed": seed,
        "budget_cpu_s": budget_cpu_s,
        "calibrate_steps": calibrate_steps,
        "data_fingerprint": data.fingerprint,
        "sizes": rows,
    }
    if pending:
        result["pending"] = pending  # still training in another worker
    else:
        write_json_atomic(out / "sweep.json", result)
    return result
