"""Toy tokenizer, models and parser whose probabilities are known, for hand-checked scoring tests.

A plain module (not conftest) so test files import it by a name no other test folder uses."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from structpe.syntax.tagged import TaggedSentence

SPECIALS = ["[PAD]", "[BOS]", "[MASK]", "[UNK]", "[CLS]", "[SEP]"]
WORDS = [*SPECIALS, "the", "dog", "##s", "run", "cat", "sleep", "."]
VOCAB = {w: i for i, w in enumerate(WORDS)}


def make_tokenizer(with_cls: bool = False) -> PreTrainedTokenizerFast:
    """WordPiece over a 13-word vocabulary: "dogs" -> "dog" "##s"; whitespace/punctuation words."""
    t = Tokenizer(models.WordPiece(dict(VOCAB), unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    if with_cls:
        t.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", VOCAB["[CLS]"]), ("[SEP]", VOCAB["[SEP]"])]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=t,
        bos_token="[BOS]",
        eos_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
    )


class BigramLM(torch.nn.Module):
    """Causal toy in the docs/design.md §6 convention: logits at p = table[x_p] (so p(x_{p+1} | x_p))."""

    def __init__(self, table: torch.Tensor, family: str = "txl", injection: str = "position") -> None:
        super().__init__()
        self.table = torch.nn.Parameter(table.clone().float(), requires_grad=False)
        self.config = SimpleNamespace(model_type="structpe-sipe", family=family, injection=injection)
        self.calls: list[dict] = []

    def forward(self, input_ids, attention_mask=None, terminal_ids=None, nonterminal_ids=None, labels=None):
        self.calls.append(
            {"input_ids": input_ids, "terminal_ids": terminal_ids, "nonterminal_ids": nonterminal_ids}
        )
        return SimpleNamespace(logits=self.table[input_ids])


class RightNeighbourMLM(BigramLM):
    """Masked toy: logits at p = table[x_{p+1}] (the right neighbour; pad after the end)."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__(table, family="roberta", injection="input")

    def forward(self, input_ids, attention_mask=None, terminal_ids=None, nonterminal_ids=None, labels=None):
        self.calls.append(
            {"input_ids": input_ids, "terminal_ids": terminal_ids, "nonterminal_ids": nonterminal_ids}
        )
        right = torch.cat([input_ids[:, 1:], torch.zeros_like(input_ids[:, :1])], dim=1)
        return SimpleNamespace(logits=self.table[right])


class ChainParser:
    """Test double for a parser: whitespace words, a left-branching chain (word i heads word i+1)."""

    def parse_text(self, texts: list[str]) -> list[TaggedSentence]:
        out = []
        for t in texts:
            words = t.replace(".", " .").split()
            heads = [0] + list(range(1, len(words)))
            out.append(TaggedSentence.from_heads(words, heads))
        return out


class ObjectParser(ChainParser):
    """Test double with labels: "<subj> <verb> the <obj> ." -> nsubj, ROOT, det, dobj, punct."""

    def parse_text(self, texts: list[str], split_sentences: bool = False) -> list[TaggedSentence]:
        out = []
        for t in texts:
            words = t.replace(".", " .").split()
            if len(words) != 5:
                raise ValueError(f"ObjectParser takes '<subj> <verb> the <obj> .', got {t!r}")
            out.append(
                TaggedSentence.from_heads(words, [2, 0, 4, 2, 2], ["nsubj", "ROOT", "det", "dobj", "punct"])
            )
        return out


class RampAttentionMLM(BigramLM):
    """Masked toy whose every head attends to key j with weight (j+1) / sum, or uniformly (flat)."""

    def __init__(self, table: torch.Tensor, flat: bool, n_layers: int = 2) -> None:
        super().__init__(table, family="roberta", injection="none" if flat else "input")
        self.flat = flat
        self.n_layers = n_layers

    def forward(
        self,
        input_ids,
        attention_mask=None,
        terminal_ids=None,
        nonterminal_ids=None,
        labels=None,
        output_attentions=False,
    ):
        B, L = input_ids.shape
        w = torch.ones(L) if self.flat else torch.arange(1, L + 1, dtype=torch.float)
        att = (w / w.sum()).expand(B, 2, L, L)
        return SimpleNamespace(
            logits=self.table[input_ids], attentions=tuple(att for _ in range(self.n_layers))
        )
