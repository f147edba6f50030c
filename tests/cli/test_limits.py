"""Inputs past a limit (docs/reliability.md, "limits at the edge"): each is refused before the work
in one line naming the limit and the way out -- text length before spaCy, words per sentence
before the hexatagger, tokens per sentence in ``eval ppl``, model sizes before allocation,
``--max-words`` in ``generate`` -- plus round two's leftovers (a score that is not a number, a
full disk met by ``datasets``)."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from structpe.cli import main
from structpe.errors import StructpeError

FIXTURES = Path(__file__).parent / "fixtures"


def test_text_past_spacys_length_is_refused_before_parsing(tmp_path: Path) -> None:
    from structpe.syntax.sentences import MAX_TEXT_CHARS, check_text_lengths

    check_text_lengths(["a" * MAX_TEXT_CHARS])
    pattern = r"split 'train' \(x\): text 2 .* 1,000,001 characters, over spaCy's limit"
    with pytest.raises(StructpeError, match=pattern):
        check_text_lengths(["ok", "a" * (MAX_TEXT_CHARS + 1)], "split 'train' (x): ")


def test_a_sentence_past_the_hexataggers_words_is_one_line(tmp_path: Path, cli_fails: Any) -> None:
    src = tmp_path / "long.txt"
    src.write_text(" ".join(["dog"] * 20_000) + "\n")
    cli_fails(["tag", str(src), "--input-format", "tokenized-lines", "--parser", "hexatagger", "-o",
            str(tmp_path / "o.jsonl"), "--no-progress"], "long.txt", "20,000 words", "limit of 510")
    assert not (tmp_path / "o.jsonl").exists()


def test_eval_ppl_refuses_a_sentence_past_the_positions(
    tiny_model: Path, tmp_path: Path, cli_fails: Any
) -> None:
    from structpe.syntax.tagged import TaggedSentence

    n = 600  # the tiny model has 512 positions
    row = TaggedSentence.from_heads(["dog"] * n, [0] + [1] * (n - 1)).to_dict()
    data = tmp_path / "long.jsonl"
    data.write_text(json.dumps(row) + "\n" + (FIXTURES / "ok.jsonl").read_text())
    argv = ["eval", "ppl", "--model", str(tiny_model), "--data", str(data), "--out", str(tmp_path / "o")]
    cli_fails(argv, "sentence 1", "512 positions", "--max-length 512")
    assert main([*argv, "--max-length", "512"]) == 0  # the way out: the long sentence is skipped
    assert json.loads((tmp_path / "o" / "ppl.json").read_text())["skipped"] == 1


def test_absurd_model_sizes_are_refused_before_allocation(
    tiny_model: Path, tmp_path: Path, cli_fails: Any
) -> None:
    from structpe.models import SiPEConfig, build_model

    huge = {"d_model": 65536, "n_layers": 64, "d_ff": 262144}
    cfg = SiPEConfig(family="roberta", injection="input", vocab_size=50, n_heads=2, **huge)
    with pytest.raises(StructpeError, match=r"d_model=65536.*GiB in float32\), more than the"):
        build_model(cfg)
    folder = tmp_path / "absurd"
    shutil.copytree(tiny_model, folder)
    saved = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**saved, **huge}))
    cli_fails(["eval", "ppl", "--model", str(folder), "--data", str(FIXTURES / "ok.jsonl"), "--out",
            str(tmp_path / "o")], "config.json", "memory available")
    from transformers import AutoModelForCausalLM

    with pytest.raises(StructpeError, match="memory available"):
        AutoModelForCausalLM.from_pretrained(folder)


def test_generate_max_words_past_the_positions_is_one_line(tiny_model: Path, cli_fails: Any) -> None:
    cli_fails(["generate", "--model", str(tiny_model), "--max-words", "1000000"],
              "--max-words 1,000,000", "512 positions", "at most 510")


def test_study_report_names_a_score_that_is_not_a_number(tmp_path: Path) -> None:
    from structpe.study.cell_metrics import load_cell_metrics

    cell = tmp_path / "cells" / "none" / "seed-1"
    cell.mkdir(parents=True)
    cell_json = {"recipe_label": "none", "seed": 1, "scores": {"ppl.word_ppl": "12.5"}}
    (cell / "metrics.json").write_text(json.dumps(cell_json))
    with pytest.raises(StructpeError, match=r"metrics.json: scores.ppl.word_ppl is '12.5', not a number"):
        load_cell_metrics(tmp_path)
    (cell / "metrics.json").write_text('{"recipe_label": "none", "seed": "1", "scores": {}}')
    with pytest.raises(StructpeError, match="metrics.json: seed is '1', not an integer"):
        load_cell_metrics(tmp_path)


def test_a_full_disk_under_datasets_is_one_line_naming_the_folder(tmp_path: Path) -> None:
    from structpe.io import writing

    stage = tmp_path / ".stage"
    full = r"out: cannot write \(No space left on device\); earlier files"
    with pytest.raises(StructpeError, match=full), writing(tmp_path / "out", stage):
        raise OSError(errno.ENOSPC, "No space left on device")  # datasets: no file name
    with pytest.raises(StructpeError, match="out: cannot write"), writing(tmp_path / "out", stage):
        raise OSError(errno.ENOSPC, "No space left on device", str(stage / "cache-1.arrow"))
    # an input that is missing is not a failed write
    with pytest.raises(FileNotFoundError), writing(tmp_path / "out", stage):
        raise FileNotFoundError(errno.ENOENT, "No such file", str(tmp_path / "in.txt"))
