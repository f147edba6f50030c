"""Pretrained subword vectors for the BiLSTM hexatagger (``encoder: bilstm``).

A parser trained on ~28k treebank sentences sees most words a handful of times; vectors learned
from raw text give it what the trees cannot (Kiperwasser & Goldberg 2016; Dozat & Manning 2017
both start from pretrained word vectors). We train them with gensim's word2vec (skip-gram with
negative sampling: Mikolov et al. 2013) on the *same subword units* the tagger reads -- the cased
WordPiece tokens of the treebank text plus Brown and Gutenberg -- so every vocabulary entry the
corpora contain gets a vector, rare words are covered by their pieces, and no separate word
vocabulary or character model is needed at tagging time. Minutes on one CPU core.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def train_subword_vectors(
    tokenizer: Any,
    texts: Iterable[str],
    dim: int = 100,
    epochs: int = 5,
    window: int = 5,
    min_count: int = 2,
    seed: int = 0,
    workers: int = 1,
) -> tuple[np.ndarray, dict[str, int]]:
    """word2vec on ``tokenizer``'s subword tokens of ``texts``; returns a [vocab_size, dim] float32
    table aligned with the tokenizer's ids (zero rows for ids without a vector), scaled to unit
    standard deviation so it matches the scale of the LSTM's other inputs, and counts for the log."""
    from gensim.models import Word2Vec

    texts = list(texts)
    sentences = [enc.tokens for enc in tokenizer.encode_batch(texts, add_special_tokens=False)]
    sentences = [s for s in sentences if s]
    w2v = Word2Vec(
        sentences=sentences,
        vector_size=dim,
        window=window,
        min_count=min_count,
        sg=1,
        negative=5,
        epochs=epochs,
        seed=seed,
        workers=workers,
    )
    table = np.zeros((tokenizer.get_vocab_size(), dim), dtype=np.float32)
    covered = 0
    for token, idx in tokenizer.get_vocab().items():
        if token in w2v.wv.key_to_index:
            table[idx] = w2v.wv[token]
            covered += 1
    std = float(table[table.any(-1)].std()) if covered else 1.0
    table /= max(std, 1e-8)
    stats = {
        "vector_sentences": len(sentences),
        "vector_tokens": sum(len(s) for s in sentences),
        "vocab_with_vectors": covered,
    }
    return table, stats
