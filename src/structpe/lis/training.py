"""The one training loop of every LIS diagnostic (LIS App. F.1, F.4): Shakespeare, KG and KG roles.

Per update: the cosine learning rate, one batch, the causal LM loss (optionally under bf16
autocast), AdamW with gradient clipping. What differs between the diagnostics -- where batches
come from, checkpoints and time limits of a sitting -- is passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tqdm.auto import tqdm

from structpe.lis.lisformer import LISformer, TokenStructure, cosine_lr

# inputs [B, L], targets [B, L] and, for the KG diagnostics, the explicit structure of the batch
Batch = tuple[torch.Tensor, torch.Tensor, TokenStructure | None]


def train_steps(
    model: LISformer,
    opt: torch.optim.Optimizer,
    cfg: Any,
    next_batch: Callable[[], Batch],
    *,
    start: int = 0,
    losses: list[float] | None = None,
    desc: str = "",
    log_every: int = 20,
    autocast_bf16: bool = False,
    after_step: Callable[[int, list[float]], None] | None = None,
) -> list[float]:
    """Updates ``start`` .. ``cfg.iters - 1`` (``cfg``: iters, lr, warmup, grad_clip); returns the loss
    curve (``losses`` continued). ``after_step(done, losses)`` runs after each update."""
    dev = next(model.parameters()).device
    losses = [] if losses is None else losses
    model.train()
    bar = tqdm(range(start, cfg.iters), desc=f"train {desc}", leave=False, initial=start, total=cfg.iters)
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = cosine_lr(step, cfg.iters, cfg.lr, cfg.warmup)
        x, y, structure = next_batch()
        x, y = x.to(dev), y.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast_bf16):
            loss = (model(x, y) if structure is None else model(x, y, structure=structure.to(dev))).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        losses.append(loss.item())
        if step % log_every == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
        if after_step is not None:
            after_step(step + 1, losses)
    return losses
