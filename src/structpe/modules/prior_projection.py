"""W_E^(l): project the hexatag prior into attention heads (SiPE §3.3-3.5, App. A.2-A.4; docs/design.md §2).

Every score-side injection needs, for layer l, a per-head vector for each key's prior:
  position      c_ij = <q_i + v, [W_E^l prior_j]_n> / sqrt(d_head)           (TXL eq. 5-6)
                c_ij = <Q^c_i,   [W_E^l prior_j]_n> / sqrt(d_head)           (DeBERTa eq. 12-13)
  disentangled  AC + BD + c                                                (TXL, App. A.3)
  attn_bias     <q_i, [W_K^tag prior_j]_n> / sqrt(d_head), value bias [W_V^tag prior_j]_n  (eq. 8-9)
  RoPE phase    dtheta_{p,t} = (W_delta^l prior_p)_t                       (ModernBERT eq. 14)

Design axes (paper table 7): ``projection`` shared vs per_layer; ``projection_target`` ``head``
(one d_head subspace shared by all heads) vs ``model`` (d_model split into heads). Only layers
from the entry layer k on get a projection. Weights start near zero so training starts from the
unmodified model.

Efficiency (docs/design.md §2 "a place to beat the paper"): the prior takes at most ``n_pair_values`` (11
without DEPREL) distinct values, so we project the small pair table, never an [L, d] tensor, and
``tag_alignment`` computes c as an [L x P] table per query and gathers it -- O(L * P * d) instead of
O(L^2 * d), and no [B, H, L, L, d] tensor is ever formed.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from structpe.models.config import SiPEConfig


class PriorProjection(nn.Module):
    """Maps the prior's pair table [P, d] to per-head vectors [H, P, d_out] for a given layer."""

    def __init__(self, config: SiPEConfig, d_out: int | None = None, bias: bool = False):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_out = d_out if d_out is not None else config.d_head
        self.target = config.projection_target
        self.shared = config.projection == "shared"
        width = self.d_out if self.target == "head" else self.n_heads * self.d_out
        layers = [i for i in range(config.n_layers) if config.layer_gets_prior(i)]
        keys = ["shared"] if self.shared else [str(i) for i in layers]
        self.layers = set(layers)
        self.proj = nn.ModuleDict({k: nn.Linear(config.d_model, width, bias=bias) for k in keys})
        for lin in self.proj.values():
            nn.init.normal_(lin.weight, std=config.prior_proj_init_std)
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)

    def has_layer(self, layer: int) -> bool:
        return layer in self.layers

    def forward(self, pair_table: torch.Tensor, layer: int) -> torch.Tensor:
        if layer not in self.layers:
            raise KeyError(f"layer {layer} is below the entry layer; it has no prior projection")
        out = self.proj["shared" if self.shared else str(layer)](pair_table)  # [P, width]
        if self.target == "head":
            return out.unsqueeze(0).expand(self.n_heads, -1, -1)
        return out.view(out.shape[0], self.n_heads, self.d_out).transpose(0, 1)


def gather_per_key(table: torch.Tensor, pair_ids: torch.Tensor) -> torch.Tensor:
    """Per-position vectors [B, H, L, d] from a per-head table [H, P, d] and pair ids [B, L]."""
    return table[:, pair_ids].permute(1, 0, 2, 3)


def tag_alignment(query: torch.Tensor, key_table: torch.Tensor, pair_ids: torch.Tensor) -> torch.Tensor:
    """c_ij = <query_i, key_table[pair_ids_j]> / sqrt(d) as [B, H, Lq, Lk], via an [Lq x P] table.

    query [B, H, Lq, d] (already including any bias such as TXL's v), key_table [H, P, d],
    pair_ids [B, Lk] (0 = no tag, whose row of the prior table is zero, so c = 0 there).
    """
    bsz, n_heads, q_len, d = query.shape
    per_pair = torch.einsum("bhid,hpd->bhip", query, key_table) / math.sqrt(d)  # [B, H, Lq, P]
    index = pair_ids[:, None, None, :].expand(bsz, n_heads, q_len, pair_ids.shape[-1])
    return per_pair.gather(-1, index)
