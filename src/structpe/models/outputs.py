"""The output every SiPE model returns, whatever its family (docs/design.md §6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers.utils import ModelOutput


@dataclass
class SiPEOutput(ModelOutput):
    """``loss`` = lm_loss + tag_loss_weight * (terminal_loss + nonterminal_loss), when labels are given.

    ``terminal_logits`` / ``nonterminal_logits`` are the auxiliary tag heads ([B, L, 2] / [B, L, 5]);
    for causal models position p predicts the tags of the next tagged position, for masked models a
    masked position predicts its own tags. ``logits`` is [B, L, V] (or [B, n_labels] for
    classification heads).
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    terminal_logits: torch.FloatTensor | None = None
    nonterminal_logits: torch.FloatTensor | None = None
    lm_loss: torch.FloatTensor | None = None
    terminal_loss: torch.FloatTensor | None = None
    nonterminal_loss: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None
    cache: Any = None  # the decoder's key/value cache (a transformers Cache) after use_cache=True
