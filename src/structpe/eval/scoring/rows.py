"""The rows a likelihood run feeds a causal model: token ids with per-position tags, and what comes back.

``Row.logits_from`` and ``_output_positions_from`` let a forward compute vocabulary logits only
for the positions it needs: the beam of ``structpe.eval.scoring.likelihood`` only needs the newest
segment of each prefix, and the output projection over the vocabulary is most of a tiny model's
cost. Plain records and a forward hook, no scorer: kept apart from ``run_rows`` and the modes in
``structpe.eval.scoring.likelihood``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from structpe.eval.scoring.types import CausalScoring, forward_logits, model_device
from structpe.syntax.hexatags import IGNORE_INDEX as IGNORE


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


# ----------------------------------------------------------------------------------------------
# batched forward over arbitrary (ids, tags) rows


@torch.no_grad()
def run_rows(scorer: CausalScoring, rows: Sequence[Row], tagged: bool = True) -> list[RowOutput]:
    """Run the scorer's model on rows, ``scorer.batch_size`` rows per forward, longest first.

    Right padding with the attention mask, as in the conditional scorer: a causal model's outputs
    at real positions do not depend on what follows them.
    """
    device = model_device(scorer.model)
    out: list[RowOutput | None] = [None] * len(rows)
    order = sorted(range(len(rows)), key=lambda i: (-len(rows[i].ids), -rows[i].logits_from))
    size = max(1, scorer.batch_size)
    for start in range(0, len(order), size):
        idx = order[start : start + size]
        first = min(rows[i].logits_from for i in idx)
        L = max(len(rows[i].ids) for i in idx)
        B = len(idx)
        input_ids = torch.full((B, L), scorer.pad_id, dtype=torch.long)
        mask = torch.zeros((B, L), dtype=torch.long)
        term = torch.full((B, L), IGNORE, dtype=torch.long)
        nonterm = torch.full((B, L), IGNORE, dtype=torch.long)
        for b, i in enumerate(idx):
            r = rows[i]
            n = len(r.ids)
            input_ids[b, :n] = torch.tensor(r.ids)
            mask[b, :n] = 1
            term[b, :n] = torch.tensor(r.terminals)
            nonterm[b, :n] = torch.tensor(r.nonterminals)
        with _output_positions_from(scorer.model, first):
            res = forward_logits(
                scorer.model,
                input_ids.to(device),
                mask.to(device),
                term.to(device) if tagged else None,
                nonterm.to(device) if tagged else None,
            )
        logits = res.logits[:, -(L - first) :]  # positions first..L-1 (all of them without the hook)
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        target = input_ids[:, first + 1 :].to(logp.device)
        tok_lp = torch.full((B, L - 1), math.nan)
        tok_lp[:, first:] = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1).cpu()
        t_lp = n_lp = None
        if tagged:
            t_lp = torch.log_softmax(res.terminal_logits.float(), dim=-1).cpu()
            n_lp = torch.log_softmax(res.nonterminal_logits.float(), dim=-1).cpu()
        for b, i in enumerate(idx):
            n = len(rows[i].ids)
            out[i] = RowOutput(
                token_lp=tok_lp[b, : n - 1].tolist(),
                terminal_lp=t_lp[b, :n] if t_lp is not None else torch.empty(0),
                nonterminal_lp=n_lp[b, :n] if n_lp is not None else torch.empty(0),
            )
    return out  # type: ignore[return-value]
