"""The rows a likelihood run feeds a causal model: token ids with per-position tags, and what comes back.

``Row.logits_from`` and ``_output_positions_from`` let a forward compute vocabulary logits only
for the positions it needs: the beam of ``structpe.eval.scoring.likelihood`` only needs the newest
segment of each prefix, and the output projection over the vocabulary is most of a tiny model's
cost. Plain records and a forward hook, no scorer: kept apart from ``run_rows`` and the modes in
``structpe.eval.scoring.likelihood``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class Row:
    """One model input: token ids (BOS first) and per-position tag ids (-100 = none).

    ``logits_from``: the first position whose next-token logits are needed (earlier token
    log-probs come back as NaN). The beam only needs the newest segment of each prefix, and the
    output projection over the vocabulary is most of a tiny model's cost.
    """

    ids: list[int]
    terminals: list[int]
    nonterminals: list[int]
    logits_from: int = 0


@dataclass
class RowOutput:
    """log p(ids[t] | ids[<t]) for t >= 1 (index t-1), and the tag heads' log-softmax per position."""

    token_lp: list[float]
    terminal_lp: torch.Tensor  # [L, 2]
    nonterminal_lp: torch.Tensor  # [L, 5]


@contextmanager
def _output_positions_from(model: Any, first: int) -> Iterator[None]:
    """Feed only positions >= ``first`` to the model's output projection (a forward pre-hook).

    Applies to models whose ``get_output_embeddings()`` is the module that maps the final hidden
    states to vocabulary logits (ours and Hugging Face causal LMs); the tag heads read the hidden
    states separately and are untouched. A no-op when ``first`` is 0 or there is no such module.
    """
    getter = getattr(model, "get_output_embeddings", None)
    head = getter() if callable(getter) else None
    if first <= 0 or not isinstance(head, torch.nn.Module):
        yield
        return
    handle = head.register_forward_pre_hook(lambda _m, args: (args[0][:, first:], *args[1:]))
    try:
        yield
    finally:
        handle.remove()
