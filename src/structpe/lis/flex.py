"""Block-sparse attention for the LISformer with ``torch.nn.attention.flex_attention``.

The causal two-term LIS score (``lisformer`` module docstring) is one attention over 2L keys,
[addressed keys | local keys], where query i keeps addressed key j iff inst(j) < inst(i) and local
key j iff inst(j) == inst(i) and j <= i. The masked SDPA path computes every (query, key) block of
that pattern; FlexAttention's block mask skips the blocks that are fully masked (the upper triangle
of both halves and, in the local half, everything outside the band of the query's own line), and
blocks that are fully kept run without evaluating the mask. ALiBi (the ``alibi`` model) and the
instance-distance ALiBi extension (``instance_alibi``) are ``score_mod`` terms on the same masks.

The block mask is built from the dense boolean pattern with tensor ops (``block_mask_from_dense``)
rather than ``create_block_mask``: the latter evaluates ``mask_mod`` through vmap, which takes
seconds per forward for L = 1024 on a CPU, and the pattern changes with every batch.

Where it runs (torch 2.13): compiled on CUDA for training and inference; on a CPU the compiled
kernel (C++ through the system compiler) runs forward only -- FlexAttention has no CPU backward --
so ``use_flex`` falls back to the SDPA path whenever gradients are needed on a CPU, or when
compilation is unavailable; ``auto`` uses it on CUDA only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

BLOCK = 128  # FlexAttention's default tile


@functools.cache
def compiled_flex():
    """``flex_attention`` under ``torch.compile`` (one compile per shape; uncompiled flex
    materializes the full score matrix and is only a reference)."""
    return torch.compile(flex_attention, dynamic=False)


@functools.cache
def flex_compiles(device_type: str) -> bool:
    """Whether compiled FlexAttention runs here: a tiny forward on ``device_type``."""
    try:
        q = torch.randn(1, 1, BLOCK, 16, device=device_type)
        compiled_flex()(q, q, q)
        return True
    except Exception:  # no compiler toolchain, unsupported backend, ...: use SDPA
        return False


def use_flex(backend: str, device: torch.device) -> bool:
    """Whether a forward takes the block-sparse path. ``flex``: wherever it can run -- CUDA, or a
    CPU forward without gradients (FlexAttention has no CPU backward); ``auto``: CUDA only (on a
    CPU its forward measured slower than the masked SDPA path, docs/lis.md); ``sdpa``: never."""
    if backend == "sdpa" or (backend == "auto" and device.type != "cuda"):
        return False
    if device.type == "cpu" and torch.is_grad_enabled():
        return False
    return flex_compiles(device.type)


def block_mask_from_dense(keep: torch.Tensor, mask_mod, block: int = BLOCK) -> BlockMask:
    """BlockMask of a boolean pattern ``keep`` [B, Q, KV]: blocks with no kept entry are skipped,
    blocks with every entry kept are "full" (no mask evaluation), the rest call ``mask_mod``."""
    B, Q, KV = keep.shape
    nq, nk = -(-Q // block), -(-KV // block)
    padded = keep.new_zeros(B, nq * block, nk * block)
    padded[:, :Q, :KV] = keep
    tiles = padded.view(B, nq, block, nk, block)
    count = tiles.sum(dim=(2, 4))  # kept entries per tile [B, nq, nk]
    inside = torch.zeros(nq * block, nk * block, dtype=torch.bool, device=keep.device)
    inside[:Q, :KV] = True  # entries of edge tiles beyond the sequence do not count against "full"
    size = inside.view(nq, block, nk, block).sum(dim=(1, 3))
    full = count == size
    partial = (count > 0) & ~full

    def indices(sel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        num = sel.sum(-1).to(torch.int32)[:, None]  # [B, 1, nq]
        order = torch.argsort((~sel).to(torch.int8), dim=-1, stable=True).to(torch.int32)
        return num, order[:, None]  # [B, 1, nq, nk]: selected tiles first

    kv_num, kv_idx = indices(partial)
    full_num, full_idx = indices(full)
    return BlockMask.from_kv_blocks(
        kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=block, mask_mod=mask_mod, seq_lengths=(Q, KV)
    )


@dataclass
class FlexPlan:
    """Everything the layers share for one forward: the block mask and the score modifier."""

    block_mask: BlockMask
    score_mod: object | None  # (score, b, h, q, kv) -> score
    two_term: bool  # keys are [addressed | local]


def two_term_flex_plan(instance: torch.Tensor, instance_slopes: torch.Tensor | None = None) -> FlexPlan:
    """The causal two-term pattern over 2L keys (module docstring), optionally with the ALiBi bias
    -m_h (inst(i) - inst(j)) on the addressed half (``instance_alibi``)."""
    B, L = instance.shape
    t = torch.arange(L, device=instance.device)
    qi = instance[:, :, None]
    earlier = instance[:, None, :] < qi
    same = (instance[:, None, :] == qi) & (t[None, :] <= t[:, None])
    keep = torch.cat([earlier, same], dim=-1)  # [B, L, 2L]

    def key_pos(kv):
        return torch.where(kv < L, kv, kv - L)

    def mask_mod(b, h, q, kv):
        j = key_pos(kv)
        return torch.where(
            kv < L, instance[b, j] < instance[b, q], (instance[b, j] == instance[b, q]) & (j <= q)
        )

    score_mod = None
    if instance_slopes is not None:

        def score_mod(score, b, h, q, kv):
            dist = (instance[b, q] - instance[b, key_pos(kv)]).to(score.dtype)
            return torch.where(kv < L, score - instance_slopes[h] * dist, score)

    return FlexPlan(block_mask_from_dense(keep, mask_mod), score_mod, two_term=True)


def alibi_flex_plan(batch: int, length: int, slopes: torch.Tensor) -> FlexPlan:
    """Causal attention with the ALiBi bias -m_h (i - j)."""
    t = torch.arange(length, device=slopes.device)
    keep = (t[None, :] <= t[:, None]).expand(batch, length, length)

    def mask_mod(b, h, q, kv):
        return kv <= q

    def score_mod(score, b, h, q, kv):
        return score - slopes[h] * (q - kv).to(score.dtype)

    return FlexPlan(block_mask_from_dense(keep, mask_mod), score_mod, two_term=False)


def flex_attend(q, k_local, v, plan: FlexPlan, k_addressed=None, compiled: bool = True) -> torch.Tensor:
    """Attention of q [B, H, L, d] under ``plan``; two-term plans take [addressed | local] keys."""
    keys, vals = k_local, v
    if plan.two_term:
        keys = torch.cat([k_addressed, k_local], dim=2)
        vals = torch.cat([v, v], dim=2)
    fn = compiled_flex() if compiled else flex_attention
    return fn(q, keys, vals, score_mod=plan.score_mod, block_mask=plan.block_mask)
