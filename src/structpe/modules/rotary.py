"""Rotary operators from arbitrary angles.

RoPE (Su et al.) rotates frequency pair t of a head vector at position p by theta_{p,t} = p * w_t.
SiPE's ModernBERT position pathway adds a per-token phase offset dtheta_{p,t} (SiPE eq. 14-16) and
LIS composes position, role and instance rotations into one address A(i) (LIS §3); all three are
"rotate q and k per token by these angles", so this module takes the angles as data.

Convention: Hugging Face's split halves -- pair t is (x[t], x[t + d/2]) -- so weights and outputs
match ``transformers``' RoPE models. (torchtune pairs interleaved dims; do not mix the two.)
"""

from __future__ import annotations

import torch


def rope_frequencies(head_dim: int, theta: float = 10000.0, device=None) -> torch.Tensor:
    """w_t = theta^(-2t/d) for t = 0 .. d/2-1, shape [d/2]."""
    if head_dim % 2:
        raise ValueError(f"rotary head_dim must be even, got {head_dim}")
    exponent = torch.arange(0, head_dim, 2, device=device, dtype=torch.int64).float() / head_dim
    return 1.0 / (theta**exponent)


def rope_angles(positions: torch.Tensor, head_dim: int, theta: float = 10000.0) -> torch.Tensor:
    """Angles theta_{p,t} = p * w_t for integer or real positions [..., L] -> [..., L, d/2]."""
    freqs = rope_frequencies(head_dim, theta, device=positions.device)
    return positions.to(torch.float32)[..., None] * freqs


def rotary_tables(angles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of ``angles`` [..., L, d/2]: computed once, they rotate several tensors by the same
    angles (q and k) with ``rotate_with``."""
    return angles.cos(), angles.sin()


def rotate_with(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [..., L, d] by the angles whose ``rotary_tables`` are ``cos`` / ``sin`` [..., L, d/2].

    Pair t = (x_t, x_{t+d/2}) -> (x_t cos - x_{t+d/2} sin, x_{t+d/2} cos + x_t sin): the numbers of
    RoPE's ``x * cat(cos, cos) + rotate_half(x) * cat(sin, sin)`` bit for bit, on half-width tables
    (no concatenated or negated copies: 0.69x the CPU time of that form, forward and backward, for
    bf16 q and k at 16 x 4 x 128 x 64 on an Intel Xeon; docs/lis.md). Computed in float32 (float64
    stays float64) and cast back.
    """
    x1, x2 = (x.float() if x.element_size() < 4 else x).chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


def apply_rotary(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate each frequency pair of ``x`` [..., L, d] by ``angles`` [..., L, d/2].

    ``angles`` broadcasts against ``x`` without its last dim (e.g. [L, d/2] for all batches and
    heads, [B, 1, L, d/2] per sequence, [B, H, L, d/2] per head). Computed in float32 and cast back.
    """
    if angles.shape[-1] * 2 != x.shape[-1]:
        raise ValueError(f"angles have {angles.shape[-1]} pairs but x has dim {x.shape[-1]}")
    return rotate_with(x, *rotary_tables(angles))
