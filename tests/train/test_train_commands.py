"""The three CLI commands call the library functions and report errors without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from structpe.cli import main


def test_tokenizer_prepare_and_pretrain_cli(
    ewt_slices: dict, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    tok = tmp_path / "tok"
    assert main(["tokenizer", "train", str(ewt_slices["train"]), "-o", str(tok), "--vocab-size", "500"]) == 0
    assert json.loads((tok / "structpe_tokenizer.json").read_text())["kind"] == "bpe"
    data = tmp_path / "data"
    args = [
        "prepare",
        "--train",
        str(ewt_slices["train"]),
        "--validation",
        str(ewt_slices["validation"]),
        "--tokenizer",
        str(tok),
        "--parser",
        "gold",
        "--seq-len",
        "48",
        "-o",
        str(data),
    ]
    assert main(args) == 0
    meta = json.loads((data / "structpe_prepare.json").read_text())
    assert meta["settings"]["seq_len"] == 48 and meta["vocab_size"] == 500
    assert main(["pretrain", "--list"]) == 0
    assert "txl/position-tiny" in capsys.readouterr().out
    # errors: a message on stderr and exit code 2, no traceback
    assert main(["pretrain", "--config", "txl/position-tiny", f"train.dataset={tmp_path / 'none'}"]) == 2
    assert "prepared dataset not found" in capsys.readouterr().err
    assert main(["pretrain", "--config", "txl/position-tiny", "max_stpes=3"]) == 2
    assert "Did you mean 'train.max_steps'" in capsys.readouterr().err
    assert (
        main(
            [
                "prepare",
                "--train",
                str(ewt_slices["train"]),
                "--validation",
                str(ewt_slices["validation"]),
                "--tokenizer",
                str(tok),
                "--parser",
                "gold",
                "--input-format",
                "tokenized-lines",
            ]
        )
        == 2
    )
    assert "gold parser needs CoNLL-U" in capsys.readouterr().err
