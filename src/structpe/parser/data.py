"""The hexatagger's training data: UD treebanks and LM corpora, hexatagged examples and batches.

UD English train splits are projectivised by arc lifting (Nivre & Nilsson 2005, via
``structpe.syntax.trees``) and hexatagged (docs/design.md §1); batches group sentences of similar
length under a subword budget (little padding). Kept apart from the recipe
(``structpe.parser.recipe``) and the training loop (``structpe.parser.train``)
because ``structpe parser eval`` and the benchmarks read treebanks without training.
"""

from __future__ import annotations

import gzip
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from structpe.errors import StructpeError
from structpe.parser.hexatagger import length_batches, pad_batch
from structpe.parser.tokenizer import encode_words
from structpe.syntax.conllu_io import ConlluSentence, read_conllu
from structpe.syntax.hexatags import IGNORE_INDEX, encode
from structpe.syntax.trees import projectivize_with_count

TREEBANK_DIRS = {
    "ewt": "UD_English-EWT",
    "gum": "UD_English-GUM",
    "lines": "UD_English-LinES",
    "partut": "UD_English-ParTUT",
    "atis": "UD_English-Atis",
    "eslspok": "UD_English-ESLSpok",
    "pud": "UD_English-PUD",
    "gentle": "UD_English-GENTLE",
}


CORPUS_FILES = {
    "brown": "corpus/brown/brown.train.txt.gz",
    "gutenberg": "corpus/gutenberg_nltk/gutenberg.train.txt.gz",
}


def treebank_file(root: Path | None, name: str, split: str) -> Path:
    """``root/ud/UD_English-X/en_x-ud-<split>.conllu.gz`` for a short name (ewt, gum, ...) or a path;
    ``root`` None: the data root's lookup (``data_root``), which is where the treebank is resolved."""
    p = Path(name)
    if p.suffix in (".conllu", ".gz") or p.is_file():
        if not p.is_file():
            raise FileNotFoundError(f"CoNLL-U file {p} not found")
        return p
    key = name.lower()
    if key not in TREEBANK_DIRS:
        raise StructpeError(
            f"unknown treebank {name!r}; expected one of {sorted(TREEBANK_DIRS)} or a .conllu path"
        )
    from structpe.data.paths import data_root

    folder = data_root(root, sub=f"ud/{TREEBANK_DIRS[key]}")  # then the fetch cache; errors name the fetch
    hits = sorted(folder.glob(f"*-ud-{split}.conllu*"))
    if not hits:
        raise FileNotFoundError(f"no {split} split for {name} in {folder}")
    return hits[0]


def load_sentences(path: Path, limit: int | None = None) -> list[ConlluSentence]:
    out = []
    for s in read_conllu(path):
        out.append(s)
        if limit is not None and len(out) >= limit:
            break
    return out


@dataclass
class Example:
    """One training sentence as subword ids with tag targets at first subwords (-100 elsewhere)."""

    ids: list[int]
    terminals: list[int]
    nonterminals: list[int]
    deprels: list[int]


def gold_tags(sent: ConlluSentence) -> tuple[list[int], list[int], int]:
    """Tags of the projectivised gold tree and the number of lifted arcs."""
    heads, lifts = projectivize_with_count(sent.heads)
    t, nt = encode(heads)
    return t, nt, lifts


def build_examples(
    sentences: Sequence[ConlluSentence],
    tokenizer: Any,
    deprel_to_id: dict[str, int] | None,
    max_subwords: int,
) -> tuple[list[Example], dict[str, int]]:
    """Hexatag, projectivise and subword-align; returns the examples and counts for the log."""
    stats = Counter()
    encoded = encode_words(tokenizer, [s.words for s in sentences])
    examples = []
    for sent, (ids, firsts) in zip(sentences, encoded, strict=True):
        if len(ids) > max_subwords:
            stats["skipped_long"] += 1
            continue
        t, nt, lifts = gold_tags(sent)
        stats["lifted_sentences"] += lifts > 0
        stats["lifted_arcs"] += lifts
        n = len(ids)
        tt, nn_, dd = [IGNORE_INDEX] * n, [IGNORE_INDEX] * n, [IGNORE_INDEX] * n
        for w, p in enumerate(firsts):
            tt[p], nn_[p] = t[w], nt[w]
            if deprel_to_id is not None:
                dd[p] = deprel_to_id.get(sent.deprels[w], IGNORE_INDEX)
        examples.append(Example(ids, tt, nn_, dd))
    stats["sentences"] = len(examples)
    return examples, dict(stats)


def corpus_lines(root: Path, names: Sequence[str]) -> Iterator[str]:
    for name in names:
        if name not in CORPUS_FILES:
            raise ValueError(f"unknown corpus {name!r}; expected one of {sorted(CORPUS_FILES)}")
        path = root / CORPUS_FILES[name]
        if not path.is_file():
            raise FileNotFoundError(f"corpus file {path} not found")
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield line.strip()


def collate(examples: Sequence[Example], pad: int) -> dict[str, torch.Tensor]:
    ids, mask = pad_batch([e.ids for e in examples], pad)
    out = {"input_ids": ids, "attention_mask": mask}
    for key in ("terminals", "nonterminals", "deprels"):
        t = torch.full(ids.shape, IGNORE_INDEX, dtype=torch.long)
        for r, e in enumerate(examples):
            v = getattr(e, key)
            t[r, : len(v)] = torch.as_tensor(v, dtype=torch.long)
        out[key] = t
    return out


def shuffled_batches(lengths: Sequence[int], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Length-bucketed batches (sorted with a little noise so they differ between epochs), shuffled."""
    noisy = [n + rng.random() * 4 for n in lengths]
    batches = length_batches(noisy, batch_tokens)  # type: ignore[arg-type]
    rng.shuffle(batches)
    return batches
