"""The methods page (structpe study methods) on a synthetic pair of study folders: every planned
method is a row (missing cells say so), means with their 95% t intervals, paired differences to
the baseline, step costs, parameters, and the published rows beside them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy import stats

from structpe.study.cells import StudyError
from structpe.study.methods import step_costs, write_methods

SG, BLIMP, PPL = "syntaxgym.smc.sg_score", "blimp.smc.overall", "ppl.smc.word_ppl"


def _folder(root: Path, profile: str, values: dict[str, list[tuple[float, float, float, float]]]) -> Path:
    """A study folder: spec.json naming the shipped sipe-txl spec at ``profile``, and per recipe
    and seed a metrics.json with (SG, BLiMP, PPL, train seconds per step)."""
    folder = root / profile
    labels = sorted(values)
    saved = {"source": "sipe-txl", "profile": profile, "recipes": labels, "seeds": [1, 2, 3],
             "command": "structpe study run sipe-txl", "spec": {"name": "sipe-txl"}}
    folder.mkdir(parents=True)
    (folder / "spec.json").write_text(json.dumps(saved))
    for label, rows in values.items():
        for seed, (sg, blimp, ppl, per_step) in enumerate(rows, 1):
            cell = folder / "cells" / label / f"seed-{seed}"
            cell.mkdir(parents=True)
            train = {"steps": 100, "train_wall_s": 100 * per_step, "parameters": 1000 + len(label)}
            metrics = {"recipe_label": label, "seed": seed, "scores": {SG: sg, BLIMP: blimp, PPL: ppl},
                       "train": train, "provenance": {"hardware": {"cpu": "Test CPU", "cpu_count": 2}}}
            (cell / "metrics.json").write_text(json.dumps(metrics))
    return folder


def _interval(xs: list[float]) -> tuple[float, float, float]:
    m, sd, n = sum(xs) / len(xs), stats.tstd(xs), len(xs)
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return m, m - half, m + half


def test_methods_page_on_two_synthetic_profiles(tmp_path: Path) -> None:
    mini = _folder(tmp_path, "cpu-mini", {
        "none": [(0.20, 0.55, 1000, 0.2), (0.24, 0.56, 1010, 0.2), (0.22, 0.57, 990, 0.2)],
        "position": [(0.30, 0.54, 2000, 0.4), (0.28, 0.55, 2100, 0.3), (0.33, 0.56, 2200, 0.4)],
        "gpt2": [(0.21, 0.52, 1100, 0.1), (0.23, 0.53, 1090, 0.1), (0.20, 0.51, 1080, 0.1)],
    })
    quick = _folder(tmp_path, "quickstart", {"none": [(0.3, 0.6, 600, 0.5)]})
    page = write_methods([mini, quick], tmp_path / "methods.md").read_text()
    mini_part, quick_part = page.split("## quickstart")
    # the SG column of `none` at cpu-mini: mean and 95% t interval over its 3 seeds, in percent
    m, lo, hi = _interval([20.0, 24.0, 22.0])
    assert f"| `none` (txl/none) | no | {m:.1f} [{lo:.1f}, {hi:.1f}] (3) | (baseline) |" in mini_part
    # position reads tags: its PPL is a bound; its SG against none is the paired difference
    d_m, d_lo, d_hi = _interval([10.0, 4.0, 11.0])
    pos = next(ln for ln in mini_part.splitlines() if ln.startswith("| `position`"))
    assert "| yes |" in pos and f"{d_m:+.1f} [{d_lo:+.1f}, {d_hi:+.1f}] (3)" in pos and "| ~ 2100 [" in pos
    # step cost: seconds per step over the same seed's `none` (2, 1.5, 2) and gpt2's (0.5 each: no spread)
    c_m, c_lo, c_hi = _interval([2.0, 1.5, 2.0])
    assert f"{c_m:.2f} [{c_lo:.2f}, {c_hi:.2f}] (3)" in pos
    g = next(ln for ln in mini_part.splitlines() if ln.startswith("| `gpt2`"))
    assert "| no |" in g and "| 1,004 |" in g and "| 0.50 [0.50, 0.50] (3) |" in g
    # a planned recipe with no cells is a row that says so, with the recipe's parameter count
    tpt = next(ln for ln in mini_part.splitlines() if ln.startswith("| `tpt`"))
    assert "no finished cells" in tpt and "1,171,584 (recipe)" in tpt and "0 of 5" in tpt
    assert "| `input` (txl/input) | yes | no finished cells" in mini_part
    # quickstart plans none, position and the rivals; one seed of none: no interval
    assert "| `none` (txl/none) | no | 30.0 (1 seed) |" in quick_part
    assert "| `treereg` (txl/treereg) | no | no finished cells" in quick_part
    # the published rows, marked as such
    assert "## Published numbers on other data" in page and "| RNNG | 48 | 55 |" in page
    assert "| TreeReg (GPT-2) | 74.80 | 22.30 | 80.00 |" in page
    assert "| TPT [dep.] | - | 47.70 | 77.10 |" in page


def test_methods_page_refuses_mixed_or_repeated_profiles(tmp_path: Path) -> None:
    a = _folder(tmp_path / "a", "cpu-mini", {"none": [(0.2, 0.5, 900, 0.2)]})
    b = _folder(tmp_path / "b", "cpu-mini", {"none": [(0.2, 0.5, 900, 0.2)]})
    with pytest.raises(StudyError, match="same profile"):
        write_methods([a, b], tmp_path / "m.md")
    with pytest.raises(StudyError, match=r"\.md"):
        write_methods([a], tmp_path / "m.txt")


def test_methods_command_answers_a_bad_folder_with_one_line(tmp_path: Path, capsys) -> None:
    from structpe.cli import main

    assert main(["study", "methods", str(tmp_path / "nowhere"), "--output", str(tmp_path / "m.md")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nowhere" in err[0]


def test_step_cost_divides_by_the_baseline_on_the_same_machine() -> None:
    # seed 1: the recipe ran on CPU B, the baseline's primary cell on CPU A (twice as fast per
    # step there) and a re-run on CPU B: the cost is against the re-run; seed 2 has no same-machine
    # baseline and is left out
    def cell(label: str, seed: int, cpu: str, wall: float) -> dict:
        hw = {"cpu": cpu, "cpu_count": 2}
        return {"recipe_label": label, "seed": seed, "precision": "fp32", "provenance": {"hardware": hw},
                "train": {"train_wall_s": wall, "steps": 100}, "scores": {}}

    cells = [cell("none", 1, "A", 50.0), cell("tree", 1, "B", 120.0), cell("none", 2, "A", 50.0),
             cell("tree", 2, "B", 130.0)]
    assert step_costs(cells, "tree", "none") == []
    assert step_costs(cells, "tree", "none", [cell("none", 1, "B", 100.0)]) == [1.2]
    same = [cell("tree", 3, "A", 60.0), cell("none", 3, "A", 50.0)]
    assert step_costs([*cells, *same], "tree", "none") == [1.2]
    # a cell resumed from a checkpoint (its wall time spans sittings and pauses) is left out
    resumed = cell("tree", 3, "A", 600.0)
    resumed["train"]["resumed_from"] = "run/checkpoint-50"
    assert step_costs([*cells, resumed, cell("none", 3, "A", 50.0)], "tree", "none") == []
    # CPU seconds, where both cells record them, are the cost, resumed or not (a pause adds none)
    resumed["train"]["train_cpu_s"] = 90.0
    base = cell("none", 3, "A", 50.0)
    assert step_costs([*cells, resumed, base], "tree", "none") == []  # the baseline has no CPU clock
    base["train"]["train_cpu_s"] = 45.0
    assert step_costs([*cells, resumed, base], "tree", "none") == [2.0]
