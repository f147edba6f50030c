"""Reading pre-training corpora: plain or gzipped text files and CoNLL-U treebanks.

Three input formats, matching the layout of ``shared/data`` (see its PROVENANCE files):

``lines``   one sentence per line, already tokenized on whitespace (Brown). Blank lines separate
            documents. Words are taken as they are (no re-tokenization), so Brown's tokenization is kept.
``text``    raw running text with arbitrary line breaks (Gutenberg, users' own files). Blank lines
            separate paragraphs; the lines of a paragraph are joined with spaces and the parser
            sentence-splits and tokenizes the paragraph.
``conllu``  CoNLL-U treebanks (UD); the gold trees are used by the ``gold`` parser.

Every reader yields *units* in file order: a unit is a sentence (``lines``) or a paragraph
(``text``). Order is part of the contract: ``structpe prepare`` is deterministic because of it.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterable, Iterator
from pathlib import Path

FORMATS = ("lines", "text", "conllu")


def open_text(path: str | Path) -> io.TextIOBase:
    """Open a UTF-8 text file, transparently gunzipping ``*.gz``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus file not found: {path}")
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115 - returned to the caller, who closes it


def guess_format(path: str | Path) -> str:
    """``conllu`` for *.conllu(.gz), otherwise ``lines`` (the format of the shipped Brown files)."""
    name = Path(path).name.lower()
    if name.endswith(".conllu") or name.endswith(".conllu.gz"):
        return "conllu"
    return "lines"


def iter_units(path: str | Path, fmt: str) -> Iterator[str]:
    """Yield the sentences (``lines``) or paragraphs (``text``) of one file, in order."""
    if fmt not in ("lines", "text"):
        raise ValueError(f"iter_units reads 'lines' or 'text' files, not {fmt!r}")
    with open_text(path) as fh:
        if fmt == "lines":
            for line in fh:
                line = line.strip()
                if line:
                    yield line
            return
        para: list[str] = []
        for line in fh:
            line = line.strip()
            if line:
                para.append(line)
            elif para:
                yield " ".join(para)
                para = []
        if para:
            yield " ".join(para)


def iter_tokenizer_text(paths: Iterable[str | Path], fmt: str | None = None) -> Iterator[str]:
    """Text lines to train a tokenizer on: raw lines, or the space-joined words of CoNLL-U sentences."""
    for path in paths:
        f = fmt or guess_format(path)
        if f == "conllu":
            with open_text(path) as fh:
                words: list[str] = []
                for line in fh:
                    line = line.rstrip("\n")
                    if not line:
                        if words:
                            yield " ".join(words)
                            words = []
                    elif not line.startswith("#"):
                        cols = line.split("\t")
                        if len(cols) >= 2 and cols[0].isdigit():
                            words.append(cols[1])
                if words:
                    yield " ".join(words)
        else:
            yield from iter_units(path, f)
