"""Read CoNLL-U (plain or gzipped) into validated basic dependency trees (DESIGN §1 input, §6 data).

Token lines are parsed by the maintained ``conllu`` package; this module only groups lines into
sentences (so that every error can name the file, the sentence id and the line number -- ``conllu``
itself does not track line numbers), drops multiword-token (``3-4``) and empty-node (``8.1``) lines,
and rejects anything that is not one single-rooted tree: cycles, zero or several roots, heads out of
range, missing or non-integer heads, non-consecutive word ids.
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import conllu
from conllu.exceptions import ParseException

from structpe.syntax.trees import InvalidTreeError, check_tree

__all__ = ["ConlluError", "ConlluSentence", "open_text", "read_conllu"]


class ConlluError(ValueError):
    """Malformed CoNLL-U; the message names the file, the sentence id and the line number."""

    def __init__(self, source: str, line: int, sent_id: str | None, message: str):
        where = f"sentence {sent_id!r}" if sent_id else "sentence without sent_id"
        super().__init__(f"{source}:{line}: {where}: {message}")
        self.source, self.line, self.sent_id, self.message = source, line, sent_id, message

    def __reduce__(self) -> tuple:  # keep it picklable across worker processes
        return (type(self), (self.source, self.line, self.sent_id, self.message))


@dataclass
class ConlluSentence:
    """One basic tree: words, 1-based heads (0 = root), deprels; ``line`` is its first line."""

    words: list[str]
    heads: list[int]
    deprels: list[str]
    sent_id: str | None = None
    text: str | None = None
    line: int = 0


def open_text(path: str | os.PathLike) -> TextIO:
    """Open a UTF-8 text file, gunzipping when the content is gzip (whatever the file name says)."""
    p = Path(path)
    with p.open("rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(p, "rt", encoding="utf-8")
    return p.open("r", encoding="utf-8")


def _blocks(lines: TextIO) -> Iterator[tuple[int, list[tuple[int, str]]]]:
    """Yield (first line number, [(line number, line)]) per blank-line separated block."""
    block: list[tuple[int, str]] = []
    for no, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if line.strip():
            block.append((no, line))
        elif block:
            yield block[0][0], block
            block = []
    if block:
        yield block[0][0], block


def _sent_id(block: list[tuple[int, str]]) -> str | None:
    for _, line in block:
        if line.startswith("#") and "sent_id" in line:
            key, _, value = line[1:].partition("=")
            if key.strip() == "sent_id":
                return value.strip()
    return None


def _parse_block(name: str, start: int, block: list[tuple[int, str]]) -> ConlluSentence:
    sent_id = _sent_id(block)
    token_lines = [(no, line) for no, line in block if not line.startswith("#")]
    try:
        tokenlist = conllu.parse_token_and_metadata("\n".join(line for _, line in block))
    except ParseException as err:
        # locate the offending line: conllu reports the value, not the position
        for no, line in token_lines:
            try:
                conllu.parse_token_and_metadata(line)
            except ParseException as line_err:
                raise ConlluError(name, no, sent_id, f"{line_err} (line: {line!r})") from None
        raise ConlluError(name, start, sent_id, str(err)) from None
    if len(tokenlist) != len(token_lines):  # conllu parses one token per non-comment line
        raise ConlluError(name, start, sent_id, "could not match tokens to lines")
    meta = tokenlist.metadata
    words: list[str] = []
    heads: list[int] = []
    deprels: list[str] = []
    lines: list[int] = []
    for (no, _), tok in zip(token_lines, tokenlist, strict=True):
        tid = tok["id"]
        if not isinstance(tid, int):  # multiword token (3, "-", 4) or empty node (8, ".", 1)
            continue
        if tid != len(words) + 1:
            raise ConlluError(name, no, sent_id, f"word id {tid} where {len(words) + 1} was expected")
        head = tok["head"]
        if head is None:
            raise ConlluError(name, no, sent_id, f"word {tid} has no head ('_'): not a basic tree")
        words.append(tok["form"] if tok["form"] is not None else "_")
        heads.append(head)
        deprels.append(tok["deprel"] or "_")
        lines.append(no)
    if not words:
        raise ConlluError(name, start, sent_id, "sentence has no words")
    try:
        check_tree(heads)
    except InvalidTreeError as err:
        no = lines[err.word - 1] if err.word else start
        raise ConlluError(name, no, sent_id, str(err)) from None
    return ConlluSentence(words, heads, deprels, sent_id or meta.get("sent_id"), meta.get("text"), start)


def read_conllu(source: str | os.PathLike | TextIO, name: str | None = None) -> Iterator[ConlluSentence]:
    """Yield validated sentences from a CoNLL-U path (plain or .gz) or an open text stream.

    Raises ConlluError at the first malformed sentence (file, sent_id and line in the message).
    """
    if isinstance(source, (str, os.PathLike)):
        label = name or str(source)
        with open_text(source) as fh:
            for start, block in _blocks(fh):
                if all(line.startswith("#") for _, line in block):
                    continue  # a comment-only block (e.g. a trailing "# newdoc") has no sentence
                yield _parse_block(label, start, block)
    else:
        label = name or getattr(source, "name", "<stream>")
        if isinstance(source, io.BufferedIOBase):
            source = io.TextIOWrapper(source, encoding="utf-8")
        for start, block in _blocks(source):
            if all(line.startswith("#") for _, line in block):
                continue
            yield _parse_block(label, start, block)
