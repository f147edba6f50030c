"""Tokenizers: byte-level BPE (decoders) and WordPiece (encoders) saved as HF fast tokenizers."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer


def test_bpe_specials_words_and_round_trip(bpe_tokenizer: Path) -> None:
    tok = AutoTokenizer.from_pretrained(str(bpe_tokenizer))
    assert tok.is_fast and len(tok) == 600
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "mask_token_id"):
        assert getattr(tok, name) is not None
    words = ["Unseen", "wordz", "like", "Zyx's", "2,000", "!"]
    enc = tok(words, is_split_into_words=True, add_special_tokens=False)
    assert {w for w in enc.word_ids() if w is not None} == set(range(len(words)))
    assert tok.decode(enc.input_ids).strip() == " ".join(words)  # byte-level: exact
    assert tok("hello world").input_ids == tok(["hello", "world"], is_split_into_words=True).input_ids


def test_wordpiece_bert_template(wordpiece_tokenizer: Path) -> None:
    tok = AutoTokenizer.from_pretrained(str(wordpiece_tokenizer))
    ids = tok("The cat sat .").input_ids
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert tok.bos_token_id == tok.cls_token_id and tok.mask_token_id is not None
    enc = tok(["un", "believable"], is_split_into_words=True, add_special_tokens=False)
    assert set(enc.word_ids()) == {0, 1}
