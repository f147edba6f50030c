"""Transformations from upstream files into structpe's layout (the ``build`` entries of the registry).

Each builder takes the downloaded files (in registry order) and returns ``{target: content}`` with
the uncompressed content of every output; the caller gzips targets ending in ``.gz``.  The rules
reproduce the files of the shared data folder byte for byte (checked by the registry's hashes).
"""

from __future__ import annotations

import hashlib
import re
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


# -- gutenberg-pd-10m: whole Project Gutenberg books, split by book ---------------------------------
# The reference recipe (the corpus's PROVENANCE.md) *selected* 196 books from 3,443 by author, language,
# length and duplicates; the registry pins that selection (one download per book, in the recipe's
# order). What is rebuilt here is everything that turns a selected book into corpus text: the PG
# header/footer cut, the cleaning and the split, so the outputs match the shared files byte for byte.
PG_START = re.compile(r"^\*\*\* ?START OF (THIS|THE) PROJECT GUTENBERG", re.I)
PG_END = re.compile(r"^\*\*\* ?END OF (THIS|THE) PROJECT GUTENBERG", re.I)
PG_EBOOK = re.compile(r"\[E-?Book #(\d+)\]", re.I)
PG_IMAGE = re.compile(r"^\s*(\S+\.(jpe?g|png|gif)(\s*\(\d+K\))?|Full Size)\s*$|\.(jpe?g|png|gif)\}\s*$", re.I)
PG_NOTE = re.compile(r"project gutenberg|gutenberg\.org|gutenberg\.net", re.I)
PG_CREDITS = (
    "produced by",
    "e-text prepared by",
    "etext prepared by",
    "transcribed from",
    "prepared by",
    "this etext was",
)
PD_SPLITS = ("train", "dev", "test")


def gutenberg_pd_split(key: str) -> str:
    """The book's split: sha256 of its ebook number (else its git blob id) mod 20; 0 dev, 1 test."""
    h = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 20
    return "dev" if h == 0 else "test" if h == 1 else "train"


def gutenberg_pd_clean(text: str, where: str) -> tuple[str, str | None]:
    """(cleaned body, ebook number or None) of one Project Gutenberg file.

    CRLF -> LF; the text between the ``*** START`` and ``*** END OF ... PROJECT GUTENBERG`` lines,
    without image-caption lines, trailing spaces, a leading "Produced by" credit paragraph, and
    paragraphs naming Project Gutenberg among the first 15 or the last 3; one blank line between
    paragraphs, one final newline. ``where`` names the book in the error for a file without markers.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    num = PG_EBOOK.search("\n".join(lines[:80]))
    s = next((i for i, line in enumerate(lines) if PG_START.match(line)), None)
    e = next((i for i, line in enumerate(lines) if PG_END.match(line)), None)
    if s is None or e is None or e <= s:
        raise ValueError(f"{where}: no Project Gutenberg START/END markers")
    body = [line.rstrip() for line in lines[s + 1 : e] if not PG_IMAGE.search(line)]
    while body and not body[0]:
        body.pop(0)
    if body and body[0].lower().startswith(PG_CREDITS):
        while body and body[0]:
            body.pop(0)
    paras = re.split(r"\n\s*\n", "\n".join(body).strip())
    keep = [p for i, p in enumerate(paras) if not ((i < 15 or i >= len(paras) - 3) and PG_NOTE.search(p))]
    return "\n\n".join(keep).strip() + "\n", (num.group(1) if num else None)


def build_gutenberg_pd(paths: list[Path]) -> dict[str, bytes]:
    """The pinned books (registry order) -> ``gutenberg_pd.{train,dev,test}.txt``: each book cleaned
    by :func:`gutenberg_pd_clean`, put in the split :func:`gutenberg_pd_split` gives it, books of a
    split in registry order with one blank line between them."""
    parts: dict[str, list[str]] = {s: [] for s in PD_SPLITS}
    for p in paths:
        raw = p.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"{p.name}: not UTF-8 ({err})") from None
        body, num = gutenberg_pd_clean(text, p.name)
        blob = hashlib.sha1(f"blob {len(raw)}\0".encode() + raw).hexdigest()  # git's id of the file
        parts[gutenberg_pd_split(num or blob)].append(body)
    return {f"gutenberg_pd.{s}.txt.gz": "\n".join(parts[s]).encode("utf-8") for s in PD_SPLITS}


def build_concat(paths: list[Path]) -> dict[str, bytes]:
    """CoLA: GLUE's dev set is the in-domain dev file followed by the out-of-domain one, as they are."""
    return {"dev.tsv": b"".join(p.read_bytes() for p in paths)}


BUILDERS: dict[str, Callable[[list[Path]], dict[str, bytes]]] = {
    "brown": build_brown,
    "gutenberg": build_gutenberg,
    "concat": build_concat,
    "gutenberg-pd": build_gutenberg_pd,
}
