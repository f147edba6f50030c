"""A run folder's checkpoints: the newest complete one (resume), the model a finished run saved,
and why a checkpoint cannot be resumed from (killed while saving, truncated or corrupt files)."""

from __future__ import annotations

import sys
from pathlib import Path

from structpe.errors import StructpeError
from structpe.io import read_json


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
