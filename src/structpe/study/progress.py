"""Where a study's run folder stands: each planned cell's state on disk and the time it still
needs, projected from the cells the same folder has finished (``structpe study run --dry-run``).

A study outlasts a sitting, and the question at every restart is "what is left, and how long
will it take on this machine?". The files answer it without running anything: ``metrics.json``
(finished, or stale where it carries another configuration hash than the spec's now: it runs
again), the cell's lock held by a live worker (running), ``run/checkpoint-<step>`` (training
stopped or in progress at that step), ``run/summary.json`` and ``evals/*.json`` (trained, some
evaluations done). The projection is each recipe's median over the folder's finished cells
(``metrics.json`` ``wall_s``: training and every evaluation, single-worker wall seconds), so it
holds for the machine and load those cells ran under, and says which recipes it cannot project.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from structpe.io import read_json
from structpe.study.cells import METRICS_FILE, cell_dir, cells, trained_model
from structpe.study.spec import StudySpec

CHECKPOINT = re.compile(r"checkpoint-(\d+)$")


@dataclass(frozen=True)
class CellState:
    """One planned cell as its folder shows it. ``stage`` is ``finished``, ``stale`` (finished
    under other evaluation settings: it runs again, trained anew unless ``trained``), ``evaluating``
    (trained, ``evals_done`` finished), ``training`` (``step`` of ``max_steps`` checkpointed) or
    ``to do``; ``running`` says whether a worker holds its lock now."""

    label: str
    seed: int
    stage: str
    running: bool = False
    step: int = 0
    max_steps: int | None = None
    evals_done: frozenset[str] = frozenset()
    trained: bool = False

    @property
    def name(self) -> str:
        return f"{self.label}/seed-{self.seed}"


def _held(lock_path: Path) -> bool:
    """Whether a worker holds the cell's lock. Only an existing lock file is tried (a dry run
    creates nothing), and only for an instant: a worker reaching this cell in that instant skips it
    as taken, and its next run picks it up."""
    if not lock_path.is_file():
        return False
    lock = FileLock(lock_path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return True
    lock.release()
    return False


def _max_steps(run_dir: Path) -> int | None:
    """``train.max_steps`` of the cell's resolved recipe (``run/config.yaml``, written at the start)."""
    import yaml

    config = run_dir / "config.yaml"
    if not config.is_file():
        return None
    steps = (yaml.safe_load(config.read_text()) or {}).get("train", {}).get("max_steps")
    return int(steps) if isinstance(steps, int) else None


def cell_state(out: Path, label: str, seed: int, config_hash: str | None = None) -> CellState:
    """The state of ``label``/``seed`` in the run folder ``out`` (read only); ``config_hash``, the
    cell's hash under the spec now (``runner.cell_config_hash``), tells finished from stale."""
    d = cell_dir(out, label, seed)
    running = _held(d.parent / f"seed-{seed}.lock")
    run = d / "run"
    if (d / METRICS_FILE).is_file():
        if config_hash is None or read_json(d / METRICS_FILE).get("config_hash") == config_hash:
            return CellState(label, seed, "finished", running)
        return CellState(label, seed, "stale", running, trained=trained_model(run))
    if (run / "summary.json").is_file():
        done = frozenset(p.stem for p in (d / "evals").glob("*.json"))
        return CellState(label, seed, "evaluating", running, evals_done=done)
    steps = [int(m.group(1)) for p in run.glob("checkpoint-*") if (m := CHECKPOINT.search(p.name))]
    if running or steps or run.is_dir():
        return CellState(label, seed, "training", running, max(steps, default=0), _max_steps(run))
    return CellState(label, seed, "to do")


def finished_walls(out: Path) -> dict[str, dict[str, float]]:
    """Per recipe label, the median wall seconds of each part (``train``, each evaluation,
    ``total``) over the folder's finished cells."""
    walls: dict[str, list[dict[str, float]]] = {}
    for path in sorted(Path(out).glob(f"cells/*/seed-*/{METRICS_FILE}")):
        metrics = read_json(path)
        wall = metrics.get("wall_s") if isinstance(metrics, dict) else None
        if isinstance(wall, dict) and isinstance(wall.get("total"), (int, float)):
            walls.setdefault(str(metrics.get("recipe_label", path.parts[-3])), []).append(wall)
    return {
        label: {
            part: statistics.median(w[part] for w in ws if part in w) for part in {k for w in ws for k in w}
        }
        for label, ws in walls.items()
    }


def seconds_left(state: CellState, median: dict[str, float] | None) -> float | None:
    """The wall seconds ``state`` still needs at its recipe's medians; None without a finished cell."""
    if state.stage == "finished":
        return 0.0
    if median is None:
        return None
    evals = {k: v for k, v in median.items() if k not in ("train", "total")}
    if state.stage == "evaluating":
        return sum(v for k, v in evals.items() if k not in state.evals_done)
    if state.stage == "stale":  # at most every evaluation again, plus training where the model is gone
        return sum(evals.values()) if state.trained else median["total"]
    if state.stage == "training" and state.max_steps:
        share = 1.0 - min(state.step, state.max_steps) / state.max_steps
        return median.get("train", 0.0) * share + sum(evals.values())
    return median["total"]


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def progress_lines(
    spec: StudySpec, out: Path, workers: int = 2, hashes: Mapping[tuple[str, int], str] | None = None
) -> list[str]:
    """The folder's state for ``spec``'s planned cells: counts, every started or stale cell, the
    cells to do per recipe, and the wall time left for one worker and for ``workers`` of them.
    ``hashes`` (``runner.expected_config_hashes``; None where the folder's data is not prepared)
    tells finished cells from stale ones; without it the finished ones are said to be unchecked."""
    states = [cell_state(out, label, seed, (hashes or {}).get((label, seed))) for label, seed in cells(spec)]
    medians = finished_walls(out)
    count = Counter("running" if s.running else s.stage for s in states)
    lines = [
        f"state of {out}: "
        + ", ".join(
            f"{count[k]} {k}"
            for k in ("finished", "stale", "running", "training", "evaluating", "to do")
            if count[k]
        )
        + f" of {len(states)} planned cells"
    ]
    left: list[float] = []
    unknown: set[str] = set()
    for s in states:
        secs = seconds_left(s, medians.get(s.label))
        if secs is None:
            unknown.add(s.label)
        else:
            left.append(secs)
        if s.stage in ("training", "evaluating"):
            where = (
                f"training, step {s.step} of {s.max_steps or '?'} checkpointed"
                if s.stage == "training"
                else f"trained, {len(s.evals_done)} evaluations done"
            )
            eta = f", ~{_hours(secs)} left" if secs is not None else ""
            lines.append(f"  {s.name}: {'running' if s.running else 'stopped'} ({where}){eta}")
        elif s.stage == "stale":
            again = "its changed evaluations run again" if s.trained else "its model is gone: it trains again"
            lines.append(f"  {s.name}: finished under other evaluation settings or test data; {again}")
    if hashes is None and count["finished"]:
        lines.append(
            "  the finished cells are not checked against the spec's settings now (the folder's data is "
            "not prepared yet; the run prepares it): a cell whose metrics.json carries another "
            "configuration hash runs again"
        )
    todo = Counter(s.label for s in states if s.stage == "to do")
    if todo:
        lines.append("  to do: " + ", ".join(f"{label} x {n}" for label, n in todo.items()))
    unfinished = sum(s.stage != "finished" for s in states)
    projected = sum(s.stage != "finished" and s.label not in unknown for s in states)
    total = sum(left)
    line = (
        f"time left for {projected} of the {unfinished} unfinished cells: ~{_hours(total)} for one worker, "
        f"~{_hours(total / workers)} with {workers} (each recipe's median over this folder's finished cells)"
    )
    if unknown:
        line += f"; not projected, no finished cell here: {', '.join(sorted(unknown))}"
    lines.append(line)
    return lines
