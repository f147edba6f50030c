"""Bad input never crashes structpe or loses data.

Every case runs one command on a malformed input (the small files in ``fixtures/``, plus corrupt
gzip files and fake model folders made here) and checks the error boundary of ``structpe.cli``:
exit status 2, exactly one line on stderr naming the file / line / option / value, no traceback,
and every file that existed before the command (earlier outputs, the inputs) byte for byte intact,
with no temporary files left behind.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from structpe.cli import main

FIXTURES = Path(__file__).parent / "fixtures"


def _cases() -> list[tuple[str, str, list[str]]]:
    """(case id, command line, expected substrings) from fixtures/cases.txt."""
    out = []
    for line in (FIXTURES / "cases.txt").read_text().split("\n"):
        if line.strip() and not line.startswith("#"):
            cid, argv, expected = (part.strip() for part in line.split(" | "))
            out.append((cid, argv, [e.strip() for e in expected.split(";")]))
    return out


CASES = _cases()


@pytest.fixture
def workspace(tmp_path: Path) -> dict[str, Path]:
    """Scratch inputs made at run time (binary or derived files) and earlier outputs to protect."""
    ok = (FIXTURES / "ok.conllu").read_bytes()
    (tmp_path / "truncated.conllu.gz").write_bytes(gzip.compress(ok * 50)[:-40])
    (tmp_path / "corrupt.txt.gz").write_bytes(b"\x1f\x8b" + b"not gzip at all" * 4)
    jsonl = (FIXTURES / "ok.jsonl").read_bytes()
    (tmp_path / "truncated.jsonl.gz").write_bytes(gzip.compress(jsonl * 50)[:-30])
    (tmp_path / "input.conllu").write_bytes(ok)
    hexa = tmp_path / "bad_hexatagger"
    hexa.mkdir()
    (hexa / "config.json").write_text('{"vocab_size": 10, "d_model": 8, "n_heads": 2}')
    (hexa / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}garbage")
    model = tmp_path / "fake_model"
    model.mkdir()
    (model / "config.json").write_text("{ not json")
    blimp = tmp_path / "blimp"
    blimp.mkdir()
    row = b'{"sentence_good": "a b.", "sentence_bad": "b a.", "field": "syntax", "linguistics_term": "x", '
    row += b'"UID": "anaphor_agreement", "pairID": "0"}\n'
    (blimp / "anaphor_agreement.jsonl.gz").write_bytes(gzip.compress(row))
    (tmp_path / "sg" / "suites").mkdir(parents=True)
    (tmp_path / "sg" / "suites" / "mvrr_mod.json").write_text("{}")
    prior = tmp_path / "prior.jsonl"
    prior.write_text("an earlier output that must survive\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text('{"config": {}, "models": {"earlier": {}}}\n')
    (out / "tokenizer.json").write_text('{"an earlier": "tokenizer"}\n')
    return {"tmp": tmp_path, "prior": prior, "out": out, "model": model}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line(
    argv: str, expected: list[str], workspace: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = argv.format(fx=FIXTURES, **{k: str(v) for k, v in workspace.items()}).split()
    before = _snapshot(workspace["tmp"])
    fixtures_before = _snapshot(FIXTURES)
    rc = main(args)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("structpe ") and ": error: " in lines[0], err
    assert "Traceback" not in err
    for needle in expected:
        assert needle in lines[0], (needle, lines[0])
    assert _snapshot(workspace["tmp"]) == before  # earlier outputs intact, no temporary files left
    assert _snapshot(FIXTURES) == fixtures_before


def test_debug_shows_the_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["tag", str(FIXTURES / "eleven_columns.conllu")]
    assert main([*argv, "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("structpe tag: error:")
    monkeypatch.setenv("STRUCTPE_DEBUG", "1")
    assert main(argv) == 2
    assert "Traceback" in capsys.readouterr().err


def test_closed_stdout_pipe_exits_quietly(tmp_path: Path) -> None:
    big = tmp_path / "big.conllu"
    big.write_bytes((FIXTURES / "ok.conllu").read_bytes() * 3000)  # ~0.5 MB of JSON lines out
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    p = subprocess.run(
        f"set -o pipefail; {sys.executable} -m structpe.cli tag {big} --no-progress | head -1",
        shell=True, executable="/bin/bash", capture_output=True, text=True, env=env, timeout=300,
    )
    assert p.stdout.startswith('{"sent_id": "ok-1"') and len(p.stdout.splitlines()) == 1
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
    assert p.returncode == 141  # like a tool killed by SIGPIPE


def test_text_lines_split_at_newlines_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """U+2028 and U+0085 inside a line are text: sent_ids stay the input's line numbers."""
    from structpe.io import split_lines

    text = (FIXTURES / "unicode_separators.txt").read_text(encoding="utf-8")
    assert len(text.splitlines()) == 4  # what str.splitlines would have made of it
    assert [len(x) for x in split_lines(text)] == [len(x) for x in text.split("\n")[:2]]
    assert split_lines("a\r\nb\n\nc") == ["a", "b", "", "c"]


def test_tag_keeps_the_old_output_when_it_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tags.jsonl"
    assert main(["tag", str(FIXTURES / "ok.conllu"), "-o", str(out), "--no-progress"]) == 0
    good = out.read_bytes()
    assert len(good.splitlines()) == 2
    mixed = tmp_path / "mixed.conllu"
    mixed.write_bytes(b"".join((FIXTURES / f).read_bytes() for f in ("ok.conllu", "nonprojective.conllu")))
    capsys.readouterr()
    assert main(["tag", str(mixed), "-o", str(out), "--nonprojective", "error", "--no-progress"]) == 2
    assert out.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mixed.conllu", "tags.jsonl"]  # no temporary file
