"""The hexatagger shipped inside the package: its files match its card, it loads with no --model,
and it still parses EWT at its card's accuracy (a regression guard on 300 sentences)."""

from __future__ import annotations

import json

import pytest

from structpe.cli import main
from structpe.parser.data import load_sentences, treebank_file
from structpe.parser.default import default_model_dir, read_card, verify
from structpe.parser.evaluate import evaluate_parser
from structpe.syntax.hexatags import decode


def test_the_packaged_model_matches_its_card():
    folder = default_model_dir()
    verify(folder)  # every file's sha256 as recorded
    card = read_card(folder)
    assert card["metrics"]["ewt-test"]["uas"] >= 85.0
    assert sum(p.stat().st_size for p in folder.iterdir()) <= 16 * 2**20


def test_tag_without_model_uses_the_packaged_parser(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("The old man the boats.\n")
    out = tmp_path / "out.jsonl"
    assert main(["tag", str(src), "--parser", "hexatagger", "-o", str(out), "--no-progress"]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert decode(row["terminals"], row["nonterminals"]) == row["heads"]


@pytest.mark.data
def test_the_packaged_model_parses_ewt_test_near_its_card(shared_data):
    gold = load_sentences(treebank_file(shared_data, "ewt", "test"), limit=300)
    res = evaluate_parser("hexatagger", gold)
    assert res["uas"] >= 84.0, res["uas"]
