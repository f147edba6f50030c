"""Transformations from upstream files into structpe's layout (the ``build`` entries of the registry).

Each builder takes the downloaded files (in registry order) and returns ``{target: content}`` with
the uncompressed content of every output; the caller gzips targets ending in ``.gz``.  The rules
reproduce the files of the shared data folder byte for byte (checked by the registry's hashes).
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

BROWN_SPLITS = ("train", "valid", "test")


def brown_split_of(categories: dict[str, str]) -> dict[str, str]:
    """Brown has no official split: within each category, files sorted by id are enumerated
    i = 0, 1, ...; i % 10 == 8 goes to valid, i % 10 == 9 to test, the rest to train (~80/10/10)."""
    by_cat: dict[str, list[str]] = {}
    for f in sorted(categories):
        by_cat.setdefault(categories[f], []).append(f)
    split = {}
    for files in by_cat.values():
        for i, f in enumerate(files):
            split[f] = "valid" if i % 10 == 8 else "test" if i % 10 == 9 else "train"
    return split


def brown_sentences(tagged: str) -> list[str]:
    """One sentence per non-empty line of ``word/tag`` tokens; the tag is cut at the LAST ``/`` so
    ``and/or`` or ``1/2`` survive, tokens are joined by single spaces (Brown's tokenization kept)."""
    lines = (line for line in tagged.splitlines() if line.strip())
    return [" ".join(tok.rsplit("/", 1)[0] for tok in line.split()) for line in lines]


def build_brown(paths: list[Path]) -> dict[str, bytes]:
    """NLTK's ``brown.zip`` -> ``brown.{train,valid,test}.txt`` (documents in file-id order, one
    sentence per line, an empty line after each document) plus ``cats.txt`` and the README."""
    (zpath,) = paths
    with zipfile.ZipFile(zpath) as z:
        cats_raw = z.read("brown/cats.txt")
        categories = dict(line.split() for line in cats_raw.decode("ascii").splitlines() if line.strip())
        split = brown_split_of(categories)
        docs: dict[str, list[str]] = {s: [] for s in BROWN_SPLITS}
        for f in sorted(categories):
            sents = brown_sentences(z.read(f"brown/{f}").decode("ascii"))
            docs[split[f]].append("".join(s + "\n" for s in sents) + "\n")
        out = {f"brown.{s}.txt.gz": "".join(docs[s]).encode("utf-8") for s in BROWN_SPLITS}
        out["cats.txt"] = cats_raw
        out["README.brown.txt"] = z.read("brown/README")
    return out


def gutenberg_cuts(lines: list[str]) -> tuple[int, int]:
    """Line indices ending train and valid: 90% and 95% of the lines (rounded down), each moved
    forward to just after the next blank line within 300 lines so that no paragraph is cut."""
    n = len(lines)

    def cut(frac: float) -> int:
        start = int(frac * n)
        for i in range(start, min(start + 300, n)):
            if not lines[i].strip():
                return i + 1
        return start

    return cut(0.9), cut(0.95)


def build_gutenberg(paths: list[Path]) -> dict[str, bytes]:
    """13 NLTK Gutenberg books -> ``gutenberg.{train,valid,test}.txt``.

    Each book is decoded as ASCII (Latin-1 where that fails), CRLF becomes LF, trailing newlines
    are dropped and the lines are split contiguously by ``gutenberg_cuts``.  In every split file the
    books follow in the order given (the registry lists them by file name; the downloaded copies
    carry a cache prefix, so their own names do not sort that way), each part stripped of
    leading/trailing newlines and separated by two empty lines; the file ends with one newline.
    """
    parts: dict[str, list[str]] = {s: [] for s in BROWN_SPLITS}
    for p in paths:
        raw = p.read_bytes()
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        lines = text.replace("\r\n", "\n").rstrip("\n").split("\n")
        a, b = gutenberg_cuts(lines)
        for split, chunk in zip(BROWN_SPLITS, (lines[:a], lines[a:b], lines[b:]), strict=True):
            parts[split].append("\n".join(chunk).strip("\n"))
    return {f"gutenberg.{s}.txt.gz": ("\n\n\n".join(parts[s]) + "\n").encode("utf-8") for s in BROWN_SPLITS}


def build_concat(paths: list[Path]) -> dict[str, bytes]:
    """CoLA: GLUE's dev set is the in-domain dev file followed by the out-of-domain one, as they are."""
    return {"dev.tsv": b"".join(p.read_bytes() for p in paths)}


BUILDERS: dict[str, Callable[[list[Path]], dict[str, bytes]]] = {
    "brown": build_brown,
    "gutenberg": build_gutenberg,
    "concat": build_concat,
}
