"""Journey operators and the special cases of A(p, s, e) = R_pos^p R_s R_e (LIS §4.2)."""

import pytest
import torch

from structpe.lis import addresses as A
from structpe.lis.structure import from_grid, from_sequence
from structpe.modules.rotary import apply_rotary, rope_angles, rope_frequencies

D = 16


def _complex_rope(x: torch.Tensor, ang: torch.Tensor) -> torch.Tensor:
    """Independent reference: split-halves pairs as complex numbers times e^{i angle}."""
    h = x.shape[-1] // 2
    z = torch.complex(x[..., :h].double(), x[..., h:].double()) * torch.exp(1j * ang.double())
    return torch.cat([z.real, z.imag], -1).float()


def test_journey_identities_rotary_and_noncommuting():
    torch.manual_seed(0)
    ang = torch.randn(3, D // 2)
    Ms = A.rotary_matrix(ang)
    fam = A.NonCommutingAddress(3, 3, D, block=4)
    Ns = fam(torch.tensor([0, 1, 2]), torch.tensor([2, 0, 1]))
    Ns = A.blocks_to_matrix(Ns)
    for M in (Ms, Ns):
        i, j, k = M[0], M[1], M[2]
        assert torch.allclose(A.journey(i, i), torch.eye(D), atol=1e-5)  # P(i->i) = I
        assert torch.allclose(A.journey(i, k), A.journey(i, j) @ A.journey(j, k), atol=1e-4)  # composition
    # rotary journey = relative angles; score via per-token rotation = q^T P(j->i) k
    P = A.journey(Ms[0], Ms[1])
    assert torch.allclose(P, A.rotary_matrix(A.rotary_journey(ang[0], ang[1])), atol=1e-5)
    q, k = torch.randn(D), torch.randn(D)
    s_rot = apply_rotary(q[None], ang[0:1])[0] @ apply_rotary(k[None], ang[1:2])[0]
    assert torch.allclose(s_rot, q @ P @ k, atol=1e-4)
    # the same for the non-commuting family: (A_i q)^T (A_j k) = q^T A_i^-1 A_j k
    bi, bj = fam(torch.tensor(0), torch.tensor(1)), fam(torch.tensor(2), torch.tensor(0))
    s_blk = A.apply_blocks(q, bi) @ A.apply_blocks(k, bj)
    assert torch.allclose(s_blk, q @ A.journey(A.blocks_to_matrix(bi), A.blocks_to_matrix(bj)) @ k, atol=1e-4)


def test_sequence_address_is_standard_rope():
    t = from_sequence(list(range(12))).to_tensors()
    ang = A.compose(A.position_angles(t.position, rope_frequencies(D)))
    assert torch.allclose(ang, rope_angles(torch.arange(12), D))
    x = torch.randn(12, D)
    assert torch.allclose(apply_rotary(x, ang), _complex_rope(x, ang), atol=1e-5)
    q, k = apply_rotary(x, ang), apply_rotary(x.flip(0), ang)
    s = q @ k.T
    # RoPE's defining property: the score depends on j - i only (shift both by 3)
    q2 = apply_rotary(x, rope_angles(torch.arange(12) + 3, D))
    k2 = apply_rotary(x.flip(0), rope_angles(torch.arange(12) + 3, D))
    assert torch.allclose(s, q2 @ k2.T, atol=1e-4)


def test_grid_address_is_2d_rope():
    t = from_grid(torch.zeros(3, 4, dtype=torch.long)).to_tensors()
    ang = A.position_angles(t.position, A.axis_frequencies(D, 2, scheme="axial"))
    # reference RoPE-2D (axial): first half of the pairs rotate with x, second half with y,
    # each with the frequency schedule of a D/2-dim RoPE
    f = rope_frequencies(D // 2)
    ref = torch.cat([t.position[:, :1].float() * f, t.position[:, 1:].float() * f], -1)
    assert torch.allclose(ang, ref)
    x = torch.randn(len(t), D)
    assert torch.allclose(apply_rotary(x, ang), _complex_rope(x, ref), atol=1e-5)
    # journey depends on (dx, dy) only
    a, b = A.position_angles(torch.tensor([[0, 0], [1, 2]]), A.axis_frequencies(D, 2))
    c, d = A.position_angles(torch.tensor([[2, 1], [3, 3]]), A.axis_frequencies(D, 2))
    assert torch.allclose(A.rotary_journey(a, b), A.rotary_journey(c, d))


def test_hierarchical_address_is_hirope():
    # two levels (token in block, block); HiRoPE: high-frequency pairs carry the token index,
    # low-frequency pairs the block index, with the standard frequencies
    tok = torch.tensor([0, 1, 2, 0, 1, 0])
    blk = torch.tensor([0, 0, 0, 1, 1, 2])
    w = rope_frequencies(D)
    ref = torch.cat([tok[:, None].float() * w[: D // 4], blk[:, None].float() * w[D // 4 :]], -1)
    freqs = A.axis_frequencies(D, 2, scheme="hierarchical")
    # as an LIS address: position factor R_pos^p times an instance factor R_e^e (blocks = instances)
    ang = A.compose(A.position_angles(tok, freqs[0]), A.position_angles(blk, freqs[1]))
    assert torch.allclose(ang, ref)
    assert torch.allclose(ang, A.position_angles(torch.stack([tok, blk], -1), freqs))


def test_commuting_factors_lose_instance_in_reversed_journey():
    """Prop. 4.9: P = A(t,e)^-1 A(s,e) = R_e^-1 R_t^-1 R_s R_e is instance-independent when
    R_e commutes with R_t^-1 R_s (rotary), and depends on e for non-commuting SO(4) blocks."""
    torch.manual_seed(0)
    roles, inst = torch.randn(2, D // 2), torch.randn(2, D // 2)

    def rot(s, e):
        return A.rotary_matrix(A.compose(roles[s], inst[e]))

    p_e0 = A.journey(rot(1, 0), rot(0, 0))
    p_e1 = A.journey(rot(1, 1), rot(0, 1))
    assert torch.allclose(p_e0, p_e1, atol=1e-5)

    fam = A.NonCommutingAddress(2, 2, D, block=4)

    def blk(s, e):
        return A.blocks_to_matrix(fam(torch.tensor(s), torch.tensor(e)))

    q_e0 = A.journey(blk(1, 0), blk(0, 0))
    q_e1 = A.journey(blk(1, 1), blk(0, 1))
    assert (q_e0 - q_e1).abs().max() > 0.1
    # the forward-order role change Q_t,e Q_s,e^-1 = R_t R_s^-1 cancels e in both families
    f0 = blk(1, 0) @ torch.linalg.inv(blk(0, 0))
    f1 = blk(1, 1) @ torch.linalg.inv(blk(0, 1))
    assert torch.allclose(f0, f1, atol=1e-4)
    # SO(2) blocks are rotary again: they commute and lose the instance
    fam2 = A.NonCommutingAddress(2, 2, D, block=2)
    m = [[A.blocks_to_matrix(fam2(torch.tensor(s), torch.tensor(e))) for e in range(2)] for s in range(2)]
    assert torch.allclose(A.journey(m[1][0], m[0][0]), A.journey(m[1][1], m[0][1]), atol=1e-5)


def test_role_table_and_content_address():
    torch.manual_seed(0)
    roles = A.RoleAngles(4, D // 2)
    r = roles(torch.tensor([0, 1, 3, -1]))
    assert torch.all(r[0] == 0) and torch.all(r[3] == 0) and r[1].abs().sum() > 0
    ca = A.ContentInstanceAddress(8, D // 2, init_std=1.0)
    x = torch.randn(1, 5, 8)
    local = rope_angles(torch.tensor([[0, 1, 0, 1, 2]]), 8)
    inst = torch.tensor([[0, 0, 1, 1, -1]])
    out = ca(x, local, inst, 3)
    assert torch.all(out[0, 4] == 0)  # no instance -> R_e = I
    assert torch.allclose(out[0, 0], out[0, 1]) and not torch.allclose(out[0, 0], out[0, 2])
    # content-derived: the same rule addresses an unseen instance, and changing content moves it
    x2 = x.clone()
    x2[0, 2] += torch.randn(8)
    assert torch.allclose(ca(x2, local, inst, 3)[0, 0], out[0, 0])
    assert not torch.allclose(ca(x2, local, inst, 3)[0, 2], out[0, 2])
    op = A.ContentOperator(8, D, block=4)(torch.randn(2, 8))
    eye = torch.eye(4).expand_as(op)
    assert torch.allclose(op @ op.transpose(-1, -2), eye, atol=1e-5)  # SO(4) blocks


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_rotate_with_half_tables_is_ropes_full_width_form_bit_for_bit(dtype):
    """``rotate_with`` on half-width ``rotary_tables`` computed once (q and k share them) gives exactly
    the numbers of RoPE's ``x * cat(cos, cos) + rotate_half(x) * cat(sin, sin)`` in float32, so moving
    a model onto it changes no rotated value; its gradients match to rounding."""
    from structpe.modules.rotary import rotary_tables, rotate_with

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 3, 8, generator=gen).to(dtype).transpose(1, 2)  # a permuted view, as q / k
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    angles = (10 * torch.randn(2, 3, 5, 4, generator=gen)).to(wide).requires_grad_()
    x.requires_grad_()
    out = rotate_with(x, *rotary_tables(angles))
    xf = x.to(wide)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    want = (xf * cos + torch.cat((-xf[..., 4:], xf[..., :4]), -1) * sin).to(dtype)
    assert out.dtype == dtype and out.is_contiguous()
    assert torch.equal(out, want)
    w = torch.randn(out.shape, generator=gen).to(dtype)
    got = torch.autograd.grad((out * w).sum(), (x, angles))
    ref = torch.autograd.grad((want * w).sum(), (x, angles))
    for g, r in zip(got, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-5)
