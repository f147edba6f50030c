"""Where each token sits in its incidence structure (LIS Def. 4.1 for a token stream): its local
position, instance and addressed instance (:class:`TokenStructure`; lines or one continuous
instance), and the two-term attention's query chunks and masks built from the instances
(:func:`two_term_plan`, shared by every layer of ``structpe.lis.lisformer``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class TokenStructure:
    """Per-token LIS coordinates for a batch [B, L].

    position  local rotary position p (resets at each instance)
    instance  instance index, non-decreasing along the sequence (lines, facts, text segment)
    address   instance index whose content address applies, or -1 (incomplete / unaddressed)
    role      role id for the learned role table (0 = none)
    """

    position: torch.Tensor
    instance: torch.Tensor
    address: torch.Tensor
    role: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> TokenStructure:
        parts = (self.position, self.instance, self.address, self.role)
        return TokenStructure(*(t.to(device) if t is not None else None for t in parts))


def line_structure(idx: torch.Tensor, newline_id: int) -> TokenStructure:
    """Lines as instances (F.1): a newline ends its line; local positions restart after it.

    A line is complete iff its newline is inside the window; the last, unterminated line gets no
    address (R_e = I).
    """
    B, L = idx.shape
    is_nl = (idx == newline_id).long()
    line = torch.cumsum(is_nl, 1) - is_nl
    t = torch.arange(L, device=idx.device).expand(B, L)
    starts = torch.where(is_nl.bool(), t + 1, torch.zeros_like(t))
    prev = torch.cat([torch.zeros_like(starts[:, :1]), starts[:, :-1]], 1)
    position = t - torch.cummax(prev, 1).values
    n_complete = is_nl.sum(1, keepdim=True)
    address = torch.where(line < n_complete, line, torch.full_like(line, -1))
    return TokenStructure(position=position, instance=line, address=address)


def continuous_structure(idx: torch.Tensor) -> TokenStructure:
    """One instance, positions 0..L-1: plain RoPE."""
    B, L = idx.shape
    pos = torch.arange(L, device=idx.device).expand(B, L)
    zero = torch.zeros_like(pos)
    return TokenStructure(position=pos, instance=zero, address=zero - 1)


def two_term_plan(
    instance: torch.Tensor,
    chunk: int,
    dtype: torch.dtype | None = None,
    instance_slopes: torch.Tensor | None = None,
) -> list[tuple[int, int, int, torch.Tensor]]:
    """Query chunks [s, e) with their key ranges, built once per forward and shared by all layers.

    Chunk [s, e) needs addressed keys [0, e) (earlier instances only) and local keys [s0, e), where
    s0 is the first position of the instance that holds query s -- so the work is ~L^2/2 plus a
    band, instead of L x 2L for one dense [addressed | local] mask.
    Each entry: (s, e, s0, mask [B, 1, e - s, e + e - s0]); boolean (True = keep), or additive
    (0 / -inf) in ``dtype`` when one is given. ``instance_slopes`` [H] (needs ``dtype``) adds an
    ALiBi-style bias -m_h * (inst(i) - inst(j)) to the addressed keys: mask [B, H, e - s, ...].
    """
    if instance_slopes is not None and dtype is None:
        raise ValueError("instance_slopes need the additive mask (pass dtype)")
    B, L = instance.shape
    dev = instance.device
    t = torch.arange(L, device=dev)
    new = torch.ones(B, L, dtype=torch.bool, device=dev)
    new[:, 1:] = instance[:, 1:] != instance[:, :-1]
    start = torch.cummax(torch.where(new, t.expand(B, L), torch.zeros_like(instance)), 1).values
    plan = []
    for s in range(0, L, chunk):
        e = min(L, s + chunk)
        s0 = int(start[:, s].min())
        qi = instance[:, s:e, None]
        earlier = instance[:, None, :e] < qi
        same = (instance[:, None, s0:e] == qi) & (t[None, s0:e] <= t[s:e, None])
        keep = torch.cat([earlier, same], dim=-1)[:, None]
        if dtype is not None:  # additive form, built once instead of by SDPA in every layer
            bias = torch.zeros(keep.shape, dtype=dtype, device=dev)
            if instance_slopes is not None:
                dist = (qi - instance[:, None, :e]).to(dtype)[:, None]  # [B, 1, q, e] in instances
                addressed = -instance_slopes.to(dtype)[None, :, None, None] * dist  # [B, H, q, e]
                local = addressed.new_zeros(*addressed.shape[:3], e - s0)
                bias = torch.cat([addressed, local], dim=-1)
            keep = bias.masked_fill(~keep, float("-inf"))
        plan.append((s, e, s0, keep))
    return plan
