"""One vocabulary of text inputs (structpe.text_formats): the same names in tag, prepare and eval,
defaults by extension; a name outside the vocabulary is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from structpe import text_formats
from structpe.cli import main
from structpe.errors import StructpeError


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.conllu", "conllu"), ("a.conllu.gz", "conllu"), ("a.conll", "conllu"), ("b.jsonl", "jsonl"),
     ("b.JSONL.gz", "jsonl"), ("c.txt", "raw-lines"), ("c.txt.gz", "raw-lines"), ("noext", "raw-lines")],
)
def test_defaults_by_extension(name: str, fmt: str) -> None:
    assert text_formats.format_by_extension(name) == fmt


def test_names_are_one_vocabulary(capsys: pytest.CaptureFixture[str]) -> None:
    formats = text_formats.INPUT_FORMATS
    assert text_formats.resolve("prepare", "raw-text", "x.txt", formats) == "raw-text"
    with pytest.raises(StructpeError, match=r"--input-format lines: structpe prepare reads raw-lines"):
        text_formats.resolve("prepare", "lines", "x.txt", formats)
    assert capsys.readouterr().err == ""
    with pytest.raises(StructpeError, match=r"by the extension of x.jsonl\): structpe eval ppl reads"):
        text_formats.resolve("eval ppl", None, "x.jsonl", ("raw-lines", "raw-text"))


@pytest.fixture
def texts(tmp_path: Path) -> dict[str, Path]:
    files = {
        "raw-lines": "She watches funny videos.\nThe dog runs.\n",
        "raw-text": "She watches funny\nvideos.\n\nThe dog runs.\n",
        "tokenized-lines": "She watches funny videos .\nThe dog runs .\n",
    }
    out = {}
    for fmt, text in files.items():
        out[fmt] = tmp_path / f"{fmt}.txt"
        out[fmt].write_text(text, encoding="utf-8")
    return out


def test_tag_reads_every_text_format(texts: dict[str, Path], tmp_path: Path, capsys) -> None:
    pytest.importorskip("spacy")
    words = [["She", "watches", "funny", "videos", "."], ["The", "dog", "runs", "."]]
    for fmt, path in texts.items():
        out = tmp_path / f"{fmt}.jsonl"
        assert main(["tag", "--no-progress", "--input-format", fmt, str(path), "-o", str(out)]) == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["words"] for r in rows] == words, fmt
    # jsonl (the output of tag) by its extension: its words are re-parsed
    again = tmp_path / "again.jsonl"
    assert main(["tag", "--no-progress", str(tmp_path / "raw-lines.jsonl"), "-o", str(again)]) == 0
    assert [json.loads(line)["words"] for line in again.read_text().splitlines()] == words
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:  # argparse: the old name is not a choice; it lists the names
        main(["tag", "--no-progress", "--input-format", "text", str(texts["raw-lines"])])
    assert exit_.value.code == 2 and "'raw-lines'" in capsys.readouterr().err


def test_tag_refuses_bad_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"words": []}\n')
    assert main(["tag", "--no-progress", str(bad)]) == 2
    assert "bad.jsonl:1: 'words' must be a non-empty list" in capsys.readouterr().err


def test_prepare_reads_raw_lines(texts: dict[str, Path], tmp_path: Path, capsys) -> None:
    pytest.importorskip("spacy")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("She watches funny videos.\nThe dog runs to the park.\n" * 20, encoding="utf-8")
    tok = tmp_path / "tok"
    assert main(["tokenizer", "train", str(corpus), "-o", str(tok), "--vocab-size", "120"]) == 0
    common = ["prepare", "--train", str(corpus), "--validation", str(corpus), "--tokenizer", str(tok),
              "--seq-len", "32"]
    assert main([*common, "-o", str(tmp_path / "d1")]) == 0  # .txt: raw-lines by default
    meta = json.loads((tmp_path / "d1" / "structpe_prepare.json").read_text())
    assert meta["settings"]["input_format"] == "raw-lines" and meta["stats"]["train"]["sequences"] > 0
    assert main([*common, "--input-format", "tokenized-lines", "-o", str(tmp_path / "d2")]) == 0
    meta = json.loads((tmp_path / "d2" / "structpe_prepare.json").read_text())
    assert meta["settings"]["input_format"] == "lines"  # the recorded (fingerprinted) name is unchanged
