"""The one training loop of every LIS diagnostic (LIS App. F.1, F.4): Shakespeare, KG and KG roles.

Per update: the cosine learning rate, one batch, the causal LM loss (optionally under bf16
autocast), AdamW with gradient clipping. What differs between the diagnostics -- where batches
come from, checkpoints and time limits of a sitting -- is passed in. The optimizer and the
learning-rate schedule live here too; ``merge_results`` combines the result folders of runs that
trained different models, for every diagnostic alike.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from structpe.errors import StructpeError
from structpe.io import atomic_write_text, config_differences, earlier_results, read_json
from structpe.lis.lisformer import LISformer
from structpe.lis.token_structure import TokenStructure
from structpe.provenance import provenance

# inputs [B, L], targets [B, L] and, for the KG diagnostics, the explicit structure of the batch
Batch = tuple[torch.Tensor, torch.Tensor, TokenStructure | None]

# config keys that say how a sitting runs, not what is trained or scored: a rerun may change them
# (a resumed run keeps its earlier models) and runs that differ only in them merge. bf16 autocast is
# one of them (its loss curves match float32, docs/lis.md); each trained model records its own. So is
# ``eval_every``: a learning curve is scored beside training and leaves the trained model as it is.
SITTING_KEYS = ("threads", "device", "max_minutes", "checkpoint_every", "autocast_bf16", "eval_every")


@dataclass
class Bf16Option:
    """The bf16 switch every LIS diagnostic config shares (Shakespeare, KG, KG roles).

    ``autocast_bf16``: bf16 autocast of the training forward, true / false / auto (where bf16 is
    native: a bf16 GPU, or a CPU with AVX-512 BF16 / AMX; ``structpe.hardware.native_bf16``).
    A profile turns it on only after ``benchmarks/lis_bf16_check.py`` showed its loss curve matching
    float32 (docs/lis.md). Scoring always runs in float32.
    """

    autocast_bf16: bool | str = False

    def __post_init__(self) -> None:
        bf16 = self.autocast_bf16
        if not (isinstance(bf16, bool) or bf16 == "auto"):
            raise ValueError(f"autocast_bf16 must be true, false or auto, got {bf16!r}")

    def resolved_bf16(self) -> bool:
        """``autocast_bf16`` with ``auto`` resolved (``structpe.hardware.resolve_bf16``)."""
        from structpe.hardware import resolve_bf16

        return resolve_bf16(self.autocast_bf16)


def configure_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with decay on matrices only (nanoGPT rule); role/address tables decay too (2-D)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )


def cosine_lr(step: int, total: int, lr: float, warmup: int = 0, min_ratio: float = 0.1) -> float:
    """Linear warmup, then cosine decay to ``min_ratio * lr``: LIS App. F.1 says "cosine schedule";
    the warmup and the floor are nanoGPT's choices."""
    if step < warmup:
        return lr * (step + 1) / warmup
    frac = min(1.0, (step - warmup) / max(1, total - warmup))
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))


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


def merge_results(
    folders: list[str | Path],
    out: str | Path,
    carry: tuple[str, ...],
    render: Callable[[dict], str],
    draw: Callable[[dict, Path], Any] | None,
    figure: str,
) -> dict:
    """Combine results.json of runs that trained different models (e.g. in parallel processes),
    or the same models under different seeds.

    ``carry``: the keys taken from the first run that has them (the config, the data summary);
    models already in ``out`` under the same config are kept. Runs may differ in how a sitting ran
    (``SITTING_KEYS``) and in ``seed``; with more than one seed every model is keyed
    ``<model>/seed-<s>`` and records ``model`` and ``seed`` (the config's ``seed`` becomes the list),
    so a table can put each seed's row and the spread side by side. Writes results.json, results.md
    (``render``) and, unless ``draw`` is None, the figure ``figure``.
    """
    runs = [read_json(Path(f) / "results.json") for f in folders]
    # A run without a seed (the KG runs record none) counts as one seed of its own.
    seeds = sorted({r["config"].get("seed") for r in runs}, key=lambda s: -1 if s is None else s)
    by_seed = len(seeds) > 1
    merged: dict = {**dict.fromkeys(carry), "models": {}, "merged_from": [str(f) for f in folders]}
    for f, res in zip(folders, runs, strict=True):
        if merged["config"] is not None:  # one table holds runs of one configuration only
            differ = config_differences(res["config"], merged["config"], (*SITTING_KEYS, "seed"))
            if differ:
                raise StructpeError(
                    f"--merge {f}: trained under another configuration than {folders[0]} (differs in "
                    f"{differ}); merge only runs of one configuration"
                )
        for key in carry:
            merged[key] = merged[key] or res[key]
        seed = res["config"].get("seed")
        for name, record in res["models"].items():
            key = f"{name}/seed-{seed}" if by_seed else name
            merged["models"][key] = {**record, "model": name, "seed": seed} if by_seed else record
    if by_seed:
        merged["config"] = {**merged["config"], "seed": seeds}
    out = Path(out)
    kept = earlier_results(
        out / "results.json", merged["config"], ignore=SITTING_KEYS
    )
    merged["models"] = {**kept, **merged["models"]}
    out.mkdir(parents=True, exist_ok=True)
    merged["provenance"] = provenance()  # of the merge; each run's own is in its folder
    atomic_write_text(out / "results.json", json.dumps(merged, indent=2))
    atomic_write_text(out / "results.md", render(merged))
    if draw is not None:
        draw(merged, out / figure)
    return merged
