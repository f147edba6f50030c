"""scripts/lis_shakespeare_deciding.sh: the eight Shakespeare runs and their merges, driven through a
recording stand-in for the `structpe` command (the real runs are a GPU job; docs/lis.md)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "lis_shakespeare_deciding.sh"

# a stand-in `structpe`: logs its arguments and writes results.json into --out, except for the
# run named in $FAIL
FAKE = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
out=""; prev=""
for a in "$@"; do [[ $prev == --out ]] && out=$a; prev=$a; done
[[ -n ${FAIL:-} && $out == */$FAIL ]] && exit 1
mkdir -p "$out" && echo {} > "$out/results.json"
"""


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "fake-structpe"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    full = {**os.environ, "STRUCTPE": str(fake), "CALLS": str(tmp_path / "calls.txt"), **env}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "data" / "tinyshakespeare").mkdir(parents=True)
    return tmp_path / "data"


def test_eight_runs_then_three_merges(tmp_path: Path, data: Path) -> None:
    res = _run(tmp_path, str(tmp_path / "out"), str(data), DEVICE="cuda", PROFILE="paper")
    assert res.returncode == 0, res.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    runs = [c for c in calls if "--merge" not in c]
    assert len(runs) == 8
    assert all("--profile paper --device cuda" in c and "--threads 1" in c for c in runs)
    wanted = {("lis", "0.1", "0"), ("lis", "0.1", "1"), ("lis", "0.2", "0"), ("lis", "0.2", "1")}
    wanted |= {("lis", "0.0", "0"), ("lis", "0.0", "1"), ("alibi", "0.0", "0"), ("random", "0.0", "0")}
    got = set()
    for c in runs:
        words = c.split()
        got.add(tuple(words[words.index(k) + 1] for k in ("--models", "--dropout", "--seed")))
    assert got == wanted
    merges = [c for c in calls if "--merge" in c]
    assert len(merges) == 3
    assert merges[2].count("/runs/") == 4  # the curves: LISformer x 2, ALiBi, random


def test_a_failed_run_stops_before_the_merges(tmp_path: Path, data: Path) -> None:
    res = _run(tmp_path, str(tmp_path / "out"), str(data), FAIL="alibi_s0")
    assert res.returncode == 1
    assert "run alibi_s0 did not finish" in res.stderr
    assert "--merge" not in (tmp_path / "calls.txt").read_text()


def test_bad_arguments_exit_2_with_one_line(tmp_path: Path) -> None:
    res = _run(tmp_path)
    assert res.returncode == 2 and res.stderr.startswith("usage:")
    res = _run(tmp_path, str(tmp_path / "out"), str(tmp_path / "nowhere"))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "no tinyshakespeare/" in res.stderr
    assert not (tmp_path / "out").exists()
