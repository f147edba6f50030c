"""Batch collators for the two pre-training objectives (docs/design.md §2 auxiliary objective, §6 contract).

Both pad a list of prepared examples (``input_ids``, ``terminal_ids``, ``nonterminal_ids``) to
the longest in the batch and return ``input_ids``, ``attention_mask``, ``terminal_ids``,
``nonterminal_ids`` (and ``deprel_ids`` when the prepared data has them, for the DEPREL priors of
SiPE table 12) and ``labels``. Tag tensors carry -100 where a position has no tag (special
tokens, continuation subwords, padding).

Causal: ``labels`` = ``input_ids`` with -100 at padding; the model shifts internally and derives
the next-tagged-position tag targets itself from the tag tensors.

MLM (BERT/RoBERTa recipe): ``mlm_probability`` (15%) of the maskable tokens (not special, not
padding) are selected; 80% become ``[MASK]``, 10% a random token, 10% stay. ``labels`` holds the
original id at *every* selected position and -100 elsewhere. The model zeroes the prior and
predicts the position's own tags wherever ``labels != -100`` -- so the invariant this collator
guarantees is: every position whose token was selected (masked, randomised or kept) has a label,
hence its tag cannot be copied from the prior. The tag tensors are passed unchanged: they are the
tag *labels* at masked positions (``deprel_ids`` too: the model zeroes the whole prior, E_D
included, where ``labels != -100``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

IGNORE_INDEX = -100
TAG_KEYS = ("terminal_ids", "nonterminal_ids")


def _pad(rows: Sequence[Sequence[int]], value: int, length: int) -> torch.Tensor:
    out = torch.full((len(rows), length), value, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.as_tensor(row, dtype=torch.long)
    return out


def pad_examples(
    examples: Sequence[dict[str, Any]], pad_token_id: int, pad_to_multiple_of: int | None = None
) -> dict:
    """Pad prepared examples into tensors; tags (and any deprel column) are padded with -100."""
    if not examples:
        raise ValueError("cannot collate an empty batch")
    length = max(len(e["input_ids"]) for e in examples)
    if pad_to_multiple_of:
        length = -(-length // pad_to_multiple_of) * pad_to_multiple_of
    batch = {"input_ids": _pad([e["input_ids"] for e in examples], pad_token_id, length)}
    batch["attention_mask"] = _pad([[1] * len(e["input_ids"]) for e in examples], 0, length)
    for key in (*TAG_KEYS, "deprel_ids"):
        if key in examples[0]:
            batch[key] = _pad([e[key] for e in examples], IGNORE_INDEX, length)
    return batch


@dataclass
class CausalCollator:
    """Next-token objective: labels are the inputs (unshifted, HF style) with -100 at padding."""

    pad_token_id: int
    pad_to_multiple_of: int | None = None

    def __call__(self, examples: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = pad_examples(examples, self.pad_token_id, self.pad_to_multiple_of)
        labels = batch["input_ids"].clone()
        labels[batch["attention_mask"] == 0] = IGNORE_INDEX
        batch["labels"] = labels
        return batch


@dataclass
class MLMCollator:
    """Masked-LM objective (15%, 80/10/10); see the module docstring for the prior-leak invariant.

    Randomness: with ``seed`` set (what ``pretrain`` does), each batch's masks come from a generator
    seeded by (seed, epoch, the batch's token ids) -- reproducible, different every epoch, and the
    same after an exact resume (the Trainer collates the first resumed batch *before* it restores
    the global RNG, so global-RNG masking would not resume exactly). Otherwise ``generator``, or
    torch's global RNG, is used.
    """

    pad_token_id: int
    mask_token_id: int
    vocab_size: int
    special_token_ids: Sequence[int] = ()
    mlm_probability: float = 0.15
    pad_to_multiple_of: int | None = None
    generator: torch.Generator | None = None
    seed: int | None = None
    epoch: int = 0
    _special: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability}")
        if self.mask_token_id is None:
            raise ValueError("the tokenizer has no mask token; MLM needs one (train a wordpiece tokenizer)")
        ids = {int(i) for i in self.special_token_ids if i is not None} | {int(self.pad_token_id)}
        self._special = torch.tensor(sorted(ids), dtype=torch.long)

    def __call__(self, examples: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = pad_examples(examples, self.pad_token_id, self.pad_to_multiple_of)
        inputs = batch["input_ids"]
        maskable = (batch["attention_mask"] == 1) & ~torch.isin(inputs, self._special)
        g = self.generator
        if self.seed is not None:
            key = f"{self.seed}:{self.epoch}".encode()
            h = hashlib.blake2b(inputs.numpy().tobytes(), digest_size=8, key=key)
            g = torch.Generator().manual_seed(int.from_bytes(h.digest(), "little") & ((1 << 63) - 1))
        prob = torch.full(inputs.shape, self.mlm_probability)
        selected = torch.bernoulli(prob, generator=g).bool() & maskable
        labels = torch.where(selected, inputs, torch.full_like(inputs, IGNORE_INDEX))
        to_mask = torch.bernoulli(torch.full(inputs.shape, 0.8), generator=g).bool() & selected
        to_random = torch.bernoulli(torch.full(inputs.shape, 0.5), generator=g).bool() & selected & ~to_mask
        random_ids = torch.randint(self.vocab_size, inputs.shape, dtype=torch.long, generator=g)
        inputs = inputs.clone()
        inputs[to_mask] = self.mask_token_id
        inputs[to_random] = random_ids[to_random]
        batch["input_ids"] = inputs
        batch["labels"] = labels
        return batch


def collator_for(
    objective: str,
    tokenizer: Any,
    mlm_probability: float = 0.15,
    vocab_size: int | None = None,
    seed: int | None = None,
) -> CausalCollator | MLMCollator:
    """The collator of ``objective`` (``causal`` | ``mlm``) configured from a HF tokenizer."""
    if tokenizer.pad_token_id is None:
        raise ValueError("the tokenizer has no pad token; train it with `structpe tokenizer train`")
    if objective == "causal":
        return CausalCollator(pad_token_id=tokenizer.pad_token_id)
    if objective == "mlm":
        return MLMCollator(
            pad_token_id=tokenizer.pad_token_id,
            mask_token_id=tokenizer.mask_token_id,
            vocab_size=vocab_size or len(tokenizer),
            special_token_ids=tokenizer.all_special_ids,
            mlm_probability=mlm_probability,
            seed=seed,
        )
    raise ValueError(f"objective must be 'causal' or 'mlm', got {objective!r}")
