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


def test_fit_subwords_shortens_only_the_longest_words():
    from structpe.parser.tokenizer import fit_subwords

    # [CLS] w0 (1 subword) w1 (5) w2 (2) [SEP]: 10 positions
    ids, firsts = [101, 1, 2, 3, 4, 5, 6, 7, 8, 102], [1, 2, 7]
    assert fit_subwords(ids, firsts, 10) == (ids, firsts)
    assert fit_subwords(ids, firsts, 8) == ([101, 1, 2, 3, 4, 7, 8, 102], [1, 2, 5])  # w1 keeps 3
    assert fit_subwords(ids, firsts, 5) == ([101, 1, 2, 7, 102], [1, 2, 3])  # every word its first
    with pytest.raises(ValueError, match="3 words; the model takes at most 2"):
        fit_subwords(ids, firsts, 4)


def test_the_packaged_parser_tags_a_sentence_past_its_positions():
    """A table of contents' dot leaders run to ~8 subwords per word: 100 such words exceed the
    encoder's 512 positions, and each word still gets a tag (its first subword is kept)."""
    from structpe.parser.registry import get_parser
    from structpe.parser.tokenizer import encode_words

    words = ["Chapter", "One", "." * 40, "12"] * 25
    parser = get_parser("hexatagger")
    [(ids, _)] = encode_words(parser.tokenizer, [words])
    assert len(ids) > parser.model.config.max_positions
    [sent] = parser.parse_words([words])
    assert sent.words == words and len(sent.terminals) == len(words)
    assert decode(sent.terminals, sent.nonterminals) == sent.heads  # still one well-formed tree
    with pytest.raises(ValueError, match="sentence 0: 600 words, over the hexatagger's limit of 510 words"):
        parser.parse_words([["word"] * 600])
