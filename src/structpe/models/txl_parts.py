"""The TXL decoder's relative positions and what each attention layer is handed besides q, k, v.

``sinusoid`` / ``relative_embedding`` give r_{i-j} (Dai et al. 2019) and ``rel_shift`` aligns the
BD term to offsets; ``LayerPrior`` carries the SiPE prior's per-layer tables and ``JoinedAddress``
lis_tree2's addresses; ``TagGate`` is the multiplicative prior's (1 + c) * BD with its own backward
(``structpe.models.txl`` documents the equations).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from structpe.modules.prior_projection import spread


def sinusoid(pos_seq: torch.Tensor, d_model: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """r for each offset in ``pos_seq``: concat[sin(pos * f), cos(pos * f)], f_k = 10000^(-2k/d) (TXL).

    Computed in float32 (or float64 if asked) even for half-precision models: the angles need it.
    """
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d_model, 2, device=pos_seq.device, dtype=dtype) / d_model))
    angles = pos_seq.to(dtype)[:, None] * inv_freq[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


def relative_embedding(pos_seq: torch.Tensor, d_model: int, dtype: torch.dtype) -> torch.Tensor:
    """r for the model's dtype: the angles in float64 for a float64 model, else float32."""
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    return sinusoid(pos_seq, d_model, wide).to(dtype)


def rel_shift(x: torch.Tensor) -> torch.Tensor:
    """TXL's relative shift: column k of ``x`` holds offset L-1-k; out[i, j] = x[i, j + L-1-i] for j <= i.

    Pad a zero column on the left, view [L, L+1] as [L+1, L], drop the first row, view back.
    Entries above the diagonal (j > i) are meaningless and must be masked (the decoder is causal).
    """
    *lead, q_len, k_len = x.shape
    x = F.pad(x, (1, 0)).view(*lead, k_len + 1, q_len)
    return x[..., 1:, :].reshape(*lead, q_len, k_len)


@dataclass
class LayerPrior:
    """What one layer needs of the prior: pair ids per key and the per-head pair tables [H, P, d_head]."""

    pair_ids: torch.Tensor  # [B, L], 0 = no tag
    alignment: torch.Tensor | None = None  # W_E^l pair_table  (c; position / disentangled)
    key_bias: torch.Tensor | None = None  # W_K^tag pair_table (attn_bias key term)
    value_bias: torch.Tensor | None = None  # W_V^tag pair_table (attn_bias value term)

    def n_pairs(self) -> int:
        """P, the number of distinct prior vectors (rows of any of the tables)."""
        table = next(t for t in (self.alignment, self.key_bias, self.value_bias) if t is not None)
        return table.shape[1]


@dataclass
class JoinedAddress:
    """``lis_tree2``'s input to one layer: the tree-address angles of every key (cached ones too)
    [B, H, K, d_head/2], relative to their components' tops after the newest position, and which
    keys each new query is joined with at its own time [B, 1, L, K] (``joined_tree_paths``)."""

    angles: torch.Tensor
    joined: torch.Tensor


class TagGate(torch.autograd.Function):
    """(1 + c) * bd with c_ij = per_pair[i, pair_j], read out of the per-pair table by a product with
    one-hot(pair_j) (``spread``: exact, ~3x faster than ``gather`` on CPU).

    Saves bd, c and the one-hot: backward reuses c rather than redo the product (c is one more
    [B, H, L, L] tensor per layer, as large as bd -- 2 MB per layer at batch 16 x 128, 4 heads, bf16),
    and the table's gradient is (g * bd) @ one-hot.
    """

    @staticmethod
    def forward(ctx, bd: torch.Tensor, per_pair: torch.Tensor, pair_ids: torch.Tensor) -> torch.Tensor:
        c = spread(per_pair, pair_ids)
        onehot = F.one_hot(pair_ids, per_pair.shape[-1]).to(per_pair.dtype)[:, None]  # [B, 1, L, P]
        ctx.save_for_backward(bd, c, onehot)
        return torch.addcmul(bd, bd, c)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        bd, c, onehot = ctx.saved_tensors
        grad_bd = grad_table = None
        if ctx.needs_input_grad[0]:
            grad_bd = torch.addcmul(grad, grad, c)
        if ctx.needs_input_grad[1]:
            grad_table = (grad * bd) @ onehot
        return grad_bd, grad_table, None
