"""Reading pre-training corpora: plain or gzipped text files and CoNLL-U treebanks.

Three input formats, matching the layout of ``shared/data`` (see its PROVENANCE files):

``lines``   one sentence per line, already tokenized on whitespace (Brown). Blank lines separate
            documents. Words are taken as they are (no re-tokenization), so Brown's tokenization is kept.
``text``    raw running text with arbitrary line breaks (Gutenberg, users' own files). Blank lines
            separate paragraphs; the lines of a paragraph are joined with spaces, and
            ``structpe.syntax.sentences.split_sentences`` cuts each paragraph into sentences of
            words, the one rule for every parser and for the LM (see there).
``conllu``  CoNLL-U treebanks (UD); the gold trees are used by the ``gold`` parser.
``raw-lines`` one raw sentence per line; the parser tokenizes each line.

These are the names the prepared data records (they enter its fingerprint, so they stay); the CLI
speaks the shared vocabulary of :mod:`structpe.text_formats` and maps it with :data:`PREPARE_NAMES`.

Every reader yields *units* in file order: a unit is a sentence (``lines``) or a paragraph
(``text``). Order is part of the contract: ``structpe prepare`` is deterministic because of it.

Text form. Benchmarks (BLiMP, SyntaxGym) and every Hugging Face LM write *raw* text ("glass."),
while Brown is shipped tokenized ("glass .", ``` `` ```, ``''``). A model must see one form from
training to evaluation, so the ``raw`` text form (the default) detokenizes word lists with
:func:`detokenize_words` before the tokenizer ever sees them; the form is recorded in the tokenizer
and the prepared dataset (:data:`TEXT_FORM_RAW`), so that evaluation can warn about a mismatch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path

from structpe.io import open_text

FORMATS = ("lines", "text", "conllu", "raw-lines")
# structpe.text_formats' names -> the names above
PREPARE_NAMES = {"tokenized-lines": "lines", "raw-text": "text", "conllu": "conllu", "raw-lines": "raw-lines"}
TEXT_FORMS = ("raw", "tokenized")
# What a ``raw`` tokenizer / dataset records: the detokenizer and the version of its rules (bump
# the version when the rules below change, so prepared data built with older rules is rebuilt).
TEXT_FORM_RAW = {"text_form": "raw", "normalisation": "sacremoses-en+brown-quotes", "version": 1}
TEXT_FORM_TOKENIZED = {"text_form": "tokenized", "normalisation": "words joined with spaces", "version": 1}

# Brown / PTB quote tokens carry their direction; Moses only knows the undirected ``"`` (and would
# guess the direction by counting, which fails on the ~7% of Brown sentences whose quotation
# opens or closes in another sentence). They are detokenized as brackets, then written as ``"``.
_OPEN_QUOTES = {"``"}
_CLOSE_QUOTES = {"''"}
_QUOTE_STANDINS = {"``": "(", "''": ")"}
# clitics a tokenizer may split off; they attach to the previous word (Moses keeps "do n't")
_CLITICS = {"n't", "'s", "'re", "'ve", "'ll", "'d", "'m"}


def guess_format(path: str | Path) -> str:
    """``conllu`` for *.conllu(.gz), otherwise ``lines`` (the format of the shipped Brown files)."""
    name = Path(path).name.lower()
    if name.endswith(".conllu") or name.endswith(".conllu.gz"):
        return "conllu"
    return "lines"


def iter_units(path: str | Path, fmt: str) -> Iterator[str]:
    """Yield the sentences (``lines``, ``raw-lines``) or paragraphs (``text``) of one file, in order."""
    if fmt not in ("lines", "text", "raw-lines"):
        raise ValueError(f"iter_units reads 'lines', 'raw-lines' or 'text' files, not {fmt!r}")
    with open_text(path, "corpus file") as fh:
        if fmt in ("lines", "raw-lines"):
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


def iter_tokenizer_text(
    paths: Iterable[str | Path], fmt: str | None = None, text_form: str = "raw"
) -> Iterator[str]:
    """Text lines to train a tokenizer on, in ``text_form``: sentences of ``lines`` and CoNLL-U
    files are detokenized (``raw``) or their words joined with spaces (``tokenized``); ``text``
    paragraphs are raw already and are passed as they are."""
    for path in paths:
        f = fmt or guess_format(path)
        if f == "conllu":
            with open_text(path, "corpus file") as fh:
                words: list[str] = []
                for line in fh:
                    line = line.rstrip("\n")
                    if not line:
                        if words:
                            yield sentence_text(words, text_form)
                            words = []
                    elif not line.startswith("#"):
                        cols = line.split("\t")
                        if len(cols) >= 2 and cols[0].isdigit():
                            words.append(cols[1])
                if words:
                    yield sentence_text(words, text_form)
        elif f == "lines":
            for unit in iter_units(path, f):
                yield sentence_text(unit.split(), text_form)
        else:
            yield from iter_units(path, f)


@lru_cache(maxsize=1)
def _moses() -> object:
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang="en")


def normalize_words(words: Sequence[str]) -> list[str]:
    """Brown's word list in the form a raw text has: directed quotes become ``"``; the sentence end
    Brown doubles is written once: the period after an abbreviation (``Jr. .``) and a repeated
    final ``? ?`` / ``! !`` (``Why do you worry ? ?``; a closing quote may stand between them)."""
    return ['"' if words[i] in _OPEN_QUOTES or words[i] in _CLOSE_QUOTES else words[i] for i in _kept(words)]


def _kept(words: Sequence[str]) -> list[int]:
    """Indices of the words :func:`normalize_words` keeps."""
    keep = list(range(len(words)))
    quote = _OPEN_QUOTES | _CLOSE_QUOTES
    if len(words) > 1 and words[-1] == "." and words[-2].endswith(".") and len(words[-2]) > 1:
        return keep[:-1]
    end = len(words) - 1 - (len(words) > 1 and words[-1] in quote)  # last mark, before a final quote
    prev = end - 1 - (end > 1 and words[end - 1] in quote)
    if prev >= 0 and words[end] in ("?", "!") and words[prev] == words[end]:
        del keep[end]
    return keep


def detokenize_words(
    words: Sequence[str], *, brown: bool = True
) -> tuple[list[str], str, list[tuple[int, int]]]:
    """Raw text of a tokenized sentence, with every word's character span in that text.

    Returns (normalised words, text, spans): ``text[a:b] == words[i]`` for span (a, b) of word i,
    so a parser's tags stay aligned with the text. Spacing is decided by sacremoses' English
    detokenizer (punctuation, brackets, currency, percent), plus rules for what it does not know:
    directed quotes (see ``_QUOTE_STANDINS``) and split clitics (``n't``, ``'s``, ...). Moses only
    removes spaces (``unescape=False``), so the words are found again in order; a sentence where
    that ever failed would fall back to the words joined with spaces. ``brown=False`` skips
    :func:`normalize_words`, so the output has exactly the input words (benchmark text).
    """
    kept = [words[i] for i in _kept(words)] if brown else list(words)
    dropped = normalize_words(words) if brown else list(words)
    standins = [_QUOTE_STANDINS.get(w, w) for w in kept]
    text = _moses().detokenize(standins, unescape=False)
    spans: list[tuple[int, int]] = []
    pos = 0
    for w in standins:
        i = text.find(w, pos)
        if i < 0:  # not seen on Brown (tested); kept so that a new corpus never misaligns silently
            text = " ".join(dropped)
            return dropped, text, _joined_spans(dropped)
        spans.append((i, i + len(w)))
        pos = i + len(w)
    chars = list(text)
    for w, (a, _) in zip(kept, spans, strict=True):
        if w in _QUOTE_STANDINS:
            chars[a] = '"'
    text = "".join(chars)
    # clitics: drop the space Moses left before them
    for k in range(len(dropped) - 1, 0, -1):
        if dropped[k].lower() in _CLITICS and spans[k][0] > spans[k - 1][1]:
            gap = spans[k][0] - spans[k - 1][1]
            text = text[: spans[k - 1][1]] + text[spans[k][0] :]
            spans = spans[:k] + [(a - gap, b - gap) for a, b in spans[k:]]
    return dropped, text, spans


def _joined_spans(words: Sequence[str]) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for w in words:
        spans.append((pos, pos + len(w)))
        pos += len(w) + 1
    return spans


def sentence_text(words: Sequence[str], text_form: str) -> str:
    """One sentence's words in the given text form (``raw``: detokenized; ``tokenized``: joined)."""
    if text_form not in TEXT_FORMS:
        raise ValueError(f"text_form must be one of {TEXT_FORMS}, got {text_form!r}")
    return detokenize_words(words)[1] if text_form == "raw" else " ".join(words)


def text_form_record(text_form: str) -> dict[str, object]:
    """What a tokenizer / prepared dataset records about its text form."""
    return dict(TEXT_FORM_RAW if text_form == "raw" else TEXT_FORM_TOKENIZED)
