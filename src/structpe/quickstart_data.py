"""Stage 1 of ``structpe quickstart``: Brown, tokenized, hexatagged and packed (docs/quickstart.md).

Byte-level BPE on Brown train, all in *raw* text form (detokenized, the form BLiMP / SyntaxGym /
any Hugging Face LM use); Brown hexatagged with spaCy or the packaged hexatagger (one cached
parser for every stage) and
packed with ``structpe prepare``; the Brown test sentences for perplexity. Re-running reuses the
prepared data. The later stages live in ``structpe.quickstart.run``.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structpe.data.paths import data_root
from structpe.io import atomic_write_text
from structpe.quickstart.config import QuickstartConfig


@dataclass
class PreparedBrown:
    """What :func:`prepare_brown` hands to training and evaluation."""

    dataset: Path
    tokenizer_dir: Path
    test_sentences: list[Any]  # parsed Brown test sentences, raw text in ``meta["text"]``


class CachedParser:
    """A parser that parses each distinct text once: the same BLiMP / SyntaxGym sentences are
    scored by several models and likelihood modes, and parsing them is the slow part."""

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self.cache: dict[tuple[str, bool], Any] = {}

    def parse_text(self, texts: Sequence[str], *, split_sentences: bool = True) -> list[Any]:
        todo = list(dict.fromkeys(t for t in texts if (t, split_sentences) not in self.cache))
        if todo:
            parsed = self.parser.parse_text(todo, split_sentences=split_sentences)
            if len(parsed) != len(todo):
                raise ValueError(f"the parser returned {len(parsed)} parses for {len(todo)} texts")
            self.cache.update({(t, split_sentences): p for t, p in zip(todo, parsed, strict=True)})
        return [self.cache[(t, split_sentences)] for t in texts]

    def parse_words(self, sentences: Sequence[Sequence[str]]) -> list[Any]:
        return self.parser.parse_words(sentences)


def _step(name: str) -> float:
    print(f"\n== quickstart: {name}", flush=True)
    return time.time()


def parse_token_lines(parser: Any, lines: Sequence[str]) -> list[Any]:
    """Whitespace-tokenized lines (Brown's form) parsed and scored in raw text form: each sentence
    keeps the parser's words and carries its detokenized text in ``meta["text"]``, the form the
    tokenizer and the model were trained on (scoring ``glass .`` would inflate perplexity)."""
    from structpe.train.corpus import detokenize_words

    detok = [detokenize_words(line.split()) for line in lines]
    sents = parser.parse_words([d[0] for d in detok])
    for s, (_, text, _) in zip(sents, detok, strict=True):
        s.meta = {**(getattr(s, "meta", None) or {}), "text": text}
    return sents


def _brown_test(path: Path, limit: int, parser: Any) -> list[Any]:
    """The first ``limit`` Brown test sentences, parsed, with their raw text for scoring."""
    lines = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.split():
                lines.append(line)
            if len(lines) >= limit:
                break
    return parse_token_lines(parser, lines)


def prepare_brown(cfg: QuickstartConfig, parser: Any, timings: dict[str, float]) -> PreparedBrown:
    """Stage 1: tokenizer and prepared data in raw text form (reused when already there)."""
    from structpe.train.prepare import prepare
    from structpe.train.prepare_settings import PrepareSettings, corpus_splits
    from structpe.train.tokenizer import train_tokenizer

    out = Path(cfg.out)
    root = data_root(cfg.data_dir)
    t = _step("tokenizer (byte-level BPE on detokenized Brown train)")
    splits, fmt = corpus_splits("brown", root, splits=("train", "validation", "test"))
    tok_dir = out / "tokenizer"
    if not (tok_dir / "tokenizer.json").is_file():
        train_tokenizer(
            splits["train"], tok_dir, kind="bpe", vocab_size=cfg.vocab_size, input_format=fmt,
            text_form="raw", show_progress=cfg.progress,
        )
    timings["tokenizer_s"] = time.time() - t

    t = _step(f"hexatag + pack Brown with {cfg.parser} ({cfg.train_sentences} train sentences)")
    common = {"parser": cfg.parser, "input_format": fmt, "seq_len": cfg.seq_len, "text_form": "raw"}
    # one parser process per core: the parse is the slow part, and its output does not depend on it
    train_data = prepare(
        {"train": splits["train"]}, tok_dir, out / "data" / "train",
        settings=PrepareSettings(**common, max_units=cfg.train_sentences), num_proc=os.cpu_count() or 1,
    )
    valid_data = prepare(
        {"validation": splits["validation"]}, tok_dir, out / "data" / "validation",
        settings=PrepareSettings(**common, max_units=cfg.valid_sentences),
    )
    dataset = _merge_prepared(train_data, valid_data, out / "data" / "merged")
    test = _brown_test(splits["test"][0], cfg.ppl_sentences, parser)
    timings["prepare_s"] = time.time() - t
    return PreparedBrown(dataset, tok_dir, test)


def _merge_prepared(train: Path, valid: Path, dest: Path) -> Path:
    """One dataset folder with both splits (train and validation were prepared with different caps)."""
    from datasets import DatasetDict

    from structpe.train.prepare import load_prepared
    from structpe.train.prepare_settings import METADATA_FILE

    dtrain, meta = load_prepared(train, splits=("train",))
    dvalid, vmeta = load_prepared(valid, splits=("validation",))
    key = f"{meta['fingerprint']}+{vmeta['fingerprint']}"
    if (dest / METADATA_FILE).is_file() and json.loads((dest / METADATA_FILE).read_text()).get(
        "fingerprint"
    ) == key:
        return dest
    merged = DatasetDict({"train": dtrain["train"], "validation": dvalid["validation"]})
    merged.save_to_disk(str(dest))
    meta = {
        **meta,
        "fingerprint": key,
        "stats": {**meta.get("stats", {}), **vmeta.get("stats", {})},
        "inputs": {**meta.get("inputs", {}), **vmeta.get("inputs", {})},
    }
    atomic_write_text(dest / METADATA_FILE, json.dumps(meta, indent=2) + "\n")
    return dest
