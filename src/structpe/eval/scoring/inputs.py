"""What the scorers feed a model: parses of the texts, tags aligned to tokens, batches.

A SiPE model is conditioned on the hexatags of its input. The scorers take the parse of each text
(a :class:`TaggedSentence`-like object: ``words``, ``terminals``, ``nonterminals``) and put a
word's tags on the *first token that overlaps the word's characters* (docs/design.md §1: first
subword only; -100 elsewhere). Words are located in the text by character search, so the text is
scored exactly as written (this is what SyntaxGym's region offsets need) and any tokenizer works.
Shared by both scorers (``structpe.eval.scoring.scorer``, ``structpe.eval.scoring.masked``) and by GLUE
featurization, so it lives below them.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from typing import Any

from structpe.eval.scoring.types import IGNORE, Parser
from structpe.syntax.hexatags import NONTERMINAL_TO_ID as NONTERMINAL_IDS
from structpe.syntax.hexatags import TERMINAL_TO_ID as TERMINAL_IDS


def tag_id(value: Any, table: dict[str, int], what: str) -> int:
    """Canonical id of a tag given as a name ("tl") or an int (docs/design.md §1 ids)."""
    if isinstance(value, str):
        if value not in table:
            raise ValueError(f"unknown {what} tag {value!r}; expected one of {sorted(table)}")
        return table[value]
    v = int(value)
    if v != IGNORE and not 0 <= v < len(table):
        raise ValueError(f"{what} tag id {v} out of range 0..{len(table) - 1}")
    return v


def get_field(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


def word_spans(text: str, words: Sequence[str]) -> list[tuple[int, int] | None]:
    """Character span of each word in ``text``, searched left to right (None if not found).

    Parsers may normalise a word (e.g. quotes); such a word simply gets no span.
    """
    spans: list[tuple[int, int] | None] = []
    pos = 0
    for w in words:
        i = text.find(w, pos) if w else -1
        if i < 0:
            spans.append(None)
            continue
        spans.append((i, i + len(w)))
        pos = i + len(w)
    return spans


def first_tokens_of_words(
    text: str,
    offsets: Sequence[tuple[int, int]],
    words: Sequence[str],
    scorable: Sequence[bool] | None = None,
) -> list[int | None]:
    """Per word, the index of the first token overlapping it, or None (not found in the text, or
    sharing its first token with the previous word). ``scorable[i]`` False marks special tokens."""
    n = len(offsets)
    out: list[int | None] = []
    tok = 0
    taken = -1
    for span in word_spans(text, words):
        if span is None:
            out.append(None)
            continue
        ws, we = span
        while tok < n and (
            (scorable is not None and not scorable[tok])
            or offsets[tok][1] <= ws
            or offsets[tok][0] == offsets[tok][1]
        ):
            tok += 1
        if tok >= n or offsets[tok][0] >= we or tok == taken:
            out.append(None)
            continue
        out.append(tok)
        taken = tok
    return out


def align_tags_by_offsets(
    text: str,
    offsets: Sequence[tuple[int, int]],
    parse: Any,
    scorable: Sequence[bool] | None = None,
) -> tuple[list[int], list[int], int]:
    """Per-token terminal / non-terminal ids: a word's tags go on the first token overlapping it.

    ``offsets`` are the tokens' character spans in ``text``; ``scorable[i]`` False marks special
    tokens (never tagged). Returns (terminal_ids, nonterminal_ids, number of words that got no
    token — not found in the text, or sharing their first token with the previous word).
    """
    words = list(get_field(parse, "words"))
    terms = [tag_id(t, TERMINAL_IDS, "terminal") for t in get_field(parse, "terminals")]
    nonterms = [tag_id(t, NONTERMINAL_IDS, "non-terminal") for t in get_field(parse, "nonterminals")]
    if not (len(words) == len(terms) == len(nonterms)):
        raise ValueError(
            f"parse has {len(words)} words but {len(terms)} terminals / {len(nonterms)} non-terminals"
        )
    t_out = [IGNORE] * len(offsets)
    n_out = [IGNORE] * len(offsets)
    firsts = first_tokens_of_words(text, offsets, words, scorable)
    for tok, t, nt in zip(firsts, terms, nonterms, strict=True):
        if tok is not None:
            t_out[tok], n_out[tok] = t, nt
    return t_out, n_out, firsts.count(None)


def parse_texts(parser: Parser | None, texts: list[str]) -> list[Any] | None:
    """Parse texts (None when no parser is given)."""
    if parser is None:
        return None
    # one tree per text (a text that looks like two sentences is joined into one tree), since the
    # tags are aligned to that text's characters
    if "split_sentences" in inspect.signature(parser.parse_text).parameters:
        parses = parser.parse_text(list(texts), split_sentences=False)
    else:
        parses = parser.parse_text(list(texts))
    if len(parses) != len(texts):
        raise ValueError(
            f"parser returned {len(parses)} parses for {len(texts)} texts (a 'skip' non-projective "
            "policy drops sentences; use 'lift')"
        )
    return parses


def batched(seq: Sequence[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(seq), size):
        yield list(seq[i : i + size])


def _progress(iterable: Any, enabled: bool, desc: str, total: int | None = None) -> Any:
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, leave=False)
