"""The hexatagger's subword tokenizer: train, save, load, and encode pre-split words.

A cased WordPiece vocabulary (Hugging Face ``tokenizers``) saved next to the model as
``tokenizer.json`` + ``tokenizer_config.json``, so ``transformers.AutoTokenizer`` loads it too.
``encode_words`` returns each word's first-subword position: the hexatagger reads a word's tags
there (docs/design.md §1). Separate from the network (``structpe.parser.model``) because
training builds the vocabulary before any model exists.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from structpe.io import atomic_files

TOKENIZER_NAME = "tokenizer.json"


SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_tokenizer(texts: Any, vocab_size: int = 16000, min_frequency: int = 2) -> Any:
    """A cased WordPiece vocabulary trained on ``texts`` (an iterator of strings), [PAD] = id 0.

    Cased because capitalisation is a strong syntactic cue (proper nouns, sentence starts) for a
    parser without pretrained embeddings; BERT-style pre-tokenisation splits punctuation.
    """
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece
    from tokenizers.trainers import WordPieceTrainer

    tok = Tokenizer(WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, lowercase=False, strip_accents=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return tok


def save_tokenizer(tokenizer: Any, directory: Path) -> None:
    """Save as a Hugging Face fast tokenizer (tokenizer.json + tokenizer_config.json)."""
    from transformers import PreTrainedTokenizerFast

    raw = getattr(tokenizer, "backend_tokenizer", tokenizer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    with atomic_files(directory) as staging:
        fast.save_pretrained(str(staging))


def load_tokenizer(directory: str | os.PathLike) -> Any:
    """The raw ``tokenizers.Tokenizer`` of a saved folder (the fastest path for batch encoding)."""
    from tokenizers import Tokenizer

    path = Path(directory) / TOKENIZER_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the model folder must contain its tokenizer")
    return Tokenizer.from_file(str(path))


def encode_words(tokenizer: Any, sentences: Sequence[Sequence[str]]) -> list[tuple[list[int], list[int]]]:
    """Subword ids with [CLS]/[SEP] and each word's first-subword position, for pre-split sentences.

    A word the normaliser erases entirely (e.g. only control characters) is replaced by [UNK], so
    every word owns exactly one tagged position (the mask m_p of docs/design.md §1).
    """
    encs = tokenizer.encode_batch([list(s) for s in sentences], is_pretokenized=True, add_special_tokens=True)
    out = []
    for words, enc in zip(sentences, encs, strict=True):
        firsts = _first_positions(enc.word_ids, len(words))
        if firsts is None:
            fixed = [w if tokenizer.encode(w, add_special_tokens=False).ids else "[UNK]" for w in words]
            enc = tokenizer.encode(fixed, is_pretokenized=True, add_special_tokens=True)
            firsts = _first_positions(enc.word_ids, len(words))
            if firsts is None:
                raise ValueError(f"could not align subwords to words for sentence {list(words)!r}")
        out.append((list(enc.ids), firsts))
    return out


def fit_subwords(ids: list[int], firsts: list[int], limit: int) -> tuple[list[int], list[int]]:
    """``encode_words``'s output shortened to at most ``limit`` positions by keeping only the first
    ``c`` subwords of every word, with the largest ``c`` that fits: only the longest words lose their
    tails (a table of contents' dot leaders run to 7.7 subwords per word), and every word keeps the
    first subword its tags are read at. Unchanged when it fits; a ValueError when even one subword
    per word does not (then the sentence itself has to be cut)."""
    if len(ids) <= limit:
        return ids, firsts
    n = len(firsts)
    if n + 2 > limit:
        raise ValueError(f"{n} words; the model takes at most {limit - 2} (cut the sentence)")
    bounds = [*firsts, len(ids) - 1]  # word w owns ids[bounds[w]:bounds[w + 1]]; the last id is [SEP]
    lengths = [bounds[w + 1] - bounds[w] for w in range(n)]
    cap = max(lengths)
    while cap > 1 and sum(min(m, cap) for m in lengths) + 2 > limit:
        cap -= 1
    out, new_firsts = [ids[0]], []
    for w in range(n):
        new_firsts.append(len(out))
        out.extend(ids[bounds[w] : bounds[w] + min(lengths[w], cap)])
    out.append(ids[-1])
    return out, new_firsts


def _first_positions(word_ids: Sequence[int | None], n_words: int) -> list[int] | None:
    firsts = [-1] * n_words
    for pos, w in enumerate(word_ids):
        if w is not None and firsts[w] < 0:
            firsts[w] = pos
    return None if (n_words and min(firsts) < 0) else firsts
