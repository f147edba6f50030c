"""Parsers (gold, spaCy, registry, non-projective policy) and the ``structpe tag`` command."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from structpe.cli import main
from structpe.parser.base import GoldParser, NonProjectiveSentenceError, ParserInputError, join_trees
from structpe.parser.registry import available_parsers, get_parser
from structpe.parser.spacy import SpacyParser
from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.hexatags import decode
from structpe.syntax.tagged import TaggedSentence
from structpe.syntax.trees import is_projective


def row(i: int, form: str, head: int, deprel: str = "dep") -> str:
    return "\t".join([str(i), form, "_", "_", "_", "_", str(head), deprel, "_", "_"])


# "A hearing is scheduled on the issue today": the classic non-projective arc hearing -> on
NONPROJ = [
    "# sent_id = np-1",
    *[row(i, w, h) for i, (w, h) in enumerate(
        [("A", 2), ("hearing", 4), ("is", 4), ("scheduled", 0), ("on", 2), ("the", 7), ("issue", 5),
         ("today", 4)], 1)],
]
PROJ = ["# sent_id = p-1", row(1, "she", 2), row(2, "watches", 0), row(3, "funny", 4), row(4, "videos", 2)]
CONLLU = "\n".join([*PROJ, "", *NONPROJ, ""]) + "\n"


@pytest.fixture()
def conllu_file(tmp_path: Path) -> Path:
    p = tmp_path / "tiny.conllu"
    p.write_text(CONLLU, encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def spacy_parser() -> SpacyParser:
    return SpacyParser()


def test_gold_parser_policies(conllu_file: Path) -> None:
    sents = list(read_conllu(conllu_file))
    lift = GoldParser("lift")
    out = lift.parse_conllu_sentences(sents)
    assert [s.sent_id for s in out] == ["p-1", "np-1"]
    assert out[0].heads == [2, 0, 4, 2] and out[0].lifted_arcs == 0
    assert out[1].lifted_arcs >= 1 and is_projective(out[1].heads) and out[1].heads != sents[1].heads
    assert decode(out[1].terminals, out[1].nonterminals) == out[1].heads
    assert lift.stats.to_dict() == {"sentences": 2, "projective": 1, "lifted": 1, "skipped": 0,
                                    "arcs_lifted": out[1].lifted_arcs}
    skip = GoldParser("skip")
    assert [s.sent_id for s in skip.parse_conllu(conllu_file)] == ["p-1"]
    assert (skip.stats.skipped, skip.stats.projective) == (1, 1)
    with pytest.raises(NonProjectiveSentenceError, match="np-1"):
        list(GoldParser("error").parse_conllu(conllu_file))
    with pytest.raises(ParserInputError, match="needs trees"):
        GoldParser().parse_words([["a"]])
    with pytest.raises(ValueError):
        GoldParser("sometimes")


def test_registry(tmp_path, monkeypatch) -> None:
    from structpe.parser import default as default_parser

    assert {"gold", "spacy", "hexatagger"} <= set(available_parsers())
    assert isinstance(get_parser("gold", nonprojective="skip"), GoldParser)
    with pytest.raises(ValueError, match="unknown parser"):
        get_parser("nope")
    assert get_parser("hexatagger").model_dir == default_parser.default_model_dir()  # the packaged model
    monkeypatch.setattr(default_parser, "default_model_dir", lambda: tmp_path)
    with pytest.raises(ParserInputError, match="hexatagger"):
        get_parser("hexatagger")  # no model folder given and none packaged: a clear error


def test_spacy_words_and_text(spacy_parser: SpacyParser) -> None:
    assert "ner" not in spacy_parser.nlp.pipe_names and "parser" in spacy_parser.nlp.pipe_names
    words = [["She", "watches", "funny", "videos", "."], ["I", "saw", "dogs", "with", "hats", "."]]
    out = spacy_parser.parse_words(words, sent_ids=["a", "b"])
    assert [s.words for s in out] == words and [s.sent_id for s in out] == ["a", "b"]
    for s in out:
        assert s.heads.count(0) == 1
        assert decode(s.terminals, s.nonterminals) == s.heads
    assert out[0].heads[:4] == [2, 0, 4, 2]  # the docs/design.md §1 example parses as expected
    text = spacy_parser.parse_text(["The cat sat on the mat.  It slept.", "Dogs bark."])
    assert [s.sent_id for s in text] == ["1.1", "1.2", "2.1"]
    assert text[0].words == ["The", "cat", "sat", "on", "the", "mat", "."]
    assert all(w.strip() for s in text for w in s.words)  # whitespace tokens are dropped
    for s in text:
        s.check()
    # one tree per text (what character-offset scorers need)
    texts = ["The cat sat on the mat.  It slept.", "Dogs bark."]
    joined = spacy_parser.parse_text(texts, split_sentences=False)
    assert [s.sent_id for s in joined] == ["1", "2"]
    assert joined[0].words == text[0].words + text[1].words and joined[0].heads.count(0) == 1
    joined[0].check()


def test_join_trees() -> None:
    words, heads, deprels = join_trees([(["a", "b"], [2, 0], ["x", "root"]), (["c"], [0], ["root"])])
    assert (words, heads, deprels) == (["a", "b", "c"], [2, 0, 2], ["x", "root", "root"])


def run_cli(args: list[str], capsys: pytest.CaptureFixture, stdin: str | None = None,
            monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    if stdin is not None and monkeypatch is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    rc = main(["tag", *args, "--no-progress"])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_cli_gold_conllu(conllu_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "o.jsonl"
    rc, _, err = run_cli([str(conllu_file), "-o", str(out)], capsys)
    assert rc == 0, err
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows[0]["words"] == ["she", "watches", "funny", "videos"]
    assert rows[0]["terminals"] == ["tl", "tr", "tl", "tr"]
    assert rows[0]["nonterminals"] == ["nl-R", "nl-L", "nr-R", "eos"]
    assert rows[1]["lifted_arcs"] >= 1
    assert "2 sentences, 1 projective, 1 lifted" in err
    assert TaggedSentence.from_dict(rows[1]).heads == rows[1]["heads"]

    rc, stdout, err = run_cli([str(conllu_file), "--nonprojective", "skip"], capsys)
    assert rc == 0 and len(stdout.splitlines()) == 1 and "1 skipped" in err
    rc, _, err = run_cli([str(conllu_file), "--nonprojective", "error"], capsys)
    assert rc == 2 and "np-1" in err


def test_cli_workers_keep_order(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text = "".join(f"# sent_id = s{i}\n" + "\n".join(PROJ[1:]) + "\n\n" for i in range(30))
    src = tmp_path / "many.conllu"
    src.write_text(text)
    rc, stdout, err = run_cli([str(src), "--workers", "2", "--batch-size", "4"], capsys)
    assert rc == 0, err
    assert [json.loads(x)["sent_id"] for x in stdout.splitlines()] == [f"s{i}" for i in range(30)]


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.conllu"
    bad.write_text("# sent_id = x\n" + row(1, "a", 5) + "\n\n")
    rc, _, err = run_cli([str(bad)], capsys)
    assert rc == 2 and "bad.conllu:2" in err and "'x'" in err
    txt = tmp_path / "t.txt"
    txt.write_text("hello world\n")
    rc, _, err = run_cli([str(txt), "--parser", "gold"], capsys)
    assert rc == 2 and "CoNLL-U" in err
    rc, _, err = run_cli([str(tmp_path / "missing.conllu")], capsys)
    assert rc == 2 and "not found" in err
    with pytest.raises(SystemExit):
        main(["tag", "--help"])


def test_cli_spacy_stdin(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    rc, stdout, err = run_cli(["-", "--parser", "spacy"], capsys, "She watches funny videos.\n\nDogs bark.\n",
                              monkeypatch)
    assert rc == 0, err
    rows = [json.loads(x) for x in stdout.splitlines()]
    assert [r["sent_id"] for r in rows] == ["1.1", "3.1"]
    assert rows[0]["words"][:4] == ["She", "watches", "funny", "videos"]
    # CoNLL-U on stdin is recognised and the gold words are re-parsed by spaCy
    rc, stdout, err = run_cli(["-", "--parser", "spacy"], capsys, CONLLU, monkeypatch)
    assert rc == 0, err
    rows = [json.loads(x) for x in stdout.splitlines()]
    assert rows[1]["words"] == ["A", "hearing", "is", "scheduled", "on", "the", "issue", "today"]
    assert "(conllu, parser spacy" in err
