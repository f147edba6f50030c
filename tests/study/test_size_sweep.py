"""The size sweep (``structpe.study.sweep``) at smoke scale: calibrate, train each size for the same
CPU budget, evaluate, resume without retraining; bad sizes are one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from structpe.study import sweep
from structpe.study.data import StudyData
from structpe.study.spec import load_spec
from structpe.study.spec_checks import StudySpecError


def test_size_overrides() -> None:
    assert sweep.size_overrides("6x384") == [
        "model.n_layers=6",
        "model.d_model=384",
        "model.n_heads=6",
        "model.d_ff=1536",
    ]
    assert "model.n_heads=2" in sweep.size_overrides("2x64")
    for bad in ("6x100", "x384", "0x256", "6*384"):
        with pytest.raises(StudySpecError, match="LAYERSxWIDTH"):
            sweep.size_overrides(bad)


def test_sweep_trains_each_size_for_the_same_budget_and_resumes(
    tiny_spec: Path, tiny_data: StudyData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(tiny_spec, "test")
    # the budget buys 1 step on a slow or loaded CPU: no warm-up, so any step count is a valid run
    next(r for r in spec.recipes if r.label == spec.baseline).overrides.append("train.warmup=0")
    out = tmp_path / "sweep"
    result = sweep.size_sweep(spec, ["1x64", "2x64"], 1.5, out, calibrate_steps=2, data=tiny_data)
    cal = json.loads((out / "calibration.json").read_text())
    rows = {r["size"]: r for r in result["sizes"]}
    assert list(rows) == ["1x64", "2x64"]
    for size, r in rows.items():
        assert r["steps"] == max(1, int(1.5 / cal[size])) and r["cpu_s_per_step"] == round(cal[size], 4)
        assert r["tokens_seen"] == r["steps"] * 4 * 64  # the tiny profile's batch 4 x 64
        assert r["dev_loss"] > 0 and r["syntaxgym"] is None and r["blimp"] is None  # ppl-only spec
    assert rows["2x64"]["parameters"] > rows["1x64"]["parameters"]
    assert json.loads((out / "sweep.json").read_text()) == result
    cfg = json.loads((out / "study/cells/none-2x64/seed-1/run/final/config.json").read_text())
    assert cfg["n_layers"] == 2 and cfg["d_model"] == 64 and cfg["injection"] == "none"

    # a second run: nothing is calibrated or trained again, the table is the same
    monkeypatch.setattr(sweep, "calibrate", lambda *a, **k: pytest.fail("calibrated again"))
    import structpe.train.pretrain as pretrain_mod

    monkeypatch.setattr(pretrain_mod, "pretrain", lambda *a, **k: pytest.fail("trained again"))
    again = sweep.size_sweep(spec, ["1x64", "2x64"], 1.5, out, calibrate_steps=2, data=tiny_data)
    assert again["sizes"] == result["sizes"]


def test_a_second_worker_reports_the_sizes_it_did_not_train(
    tiny_spec: Path, tiny_data: StudyData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers share the sweep's cells: one that finds a size claimed by the other lists it as
    pending and leaves sweep.json to the worker that finishes last."""
    import contextlib

    import structpe.study.runner as runner

    spec = load_spec(tiny_spec, "test")
    next(r for r in spec.recipes if r.label == spec.baseline).overrides.append("train.warmup=0")
    out = tmp_path / "sweep"
    real_claim = runner.claim

    @contextlib.contextmanager
    def busy_2x64(folder, label, seed):
        if label == "none-2x64":  # held by the other worker
            yield False
        else:
            with real_claim(folder, label, seed) as mine:
                yield mine

    monkeypatch.setattr(runner, "claim", busy_2x64)
    first = sweep.size_sweep(spec, ["1x64", "2x64"], 1.5, out, calibrate_steps=2, data=tiny_data)
    assert [r["size"] for r in first["sizes"]] == ["1x64"] and first["pending"] == ["2x64"]
    assert not (out / "sweep.json").exists()
    monkeypatch.setattr(runner, "claim", real_claim)
    last = sweep.size_sweep(spec, ["1x64", "2x64"], 1.5, out, calibrate_steps=2, data=tiny_data)
    assert [r["size"] for r in last["sizes"]] == ["1x64", "2x64"] and "pending" not in last
    assert json.loads((out / "sweep.json").read_text()) == last

