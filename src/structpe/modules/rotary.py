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


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary_tables(angles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of ``angles`` [..., L, d/2] at full width [..., L, d] (pair t at t and t + d/2):
    computed once, they rotate several tensors by the same angles (q and k) with ``rotate_with``."""
    cos, sin = angles.cos(), angles.sin()
    return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)


def rotate_with(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [..., L, d] by the angles whose ``rotary_tables`` are ``cos`` / ``sin``.
    Computed in float32 (float64 stays float64) and cast back."""
    xf = x.float() if x.element_size() < 4 else x
    return (xf * cos + rotate_half(xf) * sin).to(x.dtype)


def apply_rotary(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate each frequency pair of ``x`` [..., L, d] by ``angles`` [..., L, d/2].

    ``angles`` broadcasts against ``x`` without its last dim (e.g. [L, d/2] for all batches and
    heads, [B, 1, L, d/2] per sequence, [B, H, L, d/2] per head). Computed in float32 and cast back.
    """
    if angles.shape[-1] * 2 != x.shape[-1]:
        raise ValueError(f"angles have {angles.shape[-1]} pairs but x has dim {x.shape[-1]}")
    return rotate_with(x, *rotary_tables(angles))
