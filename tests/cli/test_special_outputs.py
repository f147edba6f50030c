"""Outputs that are not plain files (docs/reliability.md, "special outputs"): a device, a FIFO or a
link to a process's stdout is written in place, never replaced; a symbolic link is written through
to its target, atomically, and stays a link; ``-`` is stdout; a closed stdout ends quietly.

The system's ``/dev/null`` is only ever written in place here (the test asserts it is still a
character device); every file that could be replaced lives in ``tmp_path``."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from structpe.cli import main
from structpe.io import atomic_write_text

FIXTURES = Path(__file__).parent / "fixtures"
SRC = str(Path(__file__).parents[2] / "src")
TAG = ["tag", str(FIXTURES / "ok.conllu"), "--parser", "gold", "--no-progress"]


def _one_error_line(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0] and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_a_symlink_is_written_through_and_kept(tmp_path: Path) -> None:
    target = tmp_path / "real.jsonl"
    target.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target.name)
    assert main([*TAG, "-o", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text().count("\n") == 2 and "old" not in target.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl", "real.jsonl"]  # no temp left


def test_a_dangling_symlink_gets_its_target_created(tmp_path: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to("made.jsonl")
    assert main([*TAG, "-o", str(link)]) == 0
    assert link.is_symlink() and (tmp_path / "made.jsonl").read_text().count("\n") == 2


def test_a_link_chain_to_another_folder_writes_beside_the_target(tmp_path: Path) -> None:
    (tmp_path / "far").mkdir()
    target = tmp_path / "far" / "t.jsonl"
    target.write_text("old\n")
    (tmp_path / "a").symlink_to(target)
    (tmp_path / "b").symlink_to(tmp_path / "a")
    atomic_write_text(tmp_path / "b", "new\n")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()
    assert target.read_text() == "new\n"
    assert [p.name for p in (tmp_path / "far").iterdir()] == ["t.jsonl"]


def test_a_fifo_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    try:
        assert main([*TAG, "-o", str(fifo)]) == 0
    finally:
        reader.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].decode().count("\n") == 2
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_dev_null_is_written_in_place(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*TAG, "-o", "/dev/null"]) == 0
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    assert capsys.readouterr().out == ""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_dev_full_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main([*TAG, "-o", "/dev/full"]) == 2
    _one_error_line(capsys.readouterr().err, "/dev/full", "No space left")
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)


def test_dash_and_proc_self_fd_1_are_stdout(tmp_path: Path) -> None:
    """``-``, ``/dev/stdout`` and ``/proc/self/fd/1`` all write to the process's stdout (a pipe here)."""
    for out in ("-", "/dev/stdout", "/proc/self/fd/1"):
        if out != "-" and not os.path.exists(out):
            continue
        proc = subprocess.run(
            [sys.executable, "-m", "structpe.cli", *TAG, "-o", out],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("\n") == 2, (out, proc.stdout)


def test_a_closed_stdout_ends_quietly(tmp_path: Path) -> None:
    """``structpe tag ... | head -0``: the reader is gone before the write; no traceback."""
    big = tmp_path / "big.conllu"
    big.write_text((FIXTURES / "ok.conllu").read_text() * 2000)
    for out in ("-", "/dev/stdout"):
        proc = subprocess.Popen(
            [sys.executable, "-m", "structpe.cli", "tag", str(big), "--parser", "gold", "--no-progress",
             "-o", out],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": SRC},
        )
        proc.stdout.read(10)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(60) == 141, err
        assert "Traceback" not in err and "error" not in err, err


def test_dash_for_a_folder_output_is_one_line(tmp_path: Path, tiny_model: Path, cli_fails) -> None:  # noqa: ANN001
    conllu = str(FIXTURES / "ok.conllu")
    cli_fails(["tokenizer", "train", conllu, "-o", "-"], "-o/--output -", "a folder, not a stream")
    cli_fails(["eval", "ppl", "--model", str(tiny_model), "--data", str(FIXTURES / "ok.jsonl"), "--out", "-"],
              "--out -", "a folder")
    cli_fails(["prepare", "--train", conllu, "--validation", conllu, "--tokenizer", str(tiny_model),
               "--parser", "gold", "-o", "-"], "--output -", "a folder")
    # the other commands that write a folder, refused before any work starts
    cli_fails(["quickstart", "--out", "-"], "--out -", "a folder")
    cli_fails(["lis", "shakespeare", "--out", "-"], "--out -", "a folder")
    cli_fails(["parser", "train", "--config", "bilstm", "--output", "-"], "--output -", "a folder")
    cli_fails(["parser", "export", "--model", str(tiny_model), "--command", "x", "--output", "-"],
              "--output -", "a folder")
    assert not Path("-").exists()
