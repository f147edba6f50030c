"""The token-id check every model's ``forward`` runs at entry (the SiPE families through
``structpe.models.validate.check_inputs``, the LISformer directly).

An id outside ``[0, vocab_size)`` would otherwise be an ``IndexError`` deep in ``nn.Embedding``
(or a device-side assert on a GPU), and an empty batch or sequence a reshape error in a layer; the
README promises one ``ValueError`` naming ``input_ids`` instead. The check is one ``aminmax``
reduction over the ids, whatever their size.
"""

from __future__ import annotations

import torch


def check_token_ids(ids: torch.Tensor, vocab_size: int, name: str = "input_ids") -> None:
    """ValueError unless ``ids`` (a 2-D integer tensor [batch, length]) is non-empty in both
    dimensions and every id is in ``[0, vocab_size)``."""
    if ids.dim() != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(
            f"{name}: expected a non-empty batch of token ids [batch >= 1, length >= 1], "
            f"got shape {list(ids.shape)}"
        )
    low, high = (int(v) for v in torch.aminmax(ids))
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(
            f"{name}: token id {bad} is outside the vocabulary [0, {vocab_size}) of this model "
            "(a tokenizer of another model, or ids not from a tokenizer)"
        )
