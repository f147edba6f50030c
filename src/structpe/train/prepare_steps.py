"""The three steps of ``structpe prepare`` on a batch of sentences: parse, align, pack.

Pipeline, per split (each step a ``datasets`` map; steps 1-2 run on ``num_proc`` processes):

1. parse    sentence units -> words + hexatags with the chosen parser: ``gold`` (CoNLL-U trees),
            ``spacy`` or ``hexatagger``. ``lines`` input (Brown) is pre-tokenized, one sentence per
            line, and is parsed as given (``parse_words``); ``text`` input (Gutenberg, any prose) is
            split into paragraphs at blank lines, each cut into sentences of words by
            :func:`structpe.syntax.sentences.split_sentences` (one rule whatever the parser), which the
            parser then parses (``parse_words``). Non-projective parses are lifted (arc lifting,
            counted in the metadata).
2. align    words -> subword ids with the run's tokenizer; each word's tags go on its *first*
            subword, every other position gets -100. Text form ``raw`` (the default of tokenizers
            trained by ``structpe tokenizer train``): the sentence is detokenized (``glass.``, ``"``;
            :func:`structpe.train.corpus.detokenize_words`), the *text* is tokenized as evaluation
            tokenizes it, and each word's tags go on the first token overlapping the word's
            characters (:func:`structpe.eval.scoring.scorer.align_tags_by_offsets`, the scorers' rule).
            Text form ``tokenized``: words are tokenized pre-split
            (``structpe.syntax.alignment.align_tags``), i.e. trained on ``glass .``.
3. pack     sentences, in corpus order, are packed greedily into sequences of at most ``seq_len``
            tokens. Layout (``bos="sequence"``, the default):

                BOS s1 EOS s2 EOS ... sk EOS           (encoders: [CLS] s1 [SEP] s2 [SEP] ...)

            with ``bos="sentence"`` every sentence gets its own BOS: ``BOS s1 EOS BOS s2 EOS ...``.
            A sentence never straddles two sequences unless it alone exceeds the capacity; then it
            is cut into pieces at subword boundaries, each piece opening a new sequence and only the
            last one closed by EOS (so every word is kept, and the ids of consecutive pieces concatenate
            back to the sentence). Special tokens carry no tags.

Each step is a map function over a batch; the parser and tokenizer are loaded once per process and
cached. ``structpe.train.prepare`` drives the steps per split and writes the result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from structpe.syntax.sentences import split_sentences
from structpe.train.corpus import detokenize_words, iter_units
from structpe.train.prepare_deprels import WORD_COLUMNS, word_deprel_columns
from structpe.train.prepare_settings import COLUMNS, IGNORE_INDEX

# -- step 1: parse ------------------------------------------------------------------------------------
_CACHE: dict[Any, Any] = {}


def _get_parser(name: str, kwargs: dict[str, Any]) -> Any:
    key = ("parser", name, json.dumps(kwargs, sort_keys=True))
    if key not in _CACHE:
        from structpe.parser.registry import get_parser

        _CACHE[key] = get_parser(name, **kwargs)
    return _CACHE[key]


def get_tokenizer(path: str) -> Any:
    """The tokenizer at ``path``, loaded once per process (each ``datasets`` worker keeps its own)."""
    key = ("tokenizer", path)
    if key not in _CACHE:
        from structpe.train.tokenizer import load_tokenizer

        _CACHE[key] = load_tokenizer(path)
    return _CACHE[key]


def _sentence_columns(sentences: Iterable[Any]) -> dict[str, list]:
    out: dict[str, list] = {"words": [], "terminals": [], "nonterminals": [], "lifted": []}
    out.update({c: [] for c in WORD_COLUMNS})
    for s in sentences:
        if len(s.words) == 0:
            continue
        out["words"].append(list(s.words))
        out["terminals"].append(list(s.terminals))
        out["nonterminals"].append(list(s.nonterminals))
        out["lifted"].append(int(getattr(s, "lifted_arcs", 0) > 0))
        for c, v in zip(WORD_COLUMNS, word_deprel_columns(s.deprels), strict=True):
            out[c].append(v)
    return out


def parse_batch(
    batch: dict[str, list],
    parser: str,
    parser_kwargs: dict[str, Any],
    tags: str = "parse",
    max_words: int | None = None,
) -> dict:
    """Parse a batch of units; the number of output rows (sentences) may differ from the input.
    ``tags="prefix"``: every word's tags come from the parse of its sentence's prefix
    (:class:`structpe.parser.tag_controls.PrefixParser`); ``max_words``: the sentence cap of raw
    text (:func:`structpe.syntax.sentences.split_sentences`)."""
    p = _get_parser(parser, parser_kwargs)
    if tags == "prefix":
        from structpe.parser.tag_controls import PrefixParser

        p = PrefixParser(p)
    # raw paragraphs: cut into sentences of words by the corpus rule; otherwise pre-tokenized
    # sentences (Brown lines, or CoNLL-U words re-parsed by a predicted parser)
    if "text" in batch:
        words = [s for para in split_sentences(batch["text"], max_words) for s in para]
        return _sentence_columns(p.parse_words(words) if words else [])
    cols = _sentence_columns(p.parse_words(batch["words_in"]))
    if "raw_text" in batch:
        _keep_raw_text(batch, cols)
    return cols


def _keep_raw_text(batch: dict[str, list], cols: dict[str, list]) -> None:
    """Carry each sentence's detokenized text past the parser (it must return one parse per input)."""
    if cols["words"] != [list(w) for w in batch["words_in"]]:
        raise ValueError(
            "the parser changed or dropped sentences, so their detokenized text no longer matches; "
            "use nonprojective='lift' (or text_form='tokenized')"
        )
    cols["raw_text"] = list(batch["raw_text"])


def gold_units(paths: Sequence[Path], policy: str, max_units: int | None) -> tuple[dict[str, list], int]:
    """Gold CoNLL-U trees -> tagged sentences under the non-projectivity policy; also the input count."""
    from structpe.syntax.conllu_io import read_conllu

    p = _get_parser("gold", {"nonprojective": policy})
    conllu = [s for path in paths for s in read_conllu(path)]
    if max_units is not None:
        conllu = conllu[:max_units]
    return _sentence_columns(p.parse_conllu_sentences(conllu)), len(conllu)


# -- step 2: align ------------------------------------------------------------------------------------
def align_batch(batch: dict[str, list], tokenizer_path: str, text_form: str = "tokenized") -> dict:
    """The align step: word tags -> first-subword tag ids (by words, or by character offsets for raw text)."""
    if text_form == "raw":
        return _align_raw_batch(batch, tokenizer_path)
    from structpe.syntax.alignment import align_tags

    tok = get_tokenizer(tokenizer_path)
    enc = align_tags(tok, batch["words"], batch["terminals"], batch["nonterminals"], add_special_tokens=False)
    return {
        "input_ids": enc["input_ids"],
        "terminal_ids": enc["terminal_ids"],
        "nonterminal_ids": enc["nonterminal_ids"],
        "unaligned_words": [0] * len(enc["input_ids"]),
        "tagged_words": [[True] * len(w) for w in batch["words"]],  # every word has a first subword
    }


def _align_raw_batch(batch: dict[str, list], tokenizer_path: str) -> dict:
    """Tokenize each sentence's raw text exactly as the scorers do and tag first tokens by offsets.

    Sentences of Brown carry the text detokenized before parsing (``raw_text``); for the others
    (parsed from CoNLL-U or raw prose) the parser's words are detokenized here.
    """
    from structpe.syntax.alignment import align_tags_by_offsets, first_tokens_of_words

    tok = get_tokenizer(tokenizer_path)
    texts = batch.get("raw_text") or [detokenize_words(w)[1] for w in batch["words"]]
    enc = tok(texts, add_special_tokens=False, return_offsets_mapping=True)
    out: dict[str, list] = {"input_ids": enc["input_ids"], "terminal_ids": [], "nonterminal_ids": [],
                            "unaligned_words": [], "tagged_words": []}
    for i, text in enumerate(texts):
        parse = {k: batch[k][i] for k in ("words", "terminals", "nonterminals")}
        t, n, missed = align_tags_by_offsets(text, enc["offset_mapping"][i], parse)
        out["terminal_ids"].append(t)
        out["nonterminal_ids"].append(n)
        out["unaligned_words"].append(missed)
        # which words got a token (and so a tag): their DEPREL labels follow the tags exactly
        firsts = first_tokens_of_words(text, enc["offset_mapping"][i], parse["words"])
        out["tagged_words"].append([f is not None for f in firsts])
    return out


def lines_units(paths: Sequence[Path], text_form: str) -> dict[str, list]:
    """Sentences of ``lines`` files: their words, and (``raw``) Brown-normalised words + raw text."""
    words = [u.split() for p in paths for u in iter_units(p, "lines")]
    if text_form != "raw":
        return {"words_in": words}
    detok = [detokenize_words(w) for w in words]
    return {"words_in": [d[0] for d in detok], "raw_text": [d[1] for d in detok]}


# -- step 3: pack -------------------------------------------------------------------------------------
def pack_sentences(
    sentences: Iterable[tuple[list[int], list[int], list[int]]],
    seq_len: int,
    bos_id: int,
    eos_id: int,
    bos: str = "sequence",
) -> list[dict[str, list[int]]]:
    """Greedy in-order packing (module docstring); returns rows of ids and the two tag columns."""
    rows: list[dict[str, list[int]]] = []
    cur: dict[str, list[int]] = {c: [] for c in COLUMNS}

    def push(ids: Sequence[int], t: Sequence[int], n: Sequence[int]) -> None:
        cur["input_ids"].extend(ids)
        cur["terminal_ids"].extend(t)
        cur["nonterminal_ids"].extend(n)

    def special(tok: int) -> None:
        push([tok], [IGNORE_INDEX], [IGNORE_INDEX])

    def flush() -> None:
        nonlocal cur
        if cur["input_ids"]:
            rows.append(cur)
        cur = {c: [] for c in COLUMNS}

    per_sentence_bos = bos == "sentence"
    for ids, t, n in sentences:
        # tokens this sentence needs in the current sequence: [BOS] + ids + EOS
        need = len(ids) + 1 + (1 if (per_sentence_bos or not cur["input_ids"]) else 0)
        if cur["input_ids"] and len(cur["input_ids"]) + need > seq_len:
            flush()
        if not cur["input_ids"] or per_sentence_bos:
            special(bos_id)
        start = 0
        while len(ids) - start + 1 > seq_len - len(cur["input_ids"]):
            room = seq_len - len(cur["input_ids"])  # too long: fill this sequence, continue in the next
            push(ids[start : start + room], t[start : start + room], n[start : start + room])
            start += room
            flush()
            special(bos_id)
        push(ids[start:], t[start:], n[start:])
        special(eos_id)
    flush()
    return rows


def pack_batch(batch: dict[str, list], seq_len: int, bos_id: int, eos_id: int, bos: str) -> dict:
    """The pack step: aligned sentences -> rows of ``seq_len`` tokens (``COLUMNS``)."""
    rows = pack_sentences(
        zip(batch["input_ids"], batch["terminal_ids"], batch["nonterminal_ids"], strict=True),
        seq_len, bos_id, eos_id, bos,
    )
    return {c: [r[c] for r in rows] for c in COLUMNS}


PACK_BATCH = 4096  # sentences per packing batch: fixed, so the output does not depend on num_proc
