"""First-subword alignment with a tiny WordPiece tokenizer trained in the test (no downloads)."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from structpe.syntax.alignment import AlignmentError, align_tagged, align_tags
from structpe.syntax.hexatags import encode
from structpe.syntax.tagged import TaggedSentence

CORPUS = ["she watches funny videos", "I saw dogs with hats", "the cat sat on the mat"] * 20


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tok.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=40, special_tokens=specials,
                                                              show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


S1 = TaggedSentence.from_heads(["she", "watches", "funny", "videos"], [2, 0, 4, 2])
S2 = TaggedSentence.from_heads(["I", "saw", "dogs", "with", "hats"], [2, 0, 2, 5, 3])


def check_row(enc, b: int, seqs: list[TaggedSentence], t_row, n_row) -> None:
    """Tags sit exactly on each word's first token; everything else is -100."""
    wids, sids = enc.word_ids(b), enc.sequence_ids(b)
    prev = None
    for j, (w, s) in enumerate(zip(wids, sids, strict=True)):
        first = w is not None and (s, w) != prev
        prev = None if w is None else (s, w)
        if first:
            assert t_row[j] == seqs[s].terminals[w] and n_row[j] == seqs[s].nonterminals[w]
        else:
            assert t_row[j] == -100 and n_row[j] == -100
    for s, sent in enumerate(seqs):
        assert sum(1 for j, x in enumerate(t_row) if x != -100 and sids[j] == s) == len(sent)


def test_single_sentence(tokenizer) -> None:
    enc = align_tags(tokenizer, S1.words, S1.terminal_names, S1.nonterminal_names)  # names work
    assert len(enc["terminal_ids"]) == len(enc["input_ids"])
    assert len(enc["input_ids"]) > len(S1) + 2  # words really split into subwords
    check_row(enc, 0, [S1], enc["terminal_ids"], enc["nonterminal_ids"])


def test_batch_with_padding_and_tensors(tokenizer) -> None:
    enc = align_tagged(tokenizer, [S1, S2], return_tensors="pt")
    assert isinstance(enc["terminal_ids"], torch.Tensor)
    assert enc["terminal_ids"].shape == enc["input_ids"].shape
    for b, s in enumerate([S1, S2]):
        check_row(enc, b, [s], enc["terminal_ids"][b].tolist(), enc["nonterminal_ids"][b].tolist())
    pad = enc["attention_mask"] == 0
    assert pad.any() and (enc["terminal_ids"][pad] == -100).all()


def test_pairs_batched(tokenizer) -> None:
    enc = align_tagged(tokenizer, [S1, S2], pairs=[S2, S1])
    for b, (a, p) in enumerate([(S1, S2), (S2, S1)]):
        check_row(enc, b, [a, p], enc["terminal_ids"][b], enc["nonterminal_ids"][b])
    single = align_tags(tokenizer, S1.words, S1.terminals, S1.nonterminals,
                        pair=(S2.words, S2.terminals, S2.nonterminals))
    assert single["terminal_ids"] == enc["terminal_ids"][0]


def test_errors(tokenizer) -> None:
    with pytest.raises(AlignmentError, match="sentence 1: 5 words but 4 terminals"):
        align_tags(tokenizer, [S1.words, S2.words], [S1.terminals, S1.terminals],
                   [S1.nonterminals, S2.nonterminals])
    tiny = TaggedSentence.from_heads(["cat"], [0])
    n1 = len(tokenizer(tiny.words, is_split_into_words=True)["input_ids"])
    align_tagged(tokenizer, [tiny], max_length=n1)  # fits exactly
    with pytest.raises(AlignmentError, match=f"sentence 1: truncation to max_length={n1} drops"):
        align_tagged(tokenizer, [tiny, S2], max_length=n1)
    t, n = encode([0, 1])
    with pytest.raises(AlignmentError, match="word 1 .* produced no tokens"):
        align_tags(tokenizer, ["she", ""], t, n)
    with pytest.raises(TypeError, match="not a fast tokenizer"):
        align_tags(object(), S1.words, S1.terminals, S1.nonterminals)
