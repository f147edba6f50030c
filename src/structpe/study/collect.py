"""Collecting a run folder's finished cells into the study folder that keeps a study's results.

A study's cells are trained over several sittings and machines (``runs/...`` folders that hold
weights), while its results live in one small folder that is committed (``docs/studies/<name>``:
``spec.json``, ``chance.json``, each cell's ``metrics.json`` and ``cell.json``). A cell lands

- in ``cells/<recipe>/seed-<s>`` where that cell is new, or was trained on the same machine and
  precision (``cell_metrics.pair_key``; a re-evaluation updates it);
- in ``machines/<name>/cells/<recipe>/seed-<s>`` with ``--machine NAME``: a re-run on another
  machine, which stands in for its seed where the cell it is compared with ran there
  (``aggregate.paired``); one such folder holds the cells of one machine and precision;
- over a primary cell of another machine only with ``replace`` (a new primary; its old pairs go).

Anything else is refused before a file is written, naming the cell and both machines. The run's
selections (``spec.json`` ``runs``) join the study folder's, so its report plans their cells.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structpe.errors import StructpeError
from structpe.io import atomic_write_bytes, read_json_object, write_json_atomic
from structpe.study.cell_metrics import key_text, load_cell_metrics, load_rerun_cells, pair_key
from structpe.study.selection import saved_runs, with_recipes_of

# a cell's small outputs, the ones a study folder keeps (weights and run folders stay behind)
CELL_FILES = ("metrics.json", "cell.json")
MACHINE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True)
class Collected:
    """One cell: where it went (relative to the study folder) and whether that changed a file."""

    recipe: str
    seed: int
    dest: str
    action: str  # "new", "updated" or "unchanged"


def collect_cells(
    src: str | Path,
    dest: str | Path,
    machine: str | None = None,
    replace: bool = False,
    recipes: Sequence[str] | None = None,
    adopt_spec: bool = False,
) -> list[Collected]:
    """Copy every finished cell of the run folder ``src`` (of ``recipes``, default all) into the
    study folder ``dest`` (module docstring); returns what happened to each cell. Checks everything
    before writing anything. ``adopt_spec``: the run's spec (evaluations, claims) becomes the
    folder's, for a run that re-evaluated the folder's cells under a newer spec; the recipes of
    earlier slices stay."""
    src, dest = Path(src), Path(dest)
    if machine is not None and not MACHINE_NAME.match(machine):
        raise StructpeError(
            f"--machine {machine!r}: a folder name of lower-case letters, digits, '.', '_' and '-' "
            "(e.g. amd-epyc-avx2-fp32)"
        )
    if replace and machine is not None:
        raise StructpeError("--replace and --machine exclude each other: a cell is a primary or a re-run")
    saved = _spec_json(src)
    kept = _spec_json(dest) if (dest / "spec.json").exists() else None
    if kept is not None:
        _check_same_study(src, saved, dest, kept)
    cells = load_cell_metrics(src)
    if recipes is not None:
        unknown = sorted(set(recipes) - {c["recipe_label"] for c in cells})
        if unknown:
            have = ", ".join(sorted({c["recipe_label"] for c in cells})) or "none"
            raise StructpeError(f"--recipes {' '.join(unknown)}: no finished cells in {src} (it has: {have})")
        cells = [c for c in cells if c["recipe_label"] in recipes]
    if not cells:
        raise StructpeError(f"{src}: no finished cells (cells/<recipe>/seed-<s>/metrics.json)")
    # the machines the re-run folder already holds, read once (not once per cell)
    reruns = load_rerun_cells(dest) if machine else []
    held = {pair_key(c) for c in reruns if c["rerun_folder"] == f"machines/{machine}"}
    plan = [(c, _destination(c, dest, machine, replace, held)) for c in cells]
    done = []
    for cell, rel in plan:
        cell_dir = src / "cells" / cell["recipe_label"] / f"seed-{cell['seed']}"
        done.append(_copy_cell(cell_dir, dest / rel, cell, rel))
    if not (dest / "chance.json").exists() and (src / "chance.json").exists():
        atomic_write_bytes(dest / "chance.json", (src / "chance.json").read_bytes())
    merged = _merged_spec(saved, kept, adopt_spec)
    if merged != kept:  # a folder whose runs already hold the run's selections keeps its file as is
        write_json_atomic(dest / "spec.json", merged)
    return done


def _spec_json(folder: Path) -> dict[str, Any]:
    if not (folder / "spec.json").is_file():
        raise StructpeError(f"{folder}: no spec.json (not a study folder written by `structpe study run`)")
    return read_json_object(folder / "spec.json")


def _check_same_study(src: Path, saved: dict[str, Any], dest: Path, kept: dict[str, Any]) -> None:
    """Cells pair only within one study, profile and data set."""
    for what, a, b in (
        ("study", saved["spec"]["name"], kept["spec"]["name"]),
        ("profile", saved["profile"], kept["profile"]),
        ("data_fingerprint", saved.get("data_fingerprint"), kept.get("data_fingerprint")),
    ):
        if a != b:
            raise StructpeError(f"{src}: {what} {a!r}, but {dest} holds {what} {b!r}: not one study")


def _destination(
    cell: dict[str, Any], dest: Path, machine: str | None, replace: bool, held: set[tuple[str | None, ...]]
) -> str:
    """Where ``cell`` goes in ``dest`` (relative), or the one error that says why it cannot."""
    name = f"{cell['recipe_label']}/seed-{cell['seed']}"
    key = pair_key(cell)
    if machine is not None:
        folder = f"machines/{machine}"
        if held and held != {key}:
            which = "; ".join(sorted(key_text(k) for k in held))
            raise StructpeError(
                f"{name}: ran on {key_text(key)}, but {dest / folder} holds cells of {which} "
                "(one machine folder per machine and precision)"
            )
        return f"{folder}/cells/{name}"
    primary = dest / "cells" / name / "metrics.json"
    if primary.exists() and not replace:
        there = read_json_object(primary)
        if pair_key(there) != key:
            raise StructpeError(
                f"{name}: ran on {key_text(key)}, but {primary} ran on {key_text(pair_key(there))}: "
                "collect it as a re-run (--machine NAME) or as the new primary cell (--replace)"
            )
    return f"cells/{name}"


def _copy_cell(cell_dir: Path, to: Path, cell: dict[str, Any], rel: str) -> Collected:
    """Copy the cell's small files (each atomically); the action says whether any file changed."""
    before = (to / "metrics.json").exists()
    changed = False
    for name in CELL_FILES:
        f = cell_dir / name
        if not f.is_file():
            continue
        data = f.read_bytes()
        if not (to / name).is_file() or (to / name).read_bytes() != data:
            atomic_write_bytes(to / name, data)
            changed = True
    action = "unchanged" if not changed else ("updated" if before else "new")
    return Collected(cell["recipe_label"], int(cell["seed"]), rel, action)


def _merged_spec(saved: dict[str, Any], kept: dict[str, Any] | None, adopt: bool = False) -> dict[str, Any]:
    """The study folder's ``spec.json`` with the run's selections added (the kept spec stays: it
    is what the committed report was written with; recipes new to it join it as the run ran them,
    ``selection.with_recipes_of``); ``adopt``: the run's spec and spec file instead, the kept spec's
    other recipes joining it."""
    if kept is None:
        return saved
    runs = saved_runs(kept)
    runs += [r for r in saved_runs(saved) if r not in runs]
    if adopt:
        spec = with_recipes_of(saved["spec"], kept["spec"])
    else:
        spec = with_recipes_of(kept["spec"], saved.get("spec"))
    return {
        **kept,
        **({"source": saved["source"]} if adopt else {}),  # the spec file a report loads
        "spec": spec,
        "recipes": list(dict.fromkeys(label for r in runs for label in r["recipes"] or [])),
        "seeds": list(dict.fromkeys(s for r in runs for s in r["seeds"] or [])),
        "runs": runs,
    }
