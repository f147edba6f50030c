"""`structpe study run --dry-run` on a folder the study ran in: each cell's state read from its
files (finished, trained with some evaluations done, checkpointed mid-training, held by a live
worker, not started; finished under other settings, with or without its model) and the time left at
the finished cells' medians (synthetic folder, no training)."""

from __future__ import annotations

from pathlib import Path

import pytest
from filelock import FileLock

from structpe.cli import main
from structpe.io import write_json_atomic
from structpe.study.data import is_prepared
from structpe.study.progress import cell_state, finished_walls, seconds_left


def _finished(out: Path, label: str, seed: int, wall: dict[str, float], config_hash: str = "h1") -> None:
    d = out / "cells" / label / f"seed-{seed}"
    metrics = {"recipe_label": label, "seed": seed, "config_hash": config_hash, "wall_s": wall, "scores": {}}
    write_json_atomic(d / "metrics.json", metrics)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """none/seed-1 and position/seed-1 finished; none/seed-2 trained with its conditional perplexity
    done; position/seed-2 checkpointed at step 3 of 6 and held by a worker."""
    out = tmp_path / "run"
    _finished(out, "none", 1, {"train": 100.0, "ppl-conditional": 4.0, "ppl-joint": 6.0, "total": 110.0})
    _finished(
        out, "position", 1, {"train": 200.0, "ppl-conditional": 10.0, "ppl-joint": 30.0, "total": 240.0}
    )
    none2 = out / "cells" / "none" / "seed-2"
    write_json_atomic(none2 / "run" / "summary.json", {"train_wall_s": 99.0})
    write_json_atomic(none2 / "evals" / "ppl-conditional.json", {"word_ppl": 1.0})
    pos2 = out / "cells" / "position" / "seed-2" / "run"
    (pos2 / "checkpoint-3").mkdir(parents=True)
    (pos2 / "config.yaml").write_text("train:\n  max_steps: 6\n")
    return out


def test_cell_states_and_time_left_come_from_the_files(folder: Path) -> None:
    lock = FileLock(folder / "cells" / "position" / "seed-2.lock", timeout=0)
    lock.acquire()  # another open file description: held, as by another worker
    try:
        states = {f"{lab}/{s}": cell_state(folder, lab, s) for lab in ("none", "position") for s in (1, 2)}
    finally:
        lock.release()
    assert {k: (v.stage, v.running) for k, v in states.items()} == {
        "none/1": ("finished", False),
        "none/2": ("evaluating", False),
        "position/1": ("finished", False),
        "position/2": ("training", True),
    }
    assert (states["position/2"].step, states["position/2"].max_steps) == (3, 6)
    medians = finished_walls(folder)
    # none/2 still needs its joint perplexity; position/2 half its training and both evaluations
    assert seconds_left(states["none/2"], medians["none"]) == pytest.approx(6.0)
    assert seconds_left(states["position/2"], medians["position"]) == pytest.approx(100.0 + 40.0)
    assert seconds_left(states["position/2"], None) is None


def test_dry_run_prints_the_cells_then_where_the_folder_stands(
    tiny_spec: Path, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["study", "run", str(tiny_spec), "--dry-run", "-o", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in lines[:4]] == [
        "none/seed-1",
        "position/seed-1",
        "none/seed-2",
        "position/seed-2",
    ]
    assert lines[4] == f"state of {folder}: 2 finished, 1 training, 1 evaluating of 4 planned cells"
    assert "  none/seed-2: stopped (trained, 1 evaluations done), ~0.0 h left" in lines
    assert "  position/seed-2: stopped (training, step 3 of 6 checkpointed), ~0.0 h left" in lines
    assert lines[-1].startswith("time left for 2 of the 2 unfinished cells: ~0.0 h for one worker")
    assert not list(folder.rglob("*.lock"))  # a dry run creates nothing


def test_a_recipe_without_a_finished_cell_is_named_not_projected(
    tiny_spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    _finished(out, "none", 1, {"train": 3600.0, "total": 7200.0})
    assert main(["study", "run", str(tiny_spec), "--dry-run", "-o", str(out)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("time left for 1 of the 3 unfinished cells: ~2.0 h for one worker, ~1.0 h with 2")
    assert last.endswith("not projected, no finished cell here: position")


def test_a_cell_finished_under_other_settings_is_stale(folder: Path) -> None:
    """A metrics.json whose configuration hash is not the spec's now: the cell runs again, its
    evaluations only while its model is there, training too where the folder lost it (a metrics.json
    copied in from a committed study folder)."""
    assert cell_state(folder, "none", 1, "h1").stage == "finished"
    gone = cell_state(folder, "none", 1, "h2")
    assert (gone.stage, gone.trained) == ("stale", False)
    run = folder / "cells" / "none" / "seed-1" / "run"
    write_json_atomic(run / "summary.json", {"train_wall_s": 99.0})
    write_json_atomic(run / "final" / "config.json", {})
    kept = cell_state(folder, "none", 1, "h2")
    assert (kept.stage, kept.trained) == ("stale", True)
    medians = finished_walls(folder)["none"]
    assert seconds_left(kept, medians) == pytest.approx(10.0)  # at most every evaluation again
    assert seconds_left(gone, medians) == pytest.approx(110.0)  # training and every evaluation


def test_a_dry_run_says_when_it_cannot_check_the_finished_cells(
    tiny_spec: Path, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hashes cover the prepared data; a folder without it (here: never prepared) gets its
    finished cells named unchecked, and the dry run prepares nothing."""
    assert not is_prepared(folder / "data")
    assert main(["study", "run", str(tiny_spec), "--dry-run", "-o", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "the finished cells are not checked against the spec's settings now" in out
    assert not (folder / "data").exists()


def test_prepared_means_the_tokenizer_and_every_merged_dataset(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / "tokenizer" / "tokenizer.json", {})
    write_json_atomic(tmp_path / "merged" / "structpe_prepare.json", {})
    assert is_prepared(tmp_path) and not is_prepared(tmp_path, ("shuffled",))
    write_json_atomic(tmp_path / "merged-shuffled" / "structpe_prepare.json", {})
    assert is_prepared(tmp_path, ("shuffled",))
