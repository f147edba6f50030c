"""Read CoNLL-U (plain or gzipped) into validated basic dependency trees (docs/design.md §1 input, §6 data).

Token lines are parsed by the maintained ``conllu`` package; this module only groups lines into
sentences (so that every error can name the file, the sentence id and the line number -- ``conllu``
itself does not track line numbers), drops multiword-token (``3-4``) and empty-node (``8.1``) lines,
and rejects anything that is not one single-rooted tree: cycles, zero or several roots, heads out of
range, missing or non-integer heads, non-consecutive word ids.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import conllu
from conllu.exceptions import ParseException

from structpe.errors import StructpeError, reading
from structpe.io import open_text
from structpe.syntax.trees import InvalidTreeError, check_tree


def _raw(parts: list[str], i: int) -> str:
    return parts[i]


# Parse ID and HEAD with conllu's own parsers (they raise on non-integers); keep the columns basic
# trees do not use (FEATS, DEPS, MISC, XPOS) as raw strings: parsing them is most of the reading time.
_FIELD_PARSERS = {
    **conllu.parser.DEFAULT_FIELD_PARSERS,
    "xpos": _raw,
    "feats": _raw,
    "deps": _raw,
    "misc": _raw,
}


class ConlluError(StructpeError):
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


def _text(block: list[tuple[int, str]]) -> str | None:
    for _, line in block:
        if line.startswith("# text") and "=" in line and line[1:].split("=", 1)[0].strip() == "text":
            return line.split("=", 1)[1].strip()
    return None


def _fast_tokens(token_lines: list[tuple[int, str]]) -> list[tuple[Any, str, Any, str]] | None:
    """(id, form, head, deprel) per line when every line is a plain 10-column line, else None.

    Multiword-token (``3-4``) and empty-node (``8.1``) lines come back with a tuple id, as
    ``conllu`` gives them. Hand-written fast path (plain str.split / int): ``conllu``'s regex-based
    line parser is ~5x slower, and reading all stored treebanks is on the test suite's critical
    path. Any line that is not plain (odd columns, non-integer id or head) makes this return None;
    the block is then parsed by ``conllu`` itself, which also produces the error messages.
    """
    out = []
    for _, line in token_lines:
        parts = line.split("\t")
        if len(parts) != 10:
            return None
        tid, form, _, _, _, _, head, deprel = parts[:8]
        if not (tid.isdigit() and tid.isascii()):
            a, sep, b = tid.partition("-") if "-" in tid else tid.partition(".")
            if sep and a.isdigit() and b.isdigit() and a.isascii() and b.isascii():
                out.append(((int(a), sep, int(b)), form, None, deprel))  # multiword / empty node
                continue
            return None
        if not (head.isdigit() and head.isascii()):
            return None
        out.append((int(tid), form, int(head), deprel))
    return out


def _conllu_tokens(
    name: str,
    start: int,
    sent_id: str | None,
    block: list[tuple[int, str]],
    token_lines: list[tuple[int, str]],
) -> list[tuple[Any, Any, Any, Any]]:
    """(id, form, head, deprel) per token line, parsed by ``conllu`` (ids may be tuples)."""
    for no, line in token_lines:  # conllu drops extra columns and pads missing ones: refuse both
        cols = line.count("\t") + 1
        if cols != 10:
            raise ConlluError(name, no, sent_id, f"expected 10 tab-separated columns, got {cols}")
    try:
        tokenlist = conllu.parse_token_and_metadata(
            "\n".join(line for _, line in block), field_parsers=_FIELD_PARSERS
        )
    except ParseException as err:
        # locate the offending line: conllu reports the value, not the position
        for no, line in token_lines:
            try:
                conllu.parse_token_and_metadata(line, field_parsers=_FIELD_PARSERS)
            except ParseException as line_err:
                raise ConlluError(name, no, sent_id, f"{line_err} (line: {line!r})") from None
        raise ConlluError(name, start, sent_id, str(err)) from None
    if len(tokenlist) != len(token_lines):  # conllu parses one token per non-comment line
        raise ConlluError(name, start, sent_id, "could not match tokens to lines")
    out = []
    for (no, _), tok in zip(token_lines, tokenlist, strict=True):
        if len(tok) != 10:
            raise ConlluError(name, no, sent_id, f"expected 10 tab-separated columns, got {len(tok)}")
        out.append((tok["id"], tok["form"], tok["head"], tok["deprel"]))
    return out


def _parse_block(name: str, start: int, block: list[tuple[int, str]]) -> ConlluSentence:
    sent_id = _sent_id(block)
    token_lines = [(no, line) for no, line in block if not line.startswith("#")]
    tokens = _fast_tokens(token_lines) or _conllu_tokens(name, start, sent_id, block, token_lines)
    words: list[str] = []
    heads: list[int] = []
    deprels: list[str] = []
    lines: list[int] = []
    for (no, _), (tid, form, head, deprel) in zip(token_lines, tokens, strict=True):
        if not isinstance(tid, int):  # multiword token (3, "-", 4) or empty node (8, ".", 1)
            continue
        if tid != len(words) + 1:
            raise ConlluError(name, no, sent_id, f"word id {tid} where {len(words) + 1} was expected")
        if head is None:
            raise ConlluError(name, no, sent_id, f"word {tid} has no head ('_'): not a basic tree")
        words.append(form if form is not None else "_")
        heads.append(head)
        deprels.append(deprel or "_")
        lines.append(no)
    if not words:
        raise ConlluError(name, start, sent_id, "sentence has no words")
    try:
        check_tree(heads)
    except InvalidTreeError as err:
        no = lines[err.word - 1] if err.word else start
        raise ConlluError(name, no, sent_id, str(err)) from None
    return ConlluSentence(words, heads, deprels, sent_id, _text(block), start)


def read_conllu(source: str | os.PathLike | TextIO, name: str | None = None) -> Iterator[ConlluSentence]:
    """Yield validated sentences from a CoNLL-U path (plain or .gz) or an open text stream.

    Raises ConlluError at the first malformed sentence (file, sent_id and line in the message).
    """
    if isinstance(source, (str, os.PathLike)):
        label = name or str(source)
        with open_text(source) as fh, reading(label):
            for start, block in _blocks(fh):
                if _comment_only(label, start, block):
                    continue
                yield _parse_block(label, start, block)
    else:
        label = name or getattr(source, "name", "<stream>")
        if isinstance(source, io.BufferedIOBase):
            source = io.TextIOWrapper(source, encoding="utf-8")
        for start, block in _blocks(source):
            if _comment_only(label, start, block):
                continue
            yield _parse_block(label, start, block)


def _comment_only(name: str, start: int, block: list[tuple[int, str]]) -> bool:
    """True for a block of comments only (e.g. a trailing "# newdoc"): it has no sentence. One with a
    sent_id announces a sentence whose words are missing, which is an error, not a skip."""
    if not all(line.startswith("#") for _, line in block):
        return False
    sent_id = _sent_id(block)
    if sent_id is not None:
        raise ConlluError(name, start, sent_id, "sentence has a sent_id but no word lines")
    return True
