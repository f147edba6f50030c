"""LISformer: causality of the two-term line-address scheme, zero address of the last line,
agreement with an explicit score formula, training signal, safetensors round trip."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention

from structpe.errors import StructpeError
from structpe.lis import flex
from structpe.lis.lisformer import LISformer, LISformerConfig, alibi_slopes
from structpe.lis.token_structure import line_structure, two_term_plan
from structpe.modules.rotary import apply_rotary

NL = 0


def _seq(L=48, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(1, 12, (2, L), generator=g)
    x[0, [4, 11, 19, 33]] = NL
    x[1, [7, 8, 25]] = NL
    return x


def _model(pe, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = LISformerConfig(vocab_size=12, n_layers=2, n_heads=2, d_model=32, pe=pe, **kw)
    m = LISformer(cfg, newline_id=NL)
    if m.addresses.content is not None:  # make addresses large so leaks would be visible
        torch.nn.init.normal_(m.addresses.content.proj.weight, std=1.0)
    return m.eval()


def test_line_structure():
    x = torch.tensor([[3, 4, NL, 5, NL, 6, 7]])
    st = line_structure(x, NL)
    assert st.position.tolist() == [[0, 1, 2, 0, 1, 0, 1]]
    assert st.instance.tolist() == [[0, 0, 0, 1, 1, 2, 2]]
    assert st.address.tolist() == [[0, 0, 0, 1, 1, -1, -1]]  # the unterminated last line: none


@pytest.mark.parametrize(
    "pe",
    ["lis", "rope", "alibi", "random", "lis-alibi", "lis-qprev", "random-qprev", "lis-flex", "alibi-flex"],
)
@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_causal_no_earlier_prediction_moves(pe, monkeypatch):
    """Every model (and the block-sparse path, eager FlexAttention so no compiler is needed)."""
    kw = {"instance_alibi": True} if pe == "lis-alibi" else {}
    if pe.endswith("-qprev"):
        kw["query_address"] = "previous"
    if pe.endswith("-flex"):
        monkeypatch.setattr(flex, "compiled_flex", lambda: flex_attention)
        monkeypatch.setattr(flex, "flex_compiles", lambda device_type: True)
        kw["attn_backend"] = "flex"
    m = _model(pe.split("-")[0], **kw)
    x = _seq()
    with torch.no_grad():
        torch.manual_seed(1)
        base = m(x).logits
        # eager FlexAttention is slow: every 5th position (all others on the SDPA path)
        for t in range(0, x.shape[1], 5 if pe.endswith("-flex") else 1):
            for new in [NL, 11] if pe != "random" else [11]:  # also turn a char into a newline
                x2 = x.clone()
                x2[:, t] = new if x[0, t] != new else 5
                torch.manual_seed(1)
                out = m(x2).logits
                moved = (out[:, :t] - base[:, :t]).abs().max().item() if t else 0.0
                assert moved < 1e-5, f"{pe}: changing position {t} moved an earlier logit by {moved}"


def test_same_line_future_does_not_leak_but_line_content_reaches_later_lines():
    m = _model("lis")
    x = _seq()
    with torch.no_grad():
        base = m(x).logits
        x2 = x.clone()
        x2[0, 9] = 11 if x[0, 9] != 11 else 5  # inside line 1 (positions 5..11)
        out = m(x2).logits
    diff = (out - base).abs().amax(-1)[0]
    assert diff[:9].max() < 1e-5  # characters earlier in the same line: untouched
    assert diff[12:].min() > 0  # later lines see the line (content address and keys)


def test_incomplete_last_line_has_zero_address():
    m = _model("lis")
    x = _seq()
    emb = m.tok_emb(x)
    st = line_structure(x, NL)
    q_ang, k_loc, k_addr, q_addr = m.addresses(emb, st)
    assert q_addr is None  # the default: no query-side address
    delta = (k_addr - k_loc)[:, 0].abs().amax(-1)  # [B, L]: the instance factor
    last = st.address == -1
    assert last[0, 34:].all() and last[1, 26:].all()
    assert torch.all(delta[last] == 0)
    assert torch.all(delta[~last] > 0)
    assert torch.equal(q_ang, k_loc)  # queries: local rotation only


@pytest.mark.parametrize("chunk", [7, 16, 256])
@pytest.mark.parametrize("instance_alibi", [False, True])
@pytest.mark.parametrize("query_address", ["none", "previous"])
def test_two_term_attention_matches_explicit_scores(chunk, instance_alibi, query_address):
    m = _model("lis", query_address=query_address)
    x = _seq()
    attn = m.blocks[0].attn
    slopes = alibi_slopes(2) if instance_alibi else None
    with torch.no_grad():
        h = m.blocks[0].ln1(m.tok_emb(x))
        st = line_structure(x, NL)
        q_ang, k_loc, k_addr, q_addr = m.addresses(m.tok_emb(x), st)
        dtype = torch.float32 if instance_alibi else None
        got = attn(h, q_ang, k_loc, k_addr, two_term_plan(st.instance, chunk, dtype, slopes), q_addr)
        B, L, D = h.shape
        q, k, v = attn.qkv(h).view(B, L, 3, 2, D // 2).permute(2, 0, 3, 1, 4)
        qr = apply_rotary(q, q_ang)
        s_local = qr @ apply_rotary(k, k_loc).transpose(-1, -2)
        qa = qr if q_addr is None else apply_rotary(q, q_addr)  # the query-side address: addressed term only
        s_addr = qa @ apply_rotary(k, k_addr).transpose(-1, -2)
        same = (st.instance[:, :, None] == st.instance[:, None, :])[:, None]
        s = torch.where(same, s_local, s_addr) / math.sqrt(D // 2)
        if instance_alibi:  # -m_h * (line distance); 0 within a line
            dist = (st.instance[:, :, None] - st.instance[:, None, :]).float()[:, None]
            s = s - slopes[None, :, None, None] * dist
        s = s.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
        y = F.softmax(s, -1) @ v
        ref = attn.proj(y.transpose(1, 2).reshape(B, L, D))
    assert torch.allclose(got, ref, atol=1e-5)


def test_alibi_slopes_match_paper():
    assert alibi_slopes(4).tolist() == [2**-2, 2**-4, 2**-6, 2**-8]


def test_random_addresses_change_every_pass():
    m = _model("random")
    x = _seq()
    with torch.no_grad():
        a = m(x).logits
        b = m(x).logits
    assert not torch.allclose(a, b)


@pytest.mark.parametrize("pe", ["lis", "rope"])
def test_few_steps_lower_the_loss(pe):
    torch.manual_seed(0)
    text = ("to be or not to be\nthat is the question\n" * 8).encode()
    data = torch.tensor(list(text))
    vocab = sorted(set(data.tolist()))
    ids = torch.tensor([vocab.index(c) for c in data.tolist()])
    m = LISformer(
        LISformerConfig(vocab_size=len(vocab), n_layers=2, n_heads=2, d_model=32, pe=pe),
        newline_id=vocab.index(ord("\n")),
    )
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    x, y = ids[None, :-1], ids[None, 1:]
    losses = []
    for _ in range(15):
        loss = m(x, y).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


def test_save_and_load_safetensors(tmp_path):
    m = _model("lis")
    m.save_pretrained(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "model.safetensors").is_file()
    m2 = LISformer.from_pretrained(tmp_path / "ckpt").eval()
    x = _seq()
    with torch.no_grad():
        assert torch.allclose(m(x).logits, m2(x).logits)


def test_a_broken_folder_is_one_clear_error(tmp_path):
    """The shared save/load helper (structpe.io) names the folder; no traceback-worthy surprise."""
    _model("lis").save_pretrained(tmp_path / "ckpt")
    weights = tmp_path / "ckpt" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # truncated
    with pytest.raises(StructpeError, match=r"ckpt: not a loadable LISformer folder \(SafetensorError"):
        LISformer.from_pretrained(tmp_path / "ckpt")
    weights.unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors not found: is .* a LISformer folder"):
        LISformer.from_pretrained(tmp_path / "ckpt")


def test_instance_alibi_needs_the_two_term_score():
    with pytest.raises(ValueError, match="instance_alibi"):
        LISformerConfig(pe="rope", instance_alibi=True)
    with pytest.raises(ValueError, match="dtype"):
        two_term_plan(torch.zeros(1, 4, dtype=torch.long), 4, None, alibi_slopes(2))
    m = LISformer(LISformerConfig(vocab_size=12, n_layers=1, n_heads=2, d_model=16, instance_alibi=True), NL)
    out = m(_seq(), _seq())
    logits, loss = out.logits, out.loss
    assert logits.shape == (2, 48, 12) and torch.isfinite(loss)


def test_config_errors():
    with pytest.raises(ValueError, match="pe must be"):
        LISformerConfig(pe="sinusoid")
    with pytest.raises(ValueError, match="newline_id"):
        LISformer(LISformerConfig(vocab_size=5, d_model=16, n_heads=2, pe="lis"))(
            torch.zeros(1, 4, dtype=torch.long)
        )


def test_own_instance_attention_is_a_probability_mass():
    m = _model("lis")
    x = _seq()
    mass = m.own_instance_attention(x)
    assert mass.shape == (2, 2, 2, 48)  # [layers, B, H, L]
    assert bool(((mass >= 0) & (mass <= 1 + 1e-6)).all())
    # the first query of a line sees only itself among same-line keys; a first line sees nothing else
    assert torch.allclose(mass[:, 0, :, :4], torch.ones(2, 2, 4))  # line 0 of row 0: only own keys
    single = torch.randint(1, 12, (1, 16))  # no newline: one instance, all mass on it
    assert torch.allclose(m.own_instance_attention(single), torch.ones(2, 1, 2, 16))
    with pytest.raises(ValueError, match="two-term"):
        _model("rope").own_instance_attention(x)


def test_query_previous_address_changes_the_cross_line_term_only():
    """``query_address="previous"``: no new parameters; the query of line e carries the address of
    line e-1 on the addressed term (so keys of line e-1 meet it with the identity journey); line 0,
    same-line scores and a text without newlines are exactly the default model's."""
    base = _model("lis")
    prev = _model("lis", query_address="previous")
    prev.load_state_dict(base.state_dict())  # strict: the same parameters
    x = _seq()
    st = line_structure(x, NL)
    with torch.no_grad():
        q_ang, k_loc, k_addr, q_addr = prev.addresses(prev.tok_emb(x), st)
        q_factor, k_factor = q_addr - q_ang, k_addr - k_loc  # [B, H, L, pairs]
        for b in range(2):
            for t in range(x.shape[1]):
                e = int(st.instance[b, t])
                if e == 0:
                    assert q_factor[b, :, t].abs().max() == 0
                else:  # the factor of any key in line e - 1
                    j = int((st.instance[b] == e - 1).nonzero()[0])
                    assert torch.allclose(q_factor[b, :, t], k_factor[b, :, j], atol=1e-5)
        assert torch.equal(base.addresses(base.tok_emb(x), st)[2], k_addr)  # keys unchanged
        a, c = base(x).logits, prev(x).logits
        first = st.instance == 0
        assert (a - c)[first].abs().max() < 1e-5  # line 0 has no earlier line: the same
        assert (a - c)[~first].abs().amax(-1).min() > 0  # later lines: the cross-line term moved
        single = torch.randint(1, 12, (1, 16))  # no newline: one instance, nothing to address
        assert torch.allclose(base(single).logits, prev(single).logits, atol=1e-6)
        mass = prev.own_instance_attention(x)
        assert bool(((mass >= 0) & (mass <= 1 + 1e-6)).all())


def test_query_address_config_errors():
    with pytest.raises(ValueError, match="query_address must be"):
        LISformerConfig(query_address="own")
    with pytest.raises(ValueError, match="needs pe='lis' or 'random'"):
        LISformerConfig(pe="rope", query_address="previous")
    with pytest.raises(ValueError, match="SDPA path"):
        LISformerConfig(query_address="previous", attn_backend="flex")
