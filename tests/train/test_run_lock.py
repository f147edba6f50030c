"""Two processes on one run folder: while one trains (holds ``<run>.lock``), a second ``pretrain``
or ``--resume`` into the same folder is refused in one line and writes nothing there."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from structpe.cli import main


@pytest.mark.data
def test_a_second_run_on_a_busy_run_folder_is_refused(
    gold_dataset: Path, tiny_recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    holder = textwrap.dedent(f"""
        import sys
        from filelock import FileLock
        lock = FileLock({str(run) + ".lock"!r}); lock.acquire()
        print("held", flush=True); sys.stdin.read()
    """)
    first = subprocess.Popen(
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert first.stdout.readline().strip() == "held"
        for resume in ([], ["--resume"]):
            argv = [
                "pretrain",
                "--config",
                str(tiny_recipe),
                f"train.dataset={gold_dataset}",
                f"train.output_dir={run}",
                *resume,
            ]
            assert main(argv) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "is in use by another training process" in err[0], err
        assert not run.exists()  # refused before anything was written
    finally:
        first.stdin.close()
        first.wait(timeout=30)


@pytest.mark.data
def test_the_lock_file_goes_when_the_run_ends(gold_dataset: Path, tiny_recipe: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    argv = ["pretrain", "--config", str(tiny_recipe), f"train.output_dir={run}"]
    assert main([*argv, f"train.dataset={gold_dataset}"]) == 0
    assert (run / "final").is_dir()
    assert not run.with_name("run.lock").exists()
    assert main([*argv, "train.dataset=/nonexistent"]) == 2
    assert not run.with_name("run.lock").exists()  # a refused run leaves none either
