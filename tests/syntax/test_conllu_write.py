"""`tag --output-format conllu`: CoNLL-U that the ``conllu`` package and structpe's own reader read
back to the same words, tagged tree, relations, sentence ids and hexatags as the JSON-lines output."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import conllu as conllu_lib
import pytest

from structpe.cli import main
from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.conllu_write import to_conllu
from structpe.syntax.tagged import TaggedSentence


def test_tag_conllu_round_trip(shared_data: Path, tmp_path: Path) -> None:
    src = shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz"
    with gzip.open(src, "rt", encoding="utf-8") as f:
        blocks = f.read().split("\n\n")[:300]
    gold = tmp_path / "slice.conllu"
    gold.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    as_json, as_conllu = tmp_path / "t.jsonl", tmp_path / "t.conllu"
    assert main(["tag", str(gold), "--no-progress", "-o", str(as_json)]) == 0
    assert main(["tag", str(gold), "--no-progress", "--output-format", "conllu", "-o", str(as_conllu)]) == 0
    rows = [json.loads(line) for line in as_json.read_text().splitlines()]
    text = as_conllu.read_text(encoding="utf-8")
    parsed = conllu_lib.parse(text)
    ours = list(read_conllu(as_conllu))
    assert len(rows) == len(parsed) == len(ours) == 300
    assert any(r["lifted_arcs"] for r in rows)  # non-projective trees: the lifted (tagged) tree is written
    for r, sent, mine in zip(rows, parsed, ours, strict=True):
        assert sent.metadata["sent_id"] == mine.sent_id == r["sent_id"]
        assert [t["form"] for t in sent] == mine.words == r["words"]
        assert [t["head"] for t in sent] == mine.heads == r["heads"]
        assert [t["deprel"] for t in sent] == mine.deprels == r["deprels"]
        assert [t["misc"]["Hexatag"] for t in sent] == r["terminals"]
        assert [t["misc"]["HexatagNT"] for t in sent] == r["nonterminals"]
        assert int(sent.metadata.get("structpe_lifted_arcs", 0)) == r["lifted_arcs"]
        assert sent.metadata["text"]
        # the tags in MISC decode to the HEAD column (a reader can recover the tagged tree from either)
        TaggedSentence.from_dict({**r, "heads": [t["head"] for t in sent]}).check()


def test_unknown_relations_and_text() -> None:
    sent = TaggedSentence.from_heads(["It", "works"], [2, 0])
    sent.meta["text"] = "It  works"
    (block,) = to_conllu([sent], start=7)
    lines = block.splitlines()
    assert lines[:2] == ["# sent_id = 7", "# text = It works"]
    assert lines[2].split("\t") == ["1", "It", "_", "_", "_", "_", "2", "_", "_", "Hexatag=tl|HexatagNT=nl-R"]
    assert block.endswith("\n\n")


@pytest.mark.parametrize("fmt", ["jsonl", "conllu"])
def test_tag_text_output_formats(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("spacy")
    text = tmp_path / "in.txt"
    text.write_text("She watches funny videos.\n", encoding="utf-8")
    assert main(["tag", "--parser", "spacy", "--no-progress", "--output-format", fmt, str(text)]) == 0
    out = capsys.readouterr().out
    if fmt == "conllu":
        (sent,) = conllu_lib.parse(out)
        assert [t["form"] for t in sent] == ["She", "watches", "funny", "videos", "."]
        assert [t["head"] for t in sent] == [2, 0, 4, 2, 2] and sent.metadata["sent_id"] == "1.1"
    else:
        assert json.loads(out)["heads"] == [2, 0, 4, 2, 2]
