"""A run folder's checkpoints: the newest complete one (resume), the model a finished run saved,
why a checkpoint cannot be resumed from (killed while saving, truncated or corrupt files), and
what a resume checks and trims (the recipe is the run's; metrics after the checkpoint go)."""

from __future__ import annotations

import csv
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from structpe.errors import RecipeError, StructpeError
from structpe.io import atomic_open, read_json

if TYPE_CHECKING:
    from structpe.train.recipe import Recipe


def last_complete_checkpoint(run_dir: str | Path) -> Path | None:
    """Newest ``checkpoint-N`` whose trainer state (written last) and weights are both present."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return None
    found = []
    for p in run_dir.glob("checkpoint-*"):
        suffix = p.name.split("-", 1)[1]
        if p.is_dir() and suffix.isdigit():
            found.append((int(suffix), p))
    for _, p in sorted(found, reverse=True):  # newest first; a corrupt one falls back to the one before
        problem = checkpoint_problem(p)
        if problem is None:
            return p
        print(f"pretrain: skipping {p.name}: {problem}", file=sys.stderr)
    return None


def final_model_dir(run_dir: Path) -> Path:
    """The saved final model of a run (``final/``), else its newest complete checkpoint."""
    final = run_dir / "final"
    if (final / "config.json").is_file():
        return final
    ckpt = last_complete_checkpoint(run_dir)
    if ckpt is None:
        raise FileNotFoundError(f"{run_dir} has no saved model")
    return ckpt


def checkpoint_problem(ckpt: Path) -> str | None:
    """Why ``ckpt`` cannot be resumed from (killed while saving, truncated or corrupt files), or None.

    Cheap checks only: the trainer state parses, the safetensors header covers the file, and the
    optimizer / scheduler archives (torch zip files) have their directory at the end."""
    import zipfile

    from safetensors import SafetensorError, safe_open

    try:
        read_json(ckpt / "trainer_state.json")
    except (OSError, StructpeError) as err:
        return f"trainer_state.json unreadable ({err})"
    # a full model, or an adapter run's SiPE weights (structpe.adapters)
    weights = next((ckpt / n for n in ("model.safetensors", "sipe.safetensors") if (ckpt / n).is_file()),
                   ckpt / "model.safetensors")
    try:
        with safe_open(str(weights), "pt"):
            pass
    except (OSError, SafetensorError) as err:
        return f"{weights.name} unreadable ({err})"
    archives = ["optimizer.pt", "scheduler.pt", *sorted(p.name for p in ckpt.glob("rng_state*.pth"))]
    for name in archives:
        if (ckpt / name).exists() and not zipfile.is_zipfile(ckpt / name):
            return f"{name} is truncated or corrupt"
    return None


def truncate_metrics(csv_path: Path, step: int) -> tuple[float, float | None]:
    """Drop rows logged after ``step`` (a killed run's steps that the resume will redo); return the
    training wall seconds and CPU seconds logged up to ``step``, from which the resumed run's clocks
    continue (CPU None: rows logged before ``cpu_s`` existed, so the total is unknown)."""
    from structpe.train.trainer import METRIC_COLUMNS

    if not csv_path.exists():
        return 0.0, 0.0
    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    keep = [r for r in rows if float(r["step"]) <= step]
    with atomic_open(csv_path, "w") as fh:
        w = csv.DictWriter(fh, fieldnames=METRIC_COLUMNS)
        w.writeheader()
        w.writerows(keep)
    wall = max((float(r["elapsed_s"]) for r in keep if r.get("elapsed_s")), default=0.0)
    cpu = [float(r["cpu_s"]) for r in keep if r.get("cpu_s")]
    if keep and len(cpu) < len(keep):
        return wall, None
    return wall, max(cpu, default=0.0)


# train keys that do not change what is trained: free to differ when a run is resumed (threads and
# compile: a run resumed on another machine or under other load; they change float summation order only)
RESUME_FREE_KEYS = ("output_dir", "progress", "threads", "compile", "eval_every", "eval_batches",
                    "eval_batch_size", "save_every", "save_total_limit", "log_every")


def check_resume_config(run_dir: Path, recipe: Recipe, allow_changed: bool = False) -> list[str]:
    """The recipe keys that differ from the run's config.yaml (bookkeeping keys aside). A resumed
    run must match the run that wrote the checkpoint -- the model always, training settings unless
    ``allow_changed`` (a changed lr, seed or batch size makes it another run)."""
    from structpe.train.recipe import TrainConfig
    from structpe.yamlio import load_yaml

    saved = run_dir / "config.yaml"
    if not saved.is_file():
        return []
    old_all = load_yaml(saved, RecipeError) or {}
    new_all = recipe.to_dict()
    old = old_all.get("model", {})
    if old != new_all["model"]:
        diff = sorted(k for k in set(old) | set(recipe.model) if old.get(k) != recipe.model.get(k))
        raise RecipeError(
            f"cannot resume {run_dir}: the model section differs from the checkpoint's config.yaml "
            f"(keys {diff}); resume with the same model settings or use a new train.output_dir"
        )
    # a key the run's config.yaml predates had its default then (e.g. fast_bf16: false)
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)
                if f.default is not dataclasses.MISSING}
    old_t, new_t = {**defaults, **old_all.get("train", {})}, new_all["train"]
    diff = sorted(f"train.{k}" for k in set(old_t) | set(new_t)
                  if k not in RESUME_FREE_KEYS and old_t.get(k) != new_t.get(k))
    if diff and not allow_changed:
        raise RecipeError(
            f"cannot resume {run_dir}: {diff} differ from the run's config.yaml; resume with the "
            "same settings, or pass --allow-changed-recipe to continue it as a changed run"
        )
    return diff
