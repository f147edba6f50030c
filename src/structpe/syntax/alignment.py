"""Word-level hexatags -> per-token tag ids: the one home of tag alignment (docs/design.md §1 "Subwords").

Only a word's **first subword** carries its tags (the mask m_p of the prior, SiPE §3.1); every other
position -- continuation subwords, special tokens, padding -- gets -100, which is also the ignore
index of the auxiliary tag losses. Two ways to find a word's tokens:

* by word lists (``align_tags``, ``align_tagged``): the fast tokenizer's own ``word_ids()`` /
  ``sequence_ids()`` (``is_split_into_words=True``), for single sentences and sentence pairs, batched;
* by character offsets (``align_tags_by_offsets``): the words are located in a raw text by
  character search and a word's tags go on the first token overlapping it, so the text is scored
  exactly as written (what SyntaxGym's region offsets and raw-text training data need) and any
  tokenizer works.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from structpe.errors import StructpeError
from structpe.syntax.hexatags import IGNORE_INDEX, nonterminal_ids, terminal_ids
from structpe.syntax.hexatags import NONTERMINAL_TO_ID as NONTERMINAL_IDS
from structpe.syntax.hexatags import TERMINAL_TO_ID as TERMINAL_IDS
from structpe.syntax.sentences import split_words

Tags = Sequence[int | str]


class AlignmentError(StructpeError):
    """Words and tags cannot be aligned: length mismatch, a word without tokens, or truncation."""


def _is_single(words: Any) -> bool:
    return len(words) == 0 or isinstance(words[0], str)


def _check_lengths(name: str, words: Sequence[Sequence[str]], terms: Any, nts: Any) -> tuple[list, list]:
    if len(terms) != len(words) or len(nts) != len(words):
        raise AlignmentError(
            f"{name}: {len(words)} sentences but {len(terms)} terminal and {len(nts)} non-terminal rows"
        )
    t_rows, n_rows = [], []
    for b, (w, t, nt) in enumerate(zip(words, terms, nts, strict=True)):
        if len(t) != len(w) or len(nt) != len(w):
            raise AlignmentError(
                f"{name} sentence {b}: {len(w)} words but {len(t)} terminals and {len(nt)} non-terminals"
            )
        if not all(isinstance(x, str) for x in w):
            raise AlignmentError(f"{name} sentence {b}: words must be strings (is_split_into_words)")
        t_rows.append(terminal_ids(t))
        n_rows.append(nonterminal_ids(nt))
    return t_rows, n_rows


def first_subword_rows(
    word_ids: Sequence[int | None],
    sequence_ids: Sequence[int | None] | None,
    tags: Sequence[Sequence[int]],
) -> tuple[list[int], list[set[int]]]:
    """One row of tag ids: ``tags[seq][word]`` at each word's first token, -100 elsewhere.

    Also returns, per sequence, the set of word indices that received a tag.
    """
    row = [IGNORE_INDEX] * len(word_ids)
    seen: list[set[int]] = [set() for _ in tags]
    prev: tuple[int, int] | None = None
    for j, w in enumerate(word_ids):
        if w is None:
            prev = None
            continue
        s = sequence_ids[j] if sequence_ids is not None else 0
        s = 0 if s is None else s
        key = (s, w)
        if key != prev and w not in seen[s]:
            row[j] = tags[s][w]
            seen[s].add(w)
        prev = key
    return row, seen


def align_tags(
    tokenizer: Any,
    words: Sequence[str] | Sequence[Sequence[str]],
    terminals: Tags | Sequence[Tags],
    nonterminals: Tags | Sequence[Tags],
    pair: tuple[Any, Any, Any] | None = None,
    max_length: int | None = None,
    *,
    padding: bool | str | None = None,
    return_tensors: str | None = None,
    **tokenizer_kwargs: Any,
) -> Any:
    """Tokenize pre-split words and add ``terminal_ids`` / ``nonterminal_ids`` aligned to the tokens.

    ``words`` is one sentence (list of str) or a batch (list of lists); ``terminals`` and
    ``nonterminals`` match it (ids or names). ``pair`` = (words_b, terminals_b, nonterminals_b) for
    sentence pairs, shaped like the first sentences. ``max_length`` turns on truncation; if it would
    drop a tagged word an AlignmentError names the sentence index (raise ``max_length`` or split the
    input). Returns the tokenizer's BatchEncoding with the two tag rows added (lists, or tensors when
    ``return_tensors`` is given; padding then defaults to ``True``).
    """
    from transformers import BatchEncoding

    if not getattr(tokenizer, "is_fast", False):
        raise TypeError(
            f"{type(tokenizer).__name__} is not a fast tokenizer: word alignment needs word_ids() "
            "(load it with use_fast=True or wrap a `tokenizers` object in PreTrainedTokenizerFast)"
        )
    single = _is_single(words)
    batch_words = [list(words)] if single else [list(w) for w in words]
    batch_t = [terminals] if single else list(terminals)
    batch_n = [nonterminals] if single else list(nonterminals)
    seqs = [_check_lengths("sentences", batch_words, batch_t, batch_n)]
    pair_words = None
    if pair is not None:
        pw, pt, pn = pair
        if _is_single(pw) != single:
            raise AlignmentError("pair must be batched exactly like the first sentences")
        pair_words = [list(pw)] if single else [list(w) for w in pw]
        if len(pair_words) != len(batch_words):
            raise AlignmentError(f"{len(batch_words)} first sentences but {len(pair_words)} pair sentences")
        seqs.append(
            _check_lengths("pair", pair_words, [pt] if single else list(pt), [pn] if single else list(pn))
        )
    if padding is None:
        padding = return_tensors is not None
    kwargs = dict(tokenizer_kwargs)
    if max_length is not None:
        kwargs.setdefault("truncation", True)
        kwargs["max_length"] = max_length
    enc = tokenizer(
        batch_words, pair_words, is_split_into_words=True, padding=padding, **kwargs
    )
    t_out, n_out = [], []
    for b in range(len(batch_words)):
        wids = enc.word_ids(b)
        sids = enc.sequence_ids(b)
        t_tags = [seqs[0][0][b]] + ([seqs[1][0][b]] if pair_words else [])
        n_tags = [seqs[0][1][b]] + ([seqs[1][1][b]] if pair_words else [])
        t_row, seen = first_subword_rows(wids, sids, t_tags)
        n_row, _ = first_subword_rows(wids, sids, n_tags)
        for s, sent_words in enumerate([batch_words[b]] + ([pair_words[b]] if pair_words else [])):
            if len(seen[s]) != len(sent_words):
                _missing_error(tokenizer, b, s, sent_words, seen[s], max_length)
        t_out.append(t_row)
        n_out.append(n_row)
    data = dict(enc)
    data["terminal_ids"] = t_out
    data["nonterminal_ids"] = n_out
    if single and return_tensors is None:
        data = {k: v[0] for k, v in data.items()}
    # tensors are always [batch, length] (a single sentence gives batch 1), as HF tokenizers do
    return BatchEncoding(data, encoding=enc.encodings, tensor_type=return_tensors)


def _missing_error(
    tokenizer: Any, b: int, s: int, words: Sequence[str], seen: set[int], max_length: int | None
) -> None:
    missing = [i for i in range(len(words)) if i not in seen]
    which = "pair sentence" if s else "sentence"
    if max_length is not None:
        full = tokenizer(list(words), is_split_into_words=True, add_special_tokens=False)
        present = {w for w in full.word_ids() if w is not None}
        if all(i in present for i in missing):
            raise AlignmentError(
                f"{which} {b}: truncation to max_length={max_length} drops {len(missing)} tagged word(s) "
                f"from word {missing[0]} ({words[missing[0]]!r}) on; raise max_length or split the input"
            )
    i = missing[0]
    raise AlignmentError(
        f"{which} {b}: word {i} ({words[i]!r}) produced no tokens with {type(tokenizer).__name__}, "
        "so its tags cannot be placed; clean or drop such words before tagging"
    )


def align_tagged(
    tokenizer: Any, sentences: Sequence[Any], pairs: Sequence[Any] | None = None, **kwargs: Any
) -> Any:
    """``align_tags`` for a batch of TaggedSentence objects (and optional pair sentences)."""
    words = [s.words for s in sentences]
    t = [s.terminals for s in sentences]
    n = [s.nonterminals for s in sentences]
    pair = None
    if pairs is not None:
        pair = ([p.words for p in pairs], [p.terminals for p in pairs], [p.nonterminals for p in pairs])
    return align_tags(tokenizer, words, t, n, pair=pair, **kwargs)


def tag_id(value: Any, table: dict[str, int], what: str) -> int:
    """Canonical id of a tag given as a name ("tl") or an int (docs/design.md §1 ids)."""
    if isinstance(value, str):
        if value not in table:
            raise ValueError(f"unknown {what} tag {value!r}; expected one of {sorted(table)}")
        return table[value]
    v = int(value)
    if v != IGNORE_INDEX and not 0 <= v < len(table):
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
    t_out = [IGNORE_INDEX] * len(offsets)
    n_out = [IGNORE_INDEX] * len(offsets)
    firsts = first_tokens_of_words(text, offsets, words, scorable)
    for tok, t, nt in zip(firsts, terms, nonterms, strict=True):
        if tok is not None:
            t_out[tok], n_out[tok] = t, nt
    return t_out, n_out, firsts.count(None)


def rule_word_starts(prompt: str, offsets: Sequence[tuple[int, int]]) -> tuple[list[int], list[str]]:
    """The first token of each word of ``prompt`` by ``structpe tag``'s word rule (``split_words``;
    generation's prompts) and the words' texts; a word whose first token is the previous word's (a
    subword across a word boundary) joins that word,
    so every word starts at a token and keeps its characters (never a decoded byte piece)."""
    words = split_words(prompt)
    spans = word_spans(prompt, words)
    starts: list[int] = []
    out: list[str] = []
    begin = 0
    for tok, span in zip(first_tokens_of_words(prompt, offsets, words), spans, strict=True):
        if span is None:  # not a substring of the prompt: spaCy's words always are
            continue
        if tok is None and out:
            out[-1] = prompt[begin : span[1]]
            continue
        if tok is not None:
            starts.append(tok)
            begin = span[0]
            out.append(prompt[span[0] : span[1]])
    return starts, out
