"""Structural addresses A(i) and journey operators P(j->i) = A(i)^-1 A(j) (LIS paper §4.2).

Attention compares endpoints i (query) and j (key) by  score_ij = q_i^T P(j->i) k_j  with
P(j->i) = A(i)^-1 A(j) (Def. 4.6). For orthogonal A this is (A(i) q_i)^T (A(j) k_j), so the
address is applied to q and k *per token* and any attention kernel (incl. fused SDPA) still works.

Two operator families:

* Rotary (commuting): one angle per frequency pair, A(p, s, e) = R_pos^p R_s R_e (Prop. 4.7), so
  angles simply add. Standard RoPE (p only), RoPE-2D (one axis per pair chunk) and HiRoPE
  (hierarchy levels on chunks of the frequency schedule) are special cases. Role factors come from
  a learned table (``RoleAngles``), instance factors from content (``ContentInstanceAddress``:
  rotate token embeddings by their local angles, mean-pool per instance, LayerNorm + Linear ->
  angles; the paper's R_e = phi_theta(content_e)).
* Block rotations in SO(k) (non-commuting): exp of learned skew-symmetric generators. Needed when
  the order of role and instance factors must carry information: with A(s, e) = R_s R_e the
  within-instance journey R_e^-1 R_t^-1 R_s R_e is instance-independent iff R_e commutes with
  R_t^-1 R_s (Prop. 4.9), which rotary factors always do.

Rotary convention: Hugging Face split halves (see ``structpe.modules.rotary``).
"""

from __future__ import annotations

import torch
from torch import nn

from structpe.modules.rotary import apply_rotary, rope_frequencies


# --- rotary family --------------------------------------------------------------------------------
def rotary_matrix(angles: torch.Tensor) -> torch.Tensor:
    """The d x d operator that ``apply_rotary(x, angles)`` applies: [..., d/2] -> [..., d, d]."""
    d = 2 * angles.shape[-1]
    eye = torch.eye(d, dtype=torch.float32, device=angles.device)
    # rows of apply_rotary(eye) are M e_k, i.e. the columns of M
    return apply_rotary(eye, angles[..., None, :]).transpose(-1, -2)


def rotary_journey(angles_i: torch.Tensor, angles_j: torch.Tensor) -> torch.Tensor:
    """Angles of P(j->i) = A(i)^-1 A(j) for rotary addresses: theta_j - theta_i."""
    return angles_j - angles_i


def journey(A_i: torch.Tensor, A_j: torch.Tensor) -> torch.Tensor:
    """P(j->i) = A(i)^-1 A(j) for general invertible address matrices [..., d, d]."""
    return torch.linalg.solve(A_i, A_j)


def axis_frequencies(
    head_dim: int, n_axes: int, theta: float = 10000.0, scheme: str = "axial"
) -> torch.Tensor:
    """Per-axis frequency vectors [n_axes, d/2], each zero outside its own chunk of pairs.

    ``axial`` (RoPE-2D, Heo et al. 2024): axis a owns d/(2N) pairs with the full schedule of a
    d/N-dim RoPE. ``hierarchical`` (HiRoPE, Zhang et al. 2024): level a owns chunk a of the
    standard d-dim schedule (level 0 = highest frequencies = finest coordinate).
    """
    pairs = head_dim // 2
    if head_dim % 2 or pairs % n_axes:
        raise ValueError(f"head_dim/2 = {pairs} must split evenly over {n_axes} axes")
    chunk = pairs // n_axes
    out = torch.zeros(n_axes, pairs)
    if scheme == "axial":
        f = rope_frequencies(2 * chunk, theta)
        for a in range(n_axes):
            out[a, a * chunk : (a + 1) * chunk] = f
    elif scheme == "hierarchical":
        f = rope_frequencies(head_dim, theta)
        for a in range(n_axes):
            out[a, a * chunk : (a + 1) * chunk] = f[a * chunk : (a + 1) * chunk]
    else:
        raise ValueError(f"unknown multi-axis scheme {scheme!r} (axial | hierarchical)")
    return out


def position_angles(position: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """R_pos^p as angles. ``position`` [..., n] with ``freqs`` [d/2] (one axis), or
    [..., n, N] with ``freqs`` [N, d/2] (one factor per axis, multiplied = angles added)."""
    p = position.to(torch.float32)
    if freqs.dim() == 1:
        return p[..., None] * freqs
    if p.shape[-1] != freqs.shape[0]:
        raise ValueError(f"position has {p.shape[-1]} axes, freqs {freqs.shape[0]}")
    return p @ freqs


class RoleAngles(nn.Module):
    """Learned role factor R_s: one phase per frequency pair and role (role 0 can be 'no role').

    This is the paper's slot-angle table (App. F.3: 57 relations x 4 slots x d/2 phases).
    """

    def __init__(self, n_roles: int, n_pairs: int, init_std: float = 0.5, zero_role: int | None = 0):
        super().__init__()
        self.table = nn.Parameter(torch.randn(n_roles, n_pairs) * init_std)
        self.zero_role = zero_role

    def forward(self, role: torch.Tensor) -> torch.Tensor:
        ang = self.table[role.clamp(min=0)]
        keep = role >= 0
        if self.zero_role is not None:
            keep = keep & (role != self.zero_role)
        return ang * keep[..., None]


def compose(*angles: torch.Tensor | None) -> torch.Tensor:
    """A = R_pos^p R_s R_e for commuting rotary factors: the angles add."""
    parts = [a for a in angles if a is not None]
    if not parts:
        raise ValueError("compose needs at least one factor")
    out = parts[0]
    for a in parts[1:]:
        out = out + a
    return out


class ContentInstanceAddress(nn.Module):
    """Content-derived instance factor R_e = phi_theta(content_e) (LIS §1, App. F.1, F.4).

    For each instance: rotate the token embeddings by their local angles, mean-pool over the
    instance, LayerNorm, Linear -> one angle per frequency pair. Tokens whose instance id is < 0
    (no instance, or an instance that is not complete yet) get a zero factor (R_e = I).
    """

    def __init__(self, d_model: int, n_pairs: int, init_std: float = 0.02):
        super().__init__()
        if d_model % 2:
            raise ValueError("d_model must be even to rotate embeddings")
        self.norm = nn.LayerNorm(d_model)
        self.proj = nn.Linear(d_model, n_pairs)
        nn.init.normal_(self.proj.weight, std=init_std)
        nn.init.zeros_(self.proj.bias)

    def instance_angles(
        self, x: torch.Tensor, local_angles: torch.Tensor, instance: torch.Tensor, n_instances: int
    ) -> torch.Tensor:
        """Per-instance angles [B, n_instances, n_pairs] from x [B, L, D], local angles
        [B, L, D/2] (at the embedding width) and instance ids [B, L] (< 0: ignored)."""
        B, L, D = x.shape
        rot = apply_rotary(x, local_angles)
        valid = instance >= 0
        idx = instance.clamp(min=0)
        sums = x.new_zeros(B, n_instances, D).scatter_add_(
            1, idx[..., None].expand(B, L, D), rot * valid[..., None]
        )
        counts = x.new_zeros(B, n_instances).scatter_add_(1, idx, valid.to(x.dtype))
        pooled = sums / counts.clamp(min=1)[..., None]
        ang = self.proj(self.norm(pooled))
        return ang * (counts > 0)[..., None]

    def forward(
        self, x: torch.Tensor, local_angles: torch.Tensor, instance: torch.Tensor, n_instances: int
    ) -> torch.Tensor:
        """Per-token instance factor [B, L, n_pairs] (zero where ``instance`` < 0)."""
        ang = self.instance_angles(x, local_angles, instance, n_instances)
        tok = torch.gather(ang, 1, instance.clamp(min=0)[..., None].expand(-1, -1, ang.shape[-1]))
        return tok * (instance >= 0)[..., None]


# --- non-commuting family: block rotations in SO(k) -----------------------------------------------
def skew(params: torch.Tensor, k: int) -> torch.Tensor:
    """[..., k(k-1)/2] upper-triangle parameters -> skew-symmetric [..., k, k]."""
    iu = torch.triu_indices(k, k, offset=1, device=params.device)
    W = params.new_zeros(*params.shape[:-1], k, k)
    W[..., iu[0], iu[1]] = params
    return W - W.transpose(-1, -2)


def apply_blocks(x: torch.Tensor, ops: torch.Tensor) -> torch.Tensor:
    """Apply block-diagonal operators ops [..., nb, k, k] to x [..., nb*k] (contiguous blocks)."""
    nb, k = ops.shape[-3], ops.shape[-1]
    if x.shape[-1] != nb * k:
        raise ValueError(f"x has dim {x.shape[-1]}, operators cover {nb} x {k}")
    xb = x.float().reshape(*x.shape[:-1], nb, k, 1)
    return (ops @ xb).reshape(x.shape).to(x.dtype)


def blocks_to_matrix(ops: torch.Tensor) -> torch.Tensor:
    """[..., nb, k, k] -> the dense block-diagonal [..., nb*k, nb*k]."""
    nb, k = ops.shape[-3], ops.shape[-1]
    out = ops.new_zeros(*ops.shape[:-3], nb * k, nb * k)
    for b in range(nb):
        out[..., b * k : (b + 1) * k, b * k : (b + 1) * k] = ops[..., b, :, :]
    return out


class BlockRotations(nn.Module):
    """A learned family of SO(k)^(d/k) operators R_c = exp(W_c - W_c^T), one per label c.

    For k >= 3 the blocks do not commute in general, so A(s, e) = R_s R_e keeps the order of
    factors and the within-instance journey R_e^-1 R_t^-1 R_s R_e depends on e (Prop. 4.9).
    """

    def __init__(self, n_labels: int, dim: int, block: int = 4, init_std: float = 0.5):
        super().__init__()
        if dim % block:
            raise ValueError(f"dim {dim} is not a multiple of the block size {block}")
        self.block = block
        self.n_blocks = dim // block
        n_par = block * (block - 1) // 2
        self.generators = nn.Parameter(torch.randn(n_labels, self.n_blocks, n_par) * init_std)

    def forward(self, label: torch.Tensor) -> torch.Tensor:
        """label [...] -> operators [..., nb, k, k]."""
        return torch.linalg.matrix_exp(skew(self.generators[label], self.block))


class NonCommutingAddress(nn.Module):
    """A(s, e) = R_s R_e with R_s, R_e in SO(k)^(d/k); a content map can replace the instance
    table via ``ContentOperator``."""

    def __init__(self, n_roles: int, n_instances: int, dim: int, block: int = 4, init_std: float = 0.5):
        super().__init__()
        self.roles = BlockRotations(n_roles, dim, block, init_std)
        self.instances = BlockRotations(n_instances, dim, block, init_std)

    def forward(self, role: torch.Tensor, instance: torch.Tensor) -> torch.Tensor:
        return self.roles(role) @ self.instances(instance)


class ContentOperator(nn.Module):
    """Content-derived SO(k) blocks: pooled content -> LayerNorm -> Linear -> skew -> exp."""

    def __init__(self, d_model: int, dim: int, block: int = 4, init_std: float = 0.02):
        super().__init__()
        self.block = block
        self.n_blocks = dim // block
        self.norm = nn.LayerNorm(d_model)
        self.proj = nn.Linear(d_model, self.n_blocks * block * (block - 1) // 2)
        nn.init.normal_(self.proj.weight, std=init_std)
        nn.init.zeros_(self.proj.bias)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        par = self.proj(self.norm(pooled)).reshape(*pooled.shape[:-1], self.n_blocks, -1)
        return torch.linalg.matrix_exp(skew(par, self.block))


__all__ = [
    "BlockRotations",
    "ContentInstanceAddress",
    "ContentOperator",
    "NonCommutingAddress",
    "RoleAngles",
    "apply_blocks",
    "axis_frequencies",
    "blocks_to_matrix",
    "compose",
    "journey",
    "position_angles",
    "rotary_journey",
    "rotary_matrix",
    "skew",
]
