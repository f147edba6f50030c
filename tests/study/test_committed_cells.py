"""Every committed study cell (``docs/studies/*/cells/<recipe>/seed-<s>/cell.json``) keeps its
hashes under the current code: its training configuration is the one the spec gives it today (so
``structpe study run`` would never re-train it), and for the folders run at today's evaluation
settings its configuration hash too (so the run would skip it as finished). Moving code between the
study's modules must leave all of them in place."""

from __future__ import annotations

from pathlib import Path

import pytest

from structpe.io import read_json, stable_hash
from structpe.study.data import StudyData, TagVariant
from structpe.study.runner import eval_keys, train_config
from structpe.study.spec import load_spec

STUDIES = Path(__file__).parents[2] / "docs" / "studies"
CELLS = sorted(STUDIES.glob("*/cells/*/seed-*/cell.json"))
# the folders whose every cell ran at the evaluation settings the spec's profile has today; the txl
# folders ran before protocol changes that re-key evaluations, never training (their keys are
# checked in tests/study/test_study_glue.py), the quickstart's at the settings of its own config
CURRENT_SETTINGS = ("sipe-encoders-cpu-mini",)


def test_every_committed_study_has_cells() -> None:
    folders = {p.parents[3].name for p in CELLS}
    assert {
        "sipe-encoders-cpu-mini",
        "sipe-txl-cpu-mini",
        "sipe-txl-cpu-small",
        "sipe-txl-quickstart",
    } <= folders


@pytest.mark.parametrize("path", CELLS, ids=lambda p: str(p.relative_to(STUDIES).parent))
def test_a_committed_cell_keeps_its_hashes(path: Path) -> None:
    folder = path.parents[3]
    saved = read_json(folder / "spec.json")
    spec = load_spec(saved["spec"]["name"], saved["profile"])
    cell, m = read_json(path), read_json(path.parent / "metrics.json")
    label, seed = m["recipe_label"], m["seed"]
    train_fp = cell["config"]["data_fingerprint"]
    assert train_config(spec, label, seed, train_fp) == cell["config"]
    assert stable_hash(train_config(spec, label, seed, train_fp)) == cell["train_hash"] == m["train_hash"]
    if folder.name not in CURRENT_SETTINGS:
        return
    parse_fp = read_json(folder / "cells" / spec.baseline / f"seed-{seed}" / "cell.json")["config"][
        "data_fingerprint"
    ]
    tags = spec.recipe(label).tags
    variants = {} if tags == "parse" else {tags: TagVariant(Path("ds"), train_fp)}
    data = StudyData(
        Path("tok"), Path("ds"), m["data_fingerprint"], [], train_fingerprint=parse_fp, variants=variants
    )
    assert stable_hash([m["train_hash"], eval_keys(spec, label, seed, data)]) == m["config_hash"]
