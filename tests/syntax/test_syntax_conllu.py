"""CoNLL-U reading: skipped node kinds, gzip, and a clear error for every malformed-tree kind."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from structpe.syntax.conllu_io import ConlluError, read_conllu


def row(i: str, form: str, head: str, deprel: str = "dep") -> str:
    return "\t".join([i, form, "_", "_", "_", "_", head, deprel, "_", "_"])


GOOD = "\n".join(
    [
        "# sent_id = ok-1",
        "# text = I don't know.",
        row("1", "I", "3", "nsubj"),
        row("2-3", "don't", "_", "_"),
        row("2", "do", "3", "aux"),
        row("3", "n't", "0", "root"),
        row("3.1", "know", "_", "_"),
        row("4", ".", "3", "punct"),
        "",
        "# sent_id = ok-2",
        row("1", "Hi", "0", "root"),
        "",
    ]
)


def write(tmp_path: Path, text: str, name: str = "x.conllu") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_reads_and_skips_multiword_and_empty_nodes(tmp_path: Path) -> None:
    sents = list(read_conllu(write(tmp_path, GOOD)))
    assert [s.sent_id for s in sents] == ["ok-1", "ok-2"]
    assert sents[0].words == ["I", "do", "n't", "."]
    assert sents[0].heads == [3, 3, 0, 3]
    assert sents[0].deprels == ["nsubj", "aux", "root", "punct"]
    assert sents[0].text == "I don't know." and sents[0].line == 1
    gz = tmp_path / "x.conllu.gz"
    gz.write_bytes(gzip.compress(GOOD.encode()))
    assert [s.words for s in read_conllu(gz)] == [s.words for s in sents]


def bad(head2: str = "1", head1: str = "0", extra: str = "") -> str:
    lines = ["# sent_id = bad-7", "# text = a b", row("1", "a", head1), row("2", "b", head2)]
    if extra:
        lines.append(extra)
    return "\n".join(["# sent_id = fine", row("1", "x", "0"), "", *lines, ""])


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        (bad(head2="9"), 7, "outside 0..2"),  # head out of range
        (bad(head2="x"), 7, "not a valid value"),  # non-integer head
        (bad(head2="1.5"), 7, "not a valid value"),
        (bad(head2="_"), 7, "no head"),
        (bad(head2="0"), 7, "2 roots"),  # several roots
        (bad(head1="2", head2="1"), 6, "no root"),  # zero roots (and a cycle)
        (bad(extra=row("3", "c", "4")), 8, "outside"),
        (bad(extra="\n".join([row("3", "c", "4"), row("4", "d", "3")])), 8, "cycle"),
        (bad(extra=row("5", "c", "1")), 8, "word id 5"),
    ],
)
def test_malformed_tree_errors_name_file_sentence_and_line(
    tmp_path: Path, text: str, line: int, match: str
) -> None:
    p = write(tmp_path, text, "broken.conllu")
    with pytest.raises(ConlluError, match=match) as err:
        list(read_conllu(p))
    msg = str(err.value)
    assert f"broken.conllu:{line}:" in msg, msg
    assert "'bad-7'" in msg
    assert err.value.line == line and err.value.sent_id == "bad-7"


def test_error_is_picklable() -> None:
    import pickle

    e = ConlluError("f.conllu", 3, "s", "boom")
    assert str(pickle.loads(pickle.dumps(e))) == str(e)
