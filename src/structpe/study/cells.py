"""A study's cells on disk: their folders, run order, and the claims parallel workers hold.

Each worker claims a cell with a lock file (``cells/<recipe>/seed-<s>.lock``, released by the
operating system when its process dies, so a killed worker leaves no stale claim) and waits for
a seed's baseline model only when its leakage audit needs it (``structpe.study.runner``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from structpe.errors import StructpeError
from structpe.io import read_json
from structpe.names import check_inside
from structpe.study.spec import StudySpec

CELL_FILE = "cell.json"
METRICS_FILE = "metrics.json"


class StudyError(StructpeError):
    """A study cannot continue (e.g. an output folder written under another configuration)."""


def cell_dir(out: Path, label: str, seed: int) -> Path:
    return check_inside(out / "cells" / label / f"seed-{seed}", out)  # labels are checked names too


@contextmanager
def claim(out: Path, label: str, seed: int) -> Iterator[bool]:
    """Hold a cell's lock for the body; yields False (and holds nothing) when another worker has it."""
    lock_path = check_inside(out / "cells" / label / f"seed-{seed}.lock", out)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(lock_path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def trained_model(run_dir: Path) -> bool:
    """Whether a cell's pre-training finished and its final model is still on disk (a folder whose
    ``metrics.json`` was copied from elsewhere has neither)."""
    return (run_dir / "summary.json").is_file() and (run_dir / "final" / "config.json").is_file()


def await_baseline(out: Path, spec: StudySpec, seed: int, log: Callable[[str], None], poll_s: float) -> Path:
    """The seed's baseline model folder, waiting while another worker still trains it."""
    from structpe.train.checkpoints import final_model_dir

    run_dir = cell_dir(out, spec.baseline, seed) / "run"
    waiting = False
    while not (run_dir / "summary.json").is_file():
        with claim(out, spec.baseline, seed) as free:
            if free:  # nobody is training it: it was never run (e.g. the cell folder was deleted)
                raise StudyError(
                    f"the leakage audit needs the baseline {spec.baseline}/seed-{seed}, which is not "
                    f"trained in {out}; rerun the study command (it runs the baseline first)"
                )
        if not waiting:
            log(
                f"waiting for another worker to finish {spec.baseline}/seed-{seed} "
                "(the leakage audit needs it)"
            )
            waiting = True
        time.sleep(poll_s)
    return final_model_dir(run_dir)


def cells(spec: StudySpec) -> list[tuple[str, int]]:
    """(recipe label, seed) in run order: seed-major, baseline first; each recipe at its own seeds."""
    order = [spec.baseline, *[r.label for r in spec.recipes if r.label != spec.baseline]]
    return [(label, seed) for seed in spec.all_seeds() for label in order if seed in spec.recipe_seeds(label)]


def check_owner(path: Path, train_hash: str) -> None:
    """Refuse to overwrite a cell folder whose model was trained under another configuration."""
    if path.is_file():
        old = read_json(path).get("train_hash")
        if old != train_hash:
            raise StudyError(
                f"{path} was written by a cell trained under another configuration (hash {str(old)[:12]}, "
                f"now {train_hash[:12]}); use a new --output folder or delete {path.parent} to rerun it"
            )
