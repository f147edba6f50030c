"""Aggregation on synthetic cell metrics: mean ± sd, paired differences, the bootstrap CI, the
verdict rule, and the report (tables, plots) written from them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from structpe.io import write_json_atomic
from structpe.study.aggregate import aggregate, bootstrap_ci, combine, load_cell_metrics, mean_sd, verdict
from structpe.study.report import write_study_report
from structpe.study.spec import SyntaxGymSpec, load_spec


def test_bootstrap_ci_brackets_the_mean_and_is_reproducible() -> None:
    rng = np.random.default_rng(1)
    xs = rng.normal(2.0, 1.0, size=30)
    lo, hi = bootstrap_ci(xs)
    assert lo < xs.mean() < hi
    # close to the normal-theory interval for 30 draws
    half = 1.96 * xs.std(ddof=1) / math.sqrt(len(xs))
    assert lo == pytest.approx(xs.mean() - half, abs=0.15) and hi == pytest.approx(xs.mean() + half, abs=0.15)
    assert bootstrap_ci(xs) == (lo, hi)
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)


def test_three_seed_interval_is_min_to_max() -> None:
    # 10 distinct resamples: the 2.5% / 97.5% quantiles are the extreme differences
    assert bootstrap_ci([1.0, 2.0, 4.0]) == pytest.approx((1.0, 4.0))


@pytest.mark.parametrize(
    ("diffs", "better", "expect"),
    [
        ([1.0, 2.0, 0.5], "higher", "replicates"),
        ([-1.0, -2.0, -0.5], "lower", "replicates"),
        ([-1.0, -2.0, -0.5], "higher", "does not"),
        ([0.0, 0.0, 0.0], "higher", "does not"),  # no gain is not a replication
        ([1.0, -1.0, 2.0], "higher", "inconclusive"),
        ([3.0], "higher", "inconclusive"),  # one seed: no interval
        ([], "higher", "inconclusive"),
    ],
)
def test_verdict_rule(diffs: list[float], better: str, expect: str) -> None:
    assert verdict(diffs, better)[0] == expect


def test_combine() -> None:
    assert combine(["replicates", "replicates"]) == "replicates"
    assert combine(["does not", "does not"]) == "does not"
    assert combine(["replicates", "does not"]) == "inconclusive"
    assert combine(["replicates", "inconclusive"]) == "inconclusive"


def test_mean_sd() -> None:
    s = mean_sd([1.0, 2.0, 3.0])
    assert s == {"mean": 2.0, "sd": 1.0, "n": 3}
    assert math.isnan(mean_sd([5.0])["sd"]) and mean_sd([])["n"] == 0


def _cell(label: str, seed: int, scores: dict[str, float]) -> dict:
    return {
        "study": "tiny-study",
        "recipe_label": label,
        "recipe": f"txl/{label}-tiny",
        "seed": seed,
        "config_hash": f"{label}{seed}".ljust(64, "0"),
        "data_fingerprint": "x",
        "train": {"steps": 6, "resumed_from": None},
        "wall_s": {"train": 10.0, "ppl-joint": 2.0, "total": 12.0},
        "scores": scores,
    }


def _synthetic(out: Path) -> None:
    # position beats none by 2, 3, 4 joint-PPL points on seeds 1, 2 (paired), and has a seed-3
    # cell whose baseline is missing (it must not enter the paired statistics)
    base = {1: 100.0, 2: 110.0}
    for seed, b in base.items():
        scores = {
            "ppl.conditional.word_ppl": b,
            "ppl.joint.word_ppl": b,
            "syntaxgym.conditional.circuit.Agreement": 0.5,
        }
        write_json_atomic(
            out / "cells" / "none" / f"seed-{seed}" / "metrics.json", _cell("none", seed, scores)
        )
    for seed, d in ((1, 2.0), (2, 3.0), (3, 4.0)):
        b = base.get(seed, 120.0)
        scores = {
            "ppl.conditional.word_ppl": b - 20.0,
            "ppl.joint.word_ppl": b - d,
            "syntaxgym.conditional.circuit.Agreement": 0.6,
        }
        write_json_atomic(
            out / "cells" / "position" / f"seed-{seed}" / "metrics.json", _cell("position", seed, scores)
        )


def test_aggregate_pairs_by_seed(tiny_spec: Path, tmp_path: Path) -> None:
    spec = load_spec(tiny_spec, "test")
    spec.seeds = [1, 2, 3]
    _synthetic(tmp_path)
    cells = load_cell_metrics(tmp_path)
    agg = aggregate(cells, spec)
    pos = agg["recipes"]["position"]["scores"]["ppl.joint.word_ppl"]
    assert pos["n"] == 3 and pos["mean"] == pytest.approx((98 + 107 + 116) / 3)
    p = agg["vs_baseline"]["position"]["ppl.joint.word_ppl"]
    assert p["seeds"] == [1, 2] and p["diffs"] == [-2.0, -3.0] and p["mean_diff"] == -2.5
    assert p["ci95"] == pytest.approx([-3.0, -2.0]) and p["verdict"] == "replicates"
    claim = agg["claims"][0]
    assert claim["verdict"] == "replicates" and claim["paper"]["recipe"] == 16.95
    assert claim["show"][0]["metric"] == "ppl.conditional.word_ppl"
    assert agg["cells_finished"] == 5 and agg["cells_planned"] == 6


def test_report_files(tiny_spec: Path, tmp_path: Path) -> None:
    spec = load_spec(tiny_spec, "test")
    _synthetic(tmp_path)
    write_study_report(tmp_path, spec, command="structpe study run tiny-study")
    md = (tmp_path / "study.md").read_text()
    assert "| **ppl** |" in md and "**replicates**" in md
    assert "conditioned on one fixed parse" in md and "structpe study run tiny-study" in md
    assert (tmp_path / "syntaxgym_circuit_conditional.png").stat().st_size > 0
    assert (tmp_path / "ppl_modes.png").stat().st_size > 0
    data = json.loads((tmp_path / "study.json").read_text())
    assert data["claims"][0]["metrics"][0]["diffs"] == [-2.0, -3.0]


def test_report_reads_scores_against_chance(tiny_spec: Path, tmp_path: Path, shared_data: Path) -> None:
    """The chance row: BLiMP 0.5 and SyntaxGym by Monte Carlo on the study's own suites, cached."""
    spec = load_spec(tiny_spec, "test")
    spec.evaluations.syntaxgym = SyntaxGymSpec(suites=["number_prep", "npi_orc_any"])
    _synthetic(tmp_path)
    write_study_report(tmp_path, spec)
    chance = json.loads((tmp_path / "chance.json").read_text())
    assert chance["blimp"] == 0.5 and 0.0 < chance["syntaxgym"] < 1.0
    assert set(chance["syntaxgym_circuits"]) == {"Agreement", "Licensing"}
    md = (tmp_path / "study.md").read_text()
    assert "| *chance* | - |" in md and f"*{chance['syntaxgym']:.3f}*" in md
    assert json.loads((tmp_path / "study.json").read_text())["chance"] == chance
    (tmp_path / "chance.json").write_text(json.dumps({**chance, "syntaxgym": 0.123}))
    write_study_report(tmp_path, spec)  # computed once per study folder: the cached row is reused
    assert "*0.123*" in (tmp_path / "study.md").read_text()
