"""W_E^(l): project the hexatag prior into attention heads (SiPE §3.3-3.5, App. A.2-A.4; docs/design.md §2).

Every score-side injection needs, for layer l, a per-head vector for each key's prior:
  position      c_ij = <q_i + v, [W_E^l prior_j]_n> / sqrt(d_head)           (TXL eq. 5-6)
                c_ij = <Q^c_i,   [W_E^l prior_j]_n> / sqrt(d_head)           (DeBERTa eq. 12-13)
  disentangled  AC + BD + c                                                (TXL, App. A.3)
  attn_bias     <q_i, [W_K^tag prior_j]_n> / sqrt(d_head), value bias [W_V^tag prior_j]_n  (eq. 8-9)
  RoPE phase    dtheta_{p,t} = (W_delta^l prior_p)_t                       (ModernBERT eq. 14)

Design axes (paper table 7): ``shared`` (one W for all layers) vs one per layer; ``target``
``head`` (one d_head subspace shared by all heads) vs ``model`` (d_model split into heads). Only
the given ``layers`` (from the entry layer k on) get a projection. Weights start near zero
(``init_std``) so training starts from the unmodified model; the rule rides on each Linear
(``set_init``), so a model's ``post_init`` re-applies the same rule.

Efficiency (docs/design.md §2 "a place to beat the paper"): the prior takes at most ``n_pair_values`` (11
without DEPREL) distinct values, so we project the small pair table, never an [L, d] tensor.
Every family computes its tag scores with the same two steps: ``pair_scores`` (<q_i, table_p> per
query and pair, [L x P]) and ``spread`` (pair_j's column for each key, by a one-hot product);
``tag_alignment`` is their composition, c as in the equations -- O(L * P * d) instead of
O(L^2 * d), and no [B, H, L, L, d] tensor is ever formed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from structpe.modules.init_rules import apply_init_rule, set_init

TARGETS = ("head", "model")


class PriorProjection(nn.Module):
    """Maps the prior's pair table [P, d_model] to per-head vectors [H, P, d_out] for a given layer."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_out: int,
        layers: Iterable[int],
        shared: bool = False,
        target: str = "model",
        init_std: float = 0.0,
        bias: bool = False,
    ):
        super().__init__()
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
        self.n_heads = n_heads
        self.d_out = d_out
        self.target = target
        self.shared = shared
        width = d_out if target == "head" else n_heads * d_out
        self.layers = set(layers)
        keys = ["shared"] if shared else [str(i) for i in sorted(self.layers)]
        self.proj = nn.ModuleDict({k: nn.Linear(d_model, width, bias=bias) for k in keys})
        for lin in self.proj.values():
            set_init(lin, "normal", init_std)
            apply_init_rule(lin)

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


def pair_scores(query: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """<query_i, table_p> per query and tag pair, unscaled: [B, H, Lq, d] x [H, P, d] -> [B, H, Lq, P].

    ``table`` may also come expanded over the batch, [B, H, P, d]: the products are then batched per
    row and head rather than per head, which rounds differently in the last bit; DeBERTa's position
    site passes it so (its numbers since the first release), every other caller per head.
    """
    if table.dim() == 4:
        return torch.einsum("bhid,bhpd->bhip", query, table)
    return torch.einsum("bhid,hpd->bhip", query, table)


def spread(per_pair: torch.Tensor, pair_ids: torch.Tensor) -> torch.Tensor:
    """out[b, h, i, j] = per_pair[b, h, i, pair_ids[b, j]]: [B, H, Lq, P] -> [B, H, Lq, Lk].

    A product with one-hot(pair_j) ([Lq, P] @ [P, Lk]): exact, since every other term is x * 0, and a
    BLAS product in both directions (cheaper than gather / scatter on CPU).
    """
    onehot = F.one_hot(pair_ids, per_pair.shape[-1]).to(per_pair.dtype)  # [B, Lk, P]
    return torch.matmul(per_pair, onehot.transpose(1, 2)[:, None])


def tag_alignment(query: torch.Tensor, key_table: torch.Tensor, pair_ids: torch.Tensor) -> torch.Tensor:
    """c_ij = <query_i, key_table[pair_ids_j]> / sqrt(d) as [B, H, Lq, Lk], via an [Lq x P] table.

    query [B, H, Lq, d] (already including any bias such as TXL's v), key_table [H, P, d] (or
    [B, H, P, d], see ``pair_scores``),
    pair_ids [B, Lk] (0 = no tag, whose row of the prior table is zero, so c = 0 there).
    """
    return spread(pair_scores(query, key_table) / math.sqrt(query.shape[-1]), pair_ids)
