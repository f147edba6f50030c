"""Block-sparse FlexAttention path vs the SDPA path of the LISformer (two-term, ALiBi, instance ALiBi)."""

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from structpe.lis import flex
from structpe.lis.lisformer import LISformer, LISformerConfig
from structpe.lis.token_structure import line_structure

VARIANTS = {"lis": ("lis", False), "lis-alibi": ("lis", True), "alibi": ("alibi", False)}


def _pair(name: str, seed: int = 0, device: str = "cpu"):
    pe, inst_alibi = VARIANTS[name]
    out = []
    for backend in ("sdpa", "flex"):
        torch.manual_seed(seed)
        cfg = LISformerConfig(
            vocab_size=12,
            n_layers=2,
            n_heads=2,
            d_model=16,
            pe=pe,
            instance_alibi=inst_alibi,
            attn_backend=backend,
        )
        out.append(LISformer(cfg, newline_id=0).to(device))
    return out


def _tokens(L: int, device: str = "cpu") -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 12, (2, L), generator=g).to(device)  # id 0 = newline: ~1 line in 12


def test_block_mask_tiles_match_the_pattern():
    """Skipped tiles have no kept entry, full tiles keep every entry, the rest are partial."""
    idx = _tokens(300)
    st = line_structure(idx, 0)
    plan = flex.two_term_flex_plan(st.instance)
    t = torch.arange(300)
    qi = st.instance[:, :, None]
    keep = torch.cat(
        [st.instance[:, None] < qi, (st.instance[:, None] == qi) & (t[None] <= t[:, None])], dim=-1
    )
    bm = plan.block_mask
    B, nq = 2, 3
    for b in range(B):
        for i in range(nq):
            partial = set(bm.kv_indices[b, 0, i, : bm.kv_num_blocks[b, 0, i]].tolist())
            full = set(bm.full_kv_indices[b, 0, i, : bm.full_kv_num_blocks[b, 0, i]].tolist())
            assert not partial & full
            for j in range(5):  # 600 keys -> 5 tiles of 128
                tile = keep[b, i * 128 : (i + 1) * 128, j * 128 : (j + 1) * 128]
                assert (j in full) == bool(tile.all())
                assert (j in partial) == bool(tile.any() and not tile.all())
    skipped = 1 - (bm.kv_num_blocks.sum() + bm.full_kv_num_blocks.sum()).item() / (B * nq * 5)
    assert skipped > 0.2  # upper-triangle and off-band local tiles are never computed (more at long L)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("name", list(VARIANTS))
def test_flex_forward_equals_sdpa(name, monkeypatch):
    """The model's flex path (mask_mod, score_mod, block mask; eager kernel so the test needs no
    compiler) gives the SDPA path's logits within 1e-5."""
    monkeypatch.setattr(flex, "compiled_flex", lambda: flex_attention)
    monkeypatch.setattr(flex, "flex_compiles", lambda device_type: True)
    sdpa, fx = _pair(name)
    idx = _tokens(300)
    with torch.no_grad():
        a = sdpa(idx).logits
        b = fx(idx).logits
    assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
    with torch.enable_grad():  # gradients on a CPU: FlexAttention has no CPU backward -> SDPA path
        assert not flex.use_flex("flex", torch.device("cpu"))
    with torch.no_grad():  # auto: CUDA only (the CPU kernel is slower than masked SDPA)
        assert flex.use_flex("flex", torch.device("cpu")) and not flex.use_flex("auto", torch.device("cpu"))


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="compiled FlexAttention gradients need CUDA: torch's FlexAttention has no CPU backward, "
    "and compiling it on a CPU takes about a minute (benchmarks/lis_timing.py checks the compiled "
    "CPU forward)",
)
@pytest.mark.parametrize("name", list(VARIANTS))
def test_compiled_flex_outputs_and_gradients_equal_sdpa(name):
    if not flex.flex_compiles("cuda"):
        pytest.skip("torch.compile of FlexAttention is unavailable on this CUDA setup")
    sdpa, fx = _pair(name, device="cuda")
    idx = _tokens(300, "cuda")
    la = sdpa(idx, idx).logits
    lb = fx(idx, idx).logits
    ga = torch.autograd.grad(la.sum(), list(sdpa.parameters()))
    gb = torch.autograd.grad(lb.sum(), list(fx.parameters()))
    assert torch.allclose(la, lb, atol=1e-5)
    for x, y in zip(ga, gb, strict=True):
        assert torch.allclose(x, y, atol=1e-5)
