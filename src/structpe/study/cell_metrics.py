"""A study's finished cells as the report reads them: every ``metrics.json`` checked on load, the
machine and training precision each cell ran with, and which two cells of a seed may be paired
(the same CPU type, SIMD level, GPU and precision: :func:`pair_key`; per metric, the same test
set: :func:`eval_set_of`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from structpe.io import read_json


def load_cell_metrics(out: str | Path) -> list[dict[str, Any]]:
    """Every finished cell's ``metrics.json`` under ``out/cells`` (sorted by recipe, seed)."""
    found = []
    for p in sorted(Path(out).glob("cells/*/seed-*/metrics.json")):
        found.append(_check_cell(read_json(p, finite=True), p))
    return sorted(found, key=lambda m: (m["recipe_label"], m["seed"]))


def load_rerun_cells(out: str | Path) -> list[dict[str, Any]]:
    """Cells re-run on another machine, ``out/machines/<name>/cells/<recipe>/seed-<s>/metrics.json``:
    a recipe trained again where the cells it is compared with ran, so that their seeds pair within
    one machine and precision (``aggregate.paired``). Each carries ``rerun_folder`` = ``machines/<name>``."""
    found = []
    for p in sorted(Path(out).glob("machines/*/cells/*/seed-*/metrics.json")):
        folder = p.parents[3].relative_to(out).as_posix()
        found.append({**_check_cell(read_json(p, finite=True), p), "rerun_folder": folder})
    return sorted(found, key=lambda m: (m["rerun_folder"], m["recipe_label"], m["seed"]))


def _check_cell(cell: Any, path: Path) -> dict[str, Any]:
    """A cell's metrics as the report reads them, else one error naming the file and the key: an
    edited or foreign file (a score written as a string) would otherwise fail deep in the arithmetic."""
    from structpe.errors import StructpeError

    def bad(key: str, value: Any, want: str) -> StructpeError:
        return StructpeError(f"{path}: {key} is {value!r}, not {want} (a broken or edited result)")

    if not isinstance(cell, dict):
        raise bad("the file", type(cell).__name__, "a JSON object")
    if not isinstance(cell.get("recipe_label"), str):
        raise bad("recipe_label", cell.get("recipe_label"), "a recipe label")
    if not isinstance(cell.get("seed"), int) or isinstance(cell.get("seed"), bool):
        raise bad("seed", cell.get("seed"), "an integer")
    scores = cell.get("scores")
    if not isinstance(scores, dict):
        raise bad("scores", scores, "an object of metric -> number")
    for key, value in scores.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise bad(f"scores.{key}", value, "a number")
    return cell


def machine_of(cell: dict[str, Any]) -> str | None:
    """The machine a cell ran on, from its provenance: CPU model, core count, torch's SIMD level and
    the training precision where recorded (cells trained on different CPUs or in bf16 / bf16-fast /
    fp32 are not interchangeable: a paired difference across machines includes the machines'
    difference)."""
    hw = cell.get("provenance", {}).get("hardware") or {}
    if not hw.get("cpu"):
        return None
    extra = [f"{hw.get('cpu_count', '?')} CPUs"]
    if hw.get("cpu_capability"):
        extra.append(hw["cpu_capability"])
    name = f"{hw['cpu']} ({', '.join(extra)})"
    precision = precision_of(cell)
    return name if precision is None else f"{name}, {precision}"


def precision_of(cell: dict[str, Any]) -> str | None:
    """The cell's training precision: ``metrics.json``'s ``precision``, else (cells written before
    it) its ``train``: ``bf16-fast`` (bf16 parameters with float32 masters, not autocast:
    structpe.train.master_weights), ``bf16`` or ``fp32``; None when neither is recorded."""
    if cell.get("precision"):
        return str(cell["precision"])
    train = cell.get("train") or {}
    if train.get("fast_bf16"):
        return "bf16-fast"
    bf16 = train.get("bf16")
    return None if bf16 is None else ("bf16" if bf16 else "fp32")


def pair_key(cell: dict[str, Any]) -> tuple[str | None, ...]:
    """What two cells of one seed must share to be paired: the CPU model, torch's SIMD level, the
    GPU where one trained it, and the training precision (numerics alone move a seed's SyntaxGym by
    the size of the control effects). A field that neither cell records matches (``auto``
    precision resolves by the hardware)."""
    hw = (cell.get("provenance") or {}).get("hardware") or {}
    return hw.get("cpu"), hw.get("cpu_capability"), hw.get("gpu"), precision_of(cell)


# the counts a score records of what it was measured on (BLiMP pairs, SyntaxGym suites, test
# sentences and tokens, GLUE examples): a cell scored before a study's protocol changed has others
EVAL_SET_COUNTS = {
    "blimp": ("n_pairs",),
    "syntaxgym": ("n_suites",),
    "ppl": ("n_sentences", "n_tokens"),
    "glue": ("n_train", "n_dev"),
}


def eval_set_of(cell: dict[str, Any], metric: str) -> dict[str, float]:
    """What ``metric`` of ``cell`` was measured on: its evaluation's recorded counts
    (:data:`EVAL_SET_COUNTS`; ``blimp.smc.overall`` -> ``blimp.smc.n_pairs``). Two cells' values of a
    metric are comparable only where the counts both record agree: a 6-paradigm BLiMP score paired
    with a 67-paradigm one would be a difference of test sets, not of models."""
    family, _, rest = metric.partition(".")
    mode = rest.partition(".")[0]
    found = {}
    for name in EVAL_SET_COUNTS.get(family, ()):
        value = cell["scores"].get(f"{family}.{mode}.{name}")
        if value is not None:
            found[name] = float(value)
    return found


def eval_set_difference(a: dict[str, Any], b: dict[str, Any], metric: str) -> str | None:
    """Why ``a`` and ``b`` cannot be paired on ``metric`` (their test sets differ), else None."""
    pa, pb = eval_set_of(a, metric), eval_set_of(b, metric)
    differ = [n for n in pa if n in pb and pa[n] != pb[n]]
    if not differ:
        return None
    return ", ".join(f"{n} {pa[n]:,.0f} against {pb[n]:,.0f}" for n in differ)


def key_text(key: tuple[str | None, ...]) -> str:
    """A :func:`pair_key` as words, for the reason a seed's two cells are not paired."""
    cpu, cap, gpu, precision = key
    where = (cpu or "CPU not recorded") + (f" ({cap})" if cap else "") + (f", {gpu}" if gpu else "")
    return f"{where}, {precision or 'precision not recorded'}"


def machines_text(cells: Sequence[dict[str, Any]]) -> str:
    """The machines of ``cells`` in order of first appearance, for a report line."""
    found: list[str] = []
    for c in cells:
        name = machine_of(c)
        if name and name not in found:
            found.append(name)
    return "; ".join(found) or "not recorded"


def by_seed(cells: Sequence[dict[str, Any]], label: str, metric: str) -> dict[int, float]:
    """``label``'s value of ``metric`` per seed, over the cells that have it."""
    return {
        int(c["seed"]): float(c["scores"][metric])
        for c in cells
        if c["recipe_label"] == label and metric in c["scores"] and c["scores"][metric] is not None
    }


def cells_by_seed(cells: Sequence[dict[str, Any]], label: str) -> dict[int, dict[str, Any]]:
    """``label``'s cells by seed."""
    return {int(c["seed"]): c for c in cells if c["recipe_label"] == label}
