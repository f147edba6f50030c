"""A parallel worker that stops without finishing its cell (killed, failed) is reported in one line
by the worker that notices, instead of "still running"."""

from __future__ import annotations

from pathlib import Path

import pytest

from structpe.study import runner
from structpe.study.cells import cell_dir, claim
from structpe.study.data import StudyData
from structpe.study.runner import run_study
from structpe.study.spec import load_spec


def test_a_cell_left_by_a_stopped_worker_is_reported(
    tiny_spec: Path, tiny_data: StudyData, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    spec = load_spec(tiny_spec, "test")
    out = tmp_path / "study"
    other = claim(out, "position", 1)  # another worker trains position/seed-1 ...
    assert other.__enter__()
    ran = []

    def fake_run_cell(spec, label, seed, *args, **kwargs) -> Path:
        ran.append(f"{label}/seed-{seed}")
        if (label, seed) == ("none", 2):
            other.__exit__(None, None, None)  # ... and is killed before it finishes
        return cell_dir(out, label, seed)

    monkeypatch.setattr(runner, "run_cell", fake_run_cell)
    run_study(spec, out, data=tiny_data, report=False)
    assert ran == ["none/seed-1", "none/seed-2", "position/seed-2"]
    printed = capsys.readouterr().out
    assert "position/seed-1 stopped unfinished in another worker" in printed
    assert "still running in other workers" not in printed
