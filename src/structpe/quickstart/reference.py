"""Where ``structpe quickstart``'s single run sits among the ``quickstart`` profile's seeds.

The reference is a study folder of the ``sipe-txl`` study's ``quickstart`` profile (``spec.json`` and
``cells/<recipe>/seed-<s>/metrics.json``, written by ``structpe study run sipe-txl --profile
quickstart --output DIR``); by default ``docs/studies/sipe-txl-quickstart`` of the checkout this
package runs from (:data:`structpe.quickstart.config.REFERENCE_DIR`). The run is compared with it
only when the reference ran this run's settings (:func:`mismatch`: model, training budget, data,
evaluations; the seed is no setting), and with the reference's cells trained on the run's CPU type,
SIMD level and precision where it has them (``machines/<name>/cells`` re-runs included,
:func:`machine_cells`): numerics alone move one seed's SyntaxGym by 0.03-0.04, so a spread from
another machine is shown with a line saying so. For each headline score the page shows the reference's mean
± sd, min-max and seed count beside this run's value, and the paired ``position`` - ``none``
difference beside the reference's per-seed paired differences (same seed). The statistics are
:mod:`structpe.study.aggregate`'s.

A range is a description, not a test: a new run of the same settings falls outside the min-max of
n earlier seeds with probability 2 / (n + 1) (its value is equally likely to take any of the n + 1
ranks), 1 in 3 with five seeds.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structpe.errors import StructpeError
from structpe.io import read_json
from structpe.quickstart.config import PROFILE, REFERENCE_DIR, STUDY
from structpe.study.aggregate import mean_sd
from structpe.study.cell_metrics import (
    by_seed,
    load_cell_metrics,
    load_rerun_cells,
    machine_of,
    machines_text,
    pair_key,
)
from structpe.study.spec import DatasetSpec, score_settings, with_defaults
from structpe.study.tables import md_table, pm
from structpe.study.wording import portable

MAKE_REFERENCE = f"structpe study run {STUDY} --profile {PROFILE} --output DIR"
# how the data stage runs, not what it builds (structpe.study.spec.DatasetSpec): never a mismatch
RUN_ONLY_DATASET = ("num_proc", "shard_units")
SECTION_TITLE = "## This run among the quickstart profile's seeds"


class ReferenceFolderError(StructpeError):
    """``--reference`` names no readable study folder; the message names the path."""


@dataclass
class Reference:
    """A study folder read as a reference: the spec as it ran (``spec.json``'s ``spec``), its
    command, its finished cells' ``metrics.json`` and its cells re-run on other machines
    (``machines/<name>/cells``, :func:`structpe.study.cell_metrics.load_rerun_cells`)."""

    folder: Path
    spec: dict[str, Any]
    command: str | None
    cells: list[dict[str, Any]]
    reruns: list[dict[str, Any]] = field(default_factory=list)


def read_reference(folder: str | Path) -> Reference:
    """Read a study folder; anything missing or malformed is one line naming the path."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ReferenceFolderError(
            f"{folder}: no such folder (a reference is the output of `{MAKE_REFERENCE}`)"
        )
    spec_file = folder / "spec.json"
    if not spec_file.is_file():
        raise ReferenceFolderError(f"{folder}: no spec.json (not a study folder of `{MAKE_REFERENCE}`)")
    saved = read_json(spec_file)
    if not isinstance(saved, dict) or not isinstance(saved.get("spec"), dict):
        raise ReferenceFolderError(f"{spec_file}: holds no 'spec' (the spec the study ran with)")
    try:
        cells = load_cell_metrics(folder)
        reruns = load_rerun_cells(folder)
    except (KeyError, TypeError) as err:
        raise ReferenceFolderError(
            f"{folder}: a cells/<recipe>/seed-<s>/metrics.json lacks {err} (not written by a study run)"
        ) from None
    if not cells:
        raise ReferenceFolderError(f"{folder}: no finished cells (no cells/<recipe>/seed-<s>/metrics.json)")
    return Reference(folder, saved["spec"], saved.get("command"), cells, reruns)


def machine_cells(
    reference: Reference, labels: list[str], run_cell: dict[str, Any] | None
) -> tuple[list[dict[str, Any]], bool | None]:
    """The reference cells to place this run among, and whether they trained on its machine.

    The cells of the run's CPU type, SIMD level and precision (``cell_metrics.pair_key`` of
    ``run_cell``, one of this run's ``metrics.json``), the folder's own before its re-runs, one per
    recipe and seed, where they cover every recipe of ``labels``; else the folder's own cells of its
    most common machine (True / False; None: the run records no machine). One machine either way, so
    a paired difference within the reference is never one across machines."""

    def one_per_seed(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
        first: dict[tuple[str, int], dict[str, Any]] = {}
        for c in cells:
            first.setdefault((c["recipe_label"], int(c["seed"])), c)
        return list(first.values())

    known = run_cell is not None and machine_of(run_cell) is not None
    if known:
        mine = pair_key(run_cell)
        same = one_per_seed([c for c in [*reference.cells, *reference.reruns] if pair_key(c) == mine])
        if {c["recipe_label"] for c in same} >= set(labels):
            return same, True
    common = Counter(pair_key(c) for c in reference.cells).most_common(1)[0][0]
    return one_per_seed([c for c in reference.cells if pair_key(c) == common]), (False if known else None)


def find_reference(given: str | Path | None, default: Path = REFERENCE_DIR) -> Reference | str:
    """The reference to compare with, or the sentence saying why there is none.

    An explicitly ``given`` folder must be readable (:class:`ReferenceFolderError` otherwise); the
    default one may be absent or unreadable, and the report then says so and how to make one.
    """
    if given is not None:
        return read_reference(given)
    if not default.exists():
        return (
            f"No reference distribution is available: `{default}` does not exist. Make one with "
            f"`{MAKE_REFERENCE}` and pass it with `structpe quickstart --reference DIR`."
        )
    try:
        return read_reference(default)
    except StructpeError as err:
        return f"No reference distribution is available: {err}."


def _overrides(where: str, overrides: list[str]) -> dict[str, str]:
    """``key=value`` overrides as settings (a later one of the same key wins, as in a recipe)."""
    out = {}
    for o in overrides:
        key, _, value = o.partition("=")
        out[f"{where}{key}"] = value
    return out


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _flat(f"{prefix}.{key}", sub).items()}
    return {prefix: value}


def settings(spec: dict[str, Any], labels: list[str] | None = None) -> dict[str, Any]:
    """What a spec (``StudySpec.to_dict()``) fixes about the trained models of ``labels`` (default:
    its recipes), by name: recipe profile, recipes, overrides and data; not its seeds, its file's
    path, its claims, how the data stage runs or its evaluations (``score_settings``)."""
    dataset = with_defaults(DatasetSpec, spec["dataset"])
    dataset = {k: v for k, v in dataset.items() if k not in RUN_ONLY_DATASET}
    recipes = {r["label"]: r for r in spec["recipes"]}
    out: dict[str, Any] = {
        "study": spec["name"],
        "profile": spec["profile"],
        "recipe profile": spec["recipe_profile"],
    }
    for label in labels or list(recipes):
        r = recipes.get(label)
        out[f"recipes.{label}"] = {k: r[k] for k in ("recipe", "overrides", "tags")} if r else None
        out.update(_overrides(f"{label}: ", spec["profile_recipe_overrides"].get(label, [])))
    out.update(_overrides("", spec["profile_overrides"]))
    out.update(_flat("dataset", dataset))
    return json.loads(json.dumps(out))  # tuples as lists, as spec.json holds them


def _first_difference(mine: dict[str, Any], theirs: dict[str, Any]) -> str | None:
    missing = object()
    for key in [*mine, *(k for k in theirs if k not in mine)]:
        a, b = mine.get(key, missing), theirs.get(key, missing)
        if a != b:
            here = "not set" if a is missing or a is None else json.dumps(a)
            there = "not set" if b is missing or b is None else json.dumps(b)
            return f"`{key}` is {here} in this run and {there} in the reference"
    return None


def mismatch(run_spec: dict[str, Any], ref_spec: dict[str, Any]) -> str | None:
    """The first setting of this run's trained models in which the reference differs, in words;
    None if none does (the reference may run more recipes than this run)."""
    labels = [r["label"] for r in run_spec["recipes"]]
    return _first_difference(settings(run_spec, labels), settings(ref_spec, labels))


def metric_mismatch(metric: str, run_spec: dict[str, Any], ref_spec: dict[str, Any]) -> str | None:
    """The first evaluation setting of ``metric`` in which the reference differs; None if none does."""
    return _first_difference(score_settings(run_spec, metric), score_settings(ref_spec, metric))


def headline_metrics(modes: list[str] | tuple[str, ...]) -> list[str]:
    """The scores of the quickstart's table, as ``metrics.json`` names them, per likelihood mode."""
    per_mode = ("ppl.{}.token_ppl", "ppl.{}.word_ppl", "blimp.{}.overall", "syntaxgym.{}.sg_score")
    return ["val_lm_loss", *(m.format(mode) for mode in modes for m in per_mode)]


def _clean(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def _row(values: dict[int, float], run: float | None) -> dict[str, Any]:
    """The reference's spread of one score (seed -> value) and where ``run`` lies in it."""
    s = mean_sd(list(values.values()))
    lo, hi = (min(values.values()), max(values.values())) if values else (None, None)
    inside = None if run is None or lo is None else lo <= run <= hi
    side = None if inside is None or inside else ("below" if run < lo else "above")
    return {"mean": _clean(s["mean"]), "sd": _clean(s["sd"]), "n": s["n"], "min": lo, "max": hi,
            "seeds": sorted(values), "run": run, "inside": inside, "side": side}


def compare(
    run: dict[str, dict[str, float]],
    cells: list[dict[str, Any]],
    metrics: dict[str, list[str]],
    baseline: str,
    differs: dict[str, str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """This run's scores (recipe -> ``metrics.json`` scores) against the reference ``cells``: per
    recipe and metric of ``metrics``, and the paired difference recipe - ``baseline`` per metric
    (the reference's per seed, this run's from its own two cells). A metric in ``differs`` (metric
    -> the setting that differs, :func:`metric_mismatch`) keeps this run's value and no spread."""
    differs = differs or {}

    def row(values: dict[int, float], m: str, here: float | None) -> dict[str, Any]:
        if m in differs:
            return {**_row({}, here), "other_settings": differs[m]}
        return _row(values, here)

    scores, paired = [], []
    for label, names in metrics.items():
        mine = run.get(label, {})
        for m in names:
            scores.append({"recipe": label, "metric": m, **row(by_seed(cells, label, m), m, mine.get(m))})
        if label == baseline or baseline not in run:
            continue
        for m in names:
            a, b = by_seed(cells, label, m), by_seed(cells, baseline, m)
            diffs = {s: a[s] - b[s] for s in sorted(set(a) & set(b))}
            here = mine[m] - run[baseline][m] if m in mine and m in run[baseline] else None
            paired.append({"recipe": label, "against": baseline, "metric": m, **row(diffs, m, here)})
    return {"scores": scores, "paired": paired}


def reference_section(
    reference: Reference | str,
    run_spec: dict[str, Any],
    run: dict[str, dict[str, float]],
    metrics: dict[str, list[str]],
    chance: dict[str, Any] | None,
    seed: int,
    run_cell: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The section's content (report.json's ``reference``): ``status`` ``compared`` (a score whose
    own evaluation settings differ is shown without a spread, naming the setting), ``other
    settings`` (the trained models differ: ``note`` names the first differing setting, no numbers)
    or ``none`` (``note`` says why). Paths are shown without the machine's layout.

    ``run_cell`` (one of this run's ``metrics.json``) picks the reference's cells of the run's
    machine (:func:`machine_cells`); ``same_machine`` records whether there were any."""
    if isinstance(reference, str):
        return {"status": "none", "note": portable(reference)}
    folder = portable(str(reference.folder))
    command = portable(reference.command) if reference.command else None
    base = {"folder": folder, "command": command, "seed": seed}
    why = mismatch(run_spec, reference.spec)
    if why is not None:
        note = f"Not comparable: the reference `{folder}` trained other models ({why}); no numbers shown."
        return {**base, "status": "other settings", "note": note}
    baseline = run_spec["baseline"]
    names = {m for ms in metrics.values() for m in ms}
    differs = {m: why for m in sorted(names) if (why := metric_mismatch(m, run_spec, reference.spec))}
    cells, same = machine_cells(reference, list(metrics), run_cell)
    return {
        **base,
        "status": "compared",
        "hardware": machines_text(cells),
        "run_hardware": machine_of(run_cell) if run_cell else None,
        "same_machine": same,
        "seeds": {label: sorted({int(c["seed"]) for c in cells if c["recipe_label"] == label})
                  for label in metrics},
        **compare(run, cells, metrics, baseline, differs),
        "chance": {k: chance[k] for k in ("blimp", "syntaxgym")} if chance else None,
    }


def _val(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    prec = 3 if abs(x) < 10 else 1
    return f"{x:+.{prec}f}" if signed else f"{x:.{prec}f}"


def _cells(r: dict[str, Any], signed: bool) -> list[str]:
    if r.get("other_settings"):
        return [f"not compared: {r['other_settings']}", "-", "-", _val(r["run"], signed), "-"]
    if not r["n"]:
        return ["not in the reference", "-", "0", _val(r["run"], signed), "-"]
    spread = {"mean": r["mean"], "sd": math.nan if r["sd"] is None else r["sd"], "n": r["n"]}
    mean = pm(spread)
    if signed and not mean.startswith("-"):
        mean = "+" + mean
    inside = "-" if r["inside"] is None else ("yes" if r["inside"] else f"no ({r['side']})")
    return [mean, f"{_val(r['min'], signed)} to {_val(r['max'], signed)}", str(r["n"]),
            _val(r["run"], signed), inside]


def render(section: dict[str, Any]) -> list[str]:
    """report.md's section, in Markdown lines."""
    lines = [SECTION_TITLE, ""]
    if section["status"] != "compared":
        return [*lines, section["note"]]
    seed = section["seed"]
    counts = ", ".join(
        f"{len(s)} of `{label}` ({', '.join(map(str, s))})" for label, s in section["seeds"].items()
    )
    ns = sorted({r["n"] for r in section["scores"] if r["n"]})
    odds = ", ".join(f"{2 / (n + 1):.2f} with {n} seeds" for n in ns)
    lines += [
        f"- Reference: `{section['folder']}`, seeds {counts}, on {section['hardware']}"
        + (f" (`{section['command']}`)" if section["command"] else "")
        + f"; the same models, data and budget as this run (seed {seed}); a score whose own "
        "evaluation settings differ is not compared (its row names the setting).",
        f"- A range is a description, not a test: a new seed of the same settings falls outside the "
        f"min-max of n earlier seeds with probability 2 / (n + 1) ({odds}).",
    ]
    if section.get("same_machine") is False:
        lines.append(
            f"- **Another machine:** this run trained on {section['run_hardware']}, the reference's cells on "
            f"{section['hardware']}. Numerics alone (CPU type, SIMD level, precision) move one seed's "
            "SyntaxGym by 0.03-0.04, so a score outside the range may be the machine's, not the seed's."
        )
    if any(seed in s for s in section["seeds"].values()):
        lines.append(
            f"- Seed {seed} is one of the reference's seeds: this run repeats that cell, not a new draw."
        )
    header = ["recipe", "score", "reference mean ± sd", "reference min–max", "seeds",
              f"this run (seed {seed})", "inside min–max"]
    rows = [[f"`{r['recipe']}`", f"`{r['metric']}`", *_cells(r, False)] for r in section["scores"]]
    chance = section["chance"] or {}
    for name, key in (("BLiMP", "blimp"), ("SyntaxGym", "syntaxgym")):
        if key in chance:
            rows.append(["*chance*", f"{name}, every mode", f"*{chance[key]:.3f}*", "-", "-",
                         f"*{chance[key]:.3f}*", "-"])
    lines += ["", *md_table(rows, header)]
    if section["paired"]:
        paired = [[f"`{r['recipe']}` - `{r['against']}`", f"`{r['metric']}`", *_cells(r, True)]
                  for r in section["paired"]]
        lines += [
            "",
            "Paired differences, recipe - baseline at the same seed (PPL and loss: lower is better; "
            "BLiMP and SyntaxGym: higher):",
            "",
            *md_table(paired, ["difference", *header[1:]]),
        ]
    return lines
