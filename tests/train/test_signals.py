"""Signals during a run (docs/reliability.md, "signals"): SIGTERM is handled like Ctrl-C (temporary
files removed, worker processes stopped, exit status 128 + the signal's number); a rebuild of an
earlier output (``prepare --force``) builds beside it and swaps at the end, so SIGINT, SIGTERM or
SIGKILL at any moment leave the earlier output loadable. Real processes, real signals, tiny inputs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from structpe.io import output_folder, replace_folder
from structpe.train.prepare import load_prepared

SRC = str(Path(__file__).parents[2] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}


def _default_sigint() -> None:
    """In the child before exec: Ctrl-C at its default, so that Python answers it with
    KeyboardInterrupt. A test run started in the background by a shell without job control (``cmd
    &``, nohup) inherits SIGINT ignored, and so would the command, which then rightly ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _structpe(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "structpe.cli", *args], cwd=cwd, env=ENV,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_default_sigint,
    )


def _wait_for(what, timeout: float = 60.0) -> None:  # noqa: ANN001 (a zero-argument predicate)
    end = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def _prepare_args(ewt: dict[str, Path], tok: Path, out: Path) -> list[str]:
    return ["prepare", "--train", str(ewt["train"]), "--validation", str(ewt["validation"]),
            "--tokenizer", str(tok), "--parser", "gold", "--seq-len", "64", "-o", str(out), "--force"]


# SIGINT takes the same path as SIGTERM (KeyboardInterrupt; see the tag test below for both)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_during_a_rebuild_keeps_the_earlier_dataset(
    sig: signal.Signals, gold_dataset: Path, ewt_slices: dict[str, Path], bpe_tokenizer: Path, tmp_path: Path
) -> None:
    import shutil

    out = tmp_path / "prep"
    shutil.copytree(gold_dataset, out)
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = _structpe(*_prepare_args(ewt_slices, bpe_tokenizer, out), cwd=tmp_path)
    # the rebuild has begun once its staging folder exists beside the output
    staging = lambda: any(p.name.startswith(".prepare-") for p in tmp_path.iterdir())  # noqa: E731
    _wait_for(lambda: staging() or proc.poll() is not None)
    proc.send_signal(sig)
    rc = proc.wait(30)
    err = proc.stderr.read().decode()
    assert rc == (-9 if sig == signal.SIGKILL else 128 + sig), err
    assert "Traceback" not in err, err
    load_prepared(out)  # the earlier dataset, whole
    if sig != signal.SIGKILL:  # a handled signal also removes the staging folder
        assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_replace_folder_swaps_by_renames(tmp_path: Path) -> None:
    out, staged = tmp_path / "out", tmp_path / ".staged"
    out.mkdir()
    (out / "a").write_text("old")
    staged.mkdir()
    (staged / "a").write_text("new")
    replace_folder(staged, out)
    assert (out / "a").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_prepare_into_a_symlinked_folder_keeps_the_link(
    gold_dataset: Path, ewt_slices: dict[str, Path], bpe_tokenizer: Path, tmp_path: Path
) -> None:
    from structpe.cli import main

    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    assert main(_prepare_args(ewt_slices, bpe_tokenizer, link)) == 0
    assert link.is_symlink() and load_prepared(link)[1]["fingerprint"]
    assert output_folder(link, "-o") == real.resolve()
    with pytest.raises(ValueError, match="not a stream"):
        output_folder("-", "-o")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_tag_workers_stop_at_once_and_leave_no_orphans(sig: signal.Signals, tmp_path: Path) -> None:
    """Ctrl-C reaches the whole process group, SIGTERM only the parent: either way the command ends
    within seconds, exit 128 + n, with no worker left and no output or temporary file written."""
    src = tmp_path / "in.txt"
    # thousands of chunks: the job still runs when the signal comes, and the signal can land while
    # chunks are handed to the pool (a submit interrupted with its queue's lock taken hung the exit)
    src.write_text("".join(f"The dog number {i} saw a cat in the garden.\n" for i in range(50_000)))
    out = tmp_path / "out.jsonl"
    proc = _structpe("tag", str(src), "--parser", "spacy", "--workers", "2", "--batch-size", "10",
                     "-o", str(out), "--no-progress", cwd=tmp_path)
    parent = psutil.Process(proc.pid)
    _wait_for(lambda: len(parent.children()) >= 2 or proc.poll() is not None)
    workers = parent.children(recursive=True)
    assert workers, proc.stderr.read().decode()
    time.sleep(0.5)
    assert proc.poll() is None, "the job ended before the signal: give it more text"
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    t0 = time.monotonic()
    rc = proc.wait(20)
    err = proc.stderr.read().decode()
    assert rc == 128 + sig, err
    assert time.monotonic() - t0 < 10
    assert "Traceback" not in err, err
    gone, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive, alive
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_tag_worker_count_is_capped_by_chunks_and_cores() -> None:
    from structpe.parser.tagging import worker_count

    assert worker_count(48, 2) == min(2, len(os.sched_getaffinity(0)))
    assert worker_count(48, 1000) == len(os.sched_getaffinity(0))
    assert worker_count(3, 0) == 1


def test_the_studys_merged_data_is_rebuilt_beside(gold_dataset: Path, tmp_path: Path) -> None:
    import json

    from structpe.study.data import merge_prepared
    from structpe.train.prepare_settings import METADATA_FILE

    dest = merge_prepared(gold_dataset, gold_dataset, tmp_path / "merged")
    meta_file = dest / METADATA_FILE
    key = json.loads(meta_file.read_text())["fingerprint"]
    meta_file.write_text(json.dumps({**json.loads(meta_file.read_text()), "fingerprint": "stale"}))
    merge_prepared(gold_dataset, gold_dataset, dest)  # a rebuild: staged beside, then swapped
    assert load_prepared(dest)[1]["fingerprint"] == key
    assert [p.name for p in tmp_path.iterdir()] == ["merged"]
