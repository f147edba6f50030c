"""The Transformer-XL SiPE decoder against the equations of SiPE §3.3 (eq. 3-9) and Dai et al. (2019)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml

import structpe
from structpe.models import SiPEConfig, build_model, load
from structpe.models.config import FAMILY_INJECTIONS, SYNTAX_LOSSES
from structpe.models.txl import TransfoXLSiPEForCausalLM, _explicit_attention
from structpe.models.txl_parts import TagGate, rel_shift, sinusoid
from structpe.modules.prior import TagIdError
from structpe.modules.rotary import apply_rotary
from structpe.modules.tree_address import joined_tree_paths, tree_paths

VARIANTS = FAMILY_INJECTIONS["txl"]
PRIORED = [v for v in VARIANTS if v != "none"]
VOCAB, LENGTH = 37, 9


def tiny(injection: str = "none", dtype=torch.float64, seed: int = 0, **kw) -> TransfoXLSiPEForCausalLM:
    """A 2-layer model with dropout off and W_E / W^tag large enough that the prior matters."""
    args = dict(
        family="txl",
        injection=injection,
        vocab_size=VOCAB,
        d_model=16,
        n_layers=2,
        n_heads=2,
        d_ff=32,
        dropout=0.0,
        attention_dropout=0.0,
        prior_proj_init_std=0.3,
        initializer_range=0.3,
    )
    args.update(kw)
    torch.manual_seed(seed)
    return build_model(SiPEConfig(**args)).to(dtype).eval()


def batch(seed: int = 1, bsz: int = 2, length: int = LENGTH):
    """Random tokens and tags; position 3 is a continuation subword (no tag)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (bsz, length), generator=g)
    t = torch.randint(0, 2, (bsz, length), generator=g)
    n = torch.randint(0, 5, (bsz, length), generator=g)
    t[:, 3] = -100
    n[:, 3] = -100
    return ids, t, n


# -- the relative shift ----------------------------------------------------------------------------


def test_rel_shift_equals_explicit_offset_formula():
    torch.manual_seed(0)
    bsz, heads, length, d_head, d_model = 2, 3, 7, 4, 12
    q = torch.randn(bsz, heads, length, d_head, dtype=torch.float64)
    v = torch.randn(heads, d_head, dtype=torch.float64)
    w_r = torch.randn(heads * d_head, d_model, dtype=torch.float64)
    r = sinusoid(torch.arange(length - 1, -1, -1), d_model, torch.float64)  # offsets L-1 .. 0
    r_k = (r @ w_r.T).view(length, heads, d_head)
    shifted = rel_shift(torch.einsum("bhid,jhd->bhij", q + v[:, None], r_k))
    for i in range(length):
        for j in range(i + 1):
            # r_{i-j} from the definition concat[sin((i-j) f), cos((i-j) f)], f_k = 10000^(-2k/d)
            f = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
            r_ij = torch.cat([torch.sin((i - j) * f), torch.cos((i - j) * f)])
            explicit = torch.einsum("bhd,hd->bh", q[:, :, i] + v, (w_r @ r_ij).view(heads, d_head))
            torch.testing.assert_close(shifted[:, :, i, j], explicit)


def test_tag_gate_gradient():
    """The memory-saving (1 + c) * BD autograd function against finite differences."""
    g = torch.Generator().manual_seed(0)
    bd = torch.randn(2, 2, 5, 5, dtype=torch.float64, generator=g).requires_grad_()
    per_pair = torch.randn(2, 2, 5, 4, dtype=torch.float64, generator=g).requires_grad_()
    ids = torch.randint(0, 4, (2, 5), generator=g)
    assert torch.autograd.gradcheck(lambda a, b: TagGate.apply(a, b, ids), (bd, per_pair))
    c = per_pair.gather(-1, ids[:, None, None, :].expand(2, 2, 5, 5))
    assert torch.equal(TagGate.apply(bd, per_pair, ids), torch.addcmul(bd, bd, c))


def test_input_prior_lookup_equals_indexing_the_pair_table():
    """`input` reads each position's prior with an embedding lookup: the rows of table[pair_ids]
    exactly, and the same gradient for the tag tables (up to summation order)."""
    model = tiny("input")
    ids, t, n = batch()
    table, _ = model._prior_tables()
    pair_ids = model.prior.pair_ids(t, n)
    got, _ = model.layer_priors(t, n, None, ids.shape, ids.device)
    assert torch.equal(got, table[pair_ids])
    weight = torch.randn_like(got)
    grads = [torch.autograd.grad((x * weight).sum(), model.prior.terminal.weight)[0]
             for x in (got, model._prior_tables()[0][pair_ids])]
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-12, atol=1e-12)


def test_explicit_attention_equals_sdpa():
    """The bf16 CPU training path's attention (train.fast_bf16) computes SDPA's softmax: the same
    output and gradients, with extra pair dims on q / k / v as the prior sites add them."""
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 3, 6, 12, dtype=torch.float64, generator=g).requires_grad_() for _ in range(2))
    v = torch.randn(2, 3, 6, 9, dtype=torch.float64, generator=g).requires_grad_()
    bias = torch.randn(2, 3, 6, 6, dtype=torch.float64, generator=g).requires_grad_()
    allowed = torch.ones(6, 6, dtype=torch.bool).tril()[None, None]
    outs = []
    for explicit in (False, True):
        masked = bias.masked_fill(~allowed, float("-inf"))
        if explicit:
            out = _explicit_attention(q, k, v, masked, 0.0, 0.3)
        else:
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=masked, scale=0.3)
        outs.append((out, *torch.autograd.grad(out.square().sum(), (q, k, v, bias))))
    for a, b in zip(*outs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("injection", ["none", "position", "position+attn_bias"])
def test_bf16_model_trains_through_explicit_attention(injection, monkeypatch):
    """A bf16 model in training (train.fast_bf16) takes the explicit path (never SDPA); its loss and
    gradients follow the float64 model's within bf16 rounding."""
    ids, t, n = batch()
    losses, grads = [], []
    for dtype in (torch.float64, torch.bfloat16):
        if dtype == torch.bfloat16:
            monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", None)
        model = tiny(injection, dtype=dtype).train()
        out = model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids)
        out.loss.backward()
        losses.append(float(out.loss.detach()))
        grads.append(model.layers[0].attn.qkv.weight.grad.double())
    assert losses[1] == pytest.approx(losses[0], rel=2e-2)
    assert torch.nn.functional.cosine_similarity(grads[0].flatten(), grads[1].flatten(), dim=0) > 0.99


# -- a slow reference written from the paper's equations ------------------------------------------


def reference_block(model, layer: int, x: torch.Tensor, ids, t, n, mask=None):
    """One block, score and value written out per (i, j) from SiPE eq. 3-9; returns (probs, output)."""
    cfg, blk = model.config, model.layers[layer]
    att = blk.attn
    H, d = cfg.n_heads, cfg.d_head
    x_in = blk.ln_attn(x) if cfg.pre_norm else x
    q, k, val = (x_in @ att.qkv.weight.T).view(*x.shape[:2], 3, H, d).unbind(2)  # [B, L, H, d]
    bsz, length = ids.shape
    # prior_j = m_j (E_T[tau_j] + E_N[nu_j])
    prior = torch.zeros(bsz, length, cfg.d_model, dtype=x.dtype)
    if model.prior is not None:
        m = (t != -100).unsqueeze(-1)
        prior = m * (
            model.prior.terminal.weight[t.clamp_min(0)] + model.prior.nonterminal.weight[n.clamp_min(0)]
        )

    def per_head(proj, vec):  # [W prior_j]_n, for the `model` and `head` targets
        if proj is None or not proj.has_layer(layer):
            return None
        w = proj.proj["shared" if proj.shared else str(layer)].weight
        out = vec @ w.T
        return (
            out.view(*out.shape[:-1], H, d)
            if proj.target == "model"
            else out.unsqueeze(-2).expand(*out.shape[:-1], H, d)
        )

    theta = None  # lis_tree: word j's tree-address angles theta_j [B, L, H, d/2]
    joined = None  # lis_tree2: the tree term for pairs joined at the query's time [B, L, L]
    if model.tree_address is not None and model.tree_address.has_layer(layer):
        w = model.tree_address.delta[str(layer)].weight
        if cfg.joins_tree_components:
            paths, joined = joined_tree_paths(t, n, None, 2 + cfg.n_deprels, length)
        else:
            paths = tree_paths(t, n, None, 2 + cfg.n_deprels)
        theta = (paths.to(x.dtype) @ w.T).view(bsz, length, H, d // 2)
    e = per_head(model.prior_proj, prior)  # W_E^l prior  [B, L, H, d]
    kb = per_head(model.tag_key, prior)
    vb = per_head(model.tag_value, prior)
    f = 10000 ** (-torch.arange(0, cfg.d_model, 2, dtype=x.dtype) / cfg.d_model)
    scores = torch.full((bsz, H, length, length), float("-inf"), dtype=x.dtype)
    for i in range(length):
        for j in range(i + 1):
            if mask is not None and mask[0, j] == 0 and j != i:
                continue
            off = min(i - j, cfg.clamp_len) if cfg.clamp_len > 0 else i - j
            r = torch.cat([torch.sin(off * f), torch.cos(off * f)])
            w_r_r = (att.r_net.weight @ r).view(H, d)
            k_j = k[:, j]
            if theta is not None:  # LIS Def. 4.6: <q_i + u, P(j->i) k_j>, P(j->i) = A(i)^-1 A(j)
                rotated = apply_rotary(k_j, theta[:, j] - theta[:, i])
                k_j = rotated if joined is None else torch.where(joined[:, i, j, None, None], rotated, k_j)
            ac = ((q[:, i] + att.u) * k_j).sum(-1)  # AC_ij   [B, H]
            bd = ((q[:, i] + att.v) * w_r_r).sum(-1)  # BD_ij
            s = (ac + bd) / math.sqrt(d)
            if e is not None:
                c = ((q[:, i] + att.v) * e[:, j]).sum(-1) / math.sqrt(d)
                # eq. 6 (multiplicative) or eq. 7 (disentangled)
                s = (ac + (1 + c) * bd) / math.sqrt(d) if cfg.uses_position_prior else s + c
            if kb is not None:
                s = s + (q[:, i] * kb[:, j]).sum(-1) / math.sqrt(d)  # eq. 8
            scores[:, :, i, j] = s
    probs = scores.softmax(-1)
    values = val if vb is None else val + vb  # eq. 9: v_j + [W_V^tag prior_j]_n
    z = torch.einsum("bhij,bjhd->bihd", probs, values).reshape(bsz, length, -1)
    a = att.o_net(z)
    if cfg.pre_norm:
        h = x + a
        return probs, h + blk.ff(blk.ln_ff(h))
    h = blk.ln_attn(x + a)
    return probs, blk.ln_ff(h + blk.ff(h))


@pytest.mark.parametrize("injection", VARIANTS)
@pytest.mark.parametrize(
    "axes",
    [
        dict(projection="per_layer", projection_target="model"),
        dict(projection="shared", projection_target="head", pre_norm=True, clamp_len=4),
    ],
    ids=["per_layer-model-postLN", "shared-head-preLN-clamp"],
)
def test_scores_and_outputs_match_reference(injection, axes):
    model = tiny(injection, **axes)
    ids, t, n = batch()
    with torch.no_grad():
        plain = model(
            ids, terminal_ids=t, nonterminal_ids=n, output_attentions=True, output_hidden_states=True
        )
        fused = model(ids, terminal_ids=t, nonterminal_ids=n, output_hidden_states=True)
        for layer in range(model.config.n_layers):
            probs, out = reference_block(model, layer, plain.hidden_states[layer], ids, t, n)
            torch.testing.assert_close(plain.attentions[layer], probs)
            nxt = plain.hidden_states[layer + 1]
            if model.config.pre_norm and layer == model.config.n_layers - 1:
                out = model.ln_f(out)
            torch.testing.assert_close(nxt, out)
            torch.testing.assert_close(fused.hidden_states[layer + 1], out)
    torch.testing.assert_close(fused.logits, plain.logits)


def test_entry_layer_leaves_lower_layers_plain():
    model = tiny("position+attn_bias", entry_layer=2)
    assert not model.prior_proj.has_layer(0) and model.prior_proj.has_layer(1)
    ids, t, n = batch()
    with torch.no_grad():
        out = model(ids, terminal_ids=t, nonterminal_ids=n, output_attentions=True, output_hidden_states=True)
        for layer in range(2):
            probs, _ = reference_block(model, layer, out.hidden_states[layer], ids, t, n)
            torch.testing.assert_close(out.attentions[layer], probs)
        no_tags = model(ids, output_attentions=True)
    torch.testing.assert_close(out.attentions[0], no_tags.attentions[0])


@pytest.mark.parametrize("injection", VARIANTS)
def test_fused_and_plain_gradients_agree(injection):
    model = tiny(injection)
    ids, t, n = batch()
    grads = []
    for plain in (False, True):
        model.zero_grad()
        model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids, output_attentions=plain).loss.backward()
        grads.append({k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for key in grads[0]:
        torch.testing.assert_close(grads[0][key], grads[1][key], msg=key)


# -- causality, padding ----------------------------------------------------------------------------


@pytest.mark.parametrize("injection", VARIANTS)
@pytest.mark.parametrize("plain", [False, True])
def test_causal_in_tokens_and_tags(injection, plain):
    model = tiny(injection)
    ids, t, n = batch()
    cut = 5
    ids2, t2, n2 = ids.clone(), t.clone(), n.clone()
    ids2[:, cut] = (ids2[:, cut] + 1) % VOCAB
    t2[:, cut], n2[:, cut] = 1 - t2[:, cut].clamp_min(0), (n2[:, cut].clamp_min(0) + 2) % 5
    t2[:, cut + 2], n2[:, cut + 2] = -100, -100
    with torch.no_grad():
        a = model(ids, terminal_ids=t, nonterminal_ids=n, output_attentions=plain)
        b = model(ids2, terminal_ids=t2, nonterminal_ids=n2, output_attentions=plain)
    for name in ("logits", "terminal_logits", "nonterminal_logits"):
        if getattr(a, name) is not None:  # the plain `none` baseline has no tag heads
            assert torch.equal(getattr(a, name)[:, :cut], getattr(b, name)[:, :cut]), name
    assert not torch.allclose(a.logits[:, cut:], b.logits[:, cut:])


@pytest.mark.parametrize("injection", ["none", "position+attn_bias", "disentangled"])
def test_padding_is_invisible(injection):
    """Right padding changes nothing before it; left padding changes nothing (offsets are relative)."""
    model = tiny(injection)
    ids, t, n = batch(bsz=1, length=6)
    pad = 3
    with torch.no_grad():
        ref = model(ids, terminal_ids=t, nonterminal_ids=n).logits
        fill = torch.full((1, pad), -100)
        right = model(
            torch.cat([ids, ids[:, :pad]], 1),
            attention_mask=torch.tensor([[1] * 6 + [0] * pad]),
            terminal_ids=torch.cat([t, fill], 1),
            nonterminal_ids=torch.cat([n, fill], 1),
        ).logits
        left = model(
            torch.cat([ids[:, :pad], ids], 1),
            attention_mask=torch.tensor([[0] * pad + [1] * 6]),
            terminal_ids=torch.cat([fill, t], 1),
            nonterminal_ids=torch.cat([fill, n], 1),
        ).logits
    torch.testing.assert_close(right[:, :6], ref)
    torch.testing.assert_close(left[:, pad:], ref)


# -- the prior switched off gives the baseline -----------------------------------------------------


@pytest.mark.parametrize("injection", PRIORED)
@pytest.mark.parametrize("plain", [False, True])
def test_zero_projection_gives_baseline_logits(injection, plain):
    base = tiny("none", dtype=torch.float32)
    model = tiny(injection, dtype=torch.float32, seed=5)
    missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
    sipe_only = ("prior", "tag_key", "tag_value", "tag_heads", "tree_address")
    assert not unexpected and all(k.startswith(sipe_only) for k in missing)
    with torch.no_grad():
        for name in ("prior_proj", "tag_key", "tag_value", "tree_address"):
            if getattr(model, name) is not None:
                for p in getattr(model, name).parameters():
                    p.zero_()  # W_E = 0, W^tag = 0, delta_l = 0 (every tree address zero)
        if model.config.uses_input_prior:
            for p in model.prior.parameters():
                p.zero_()  # E_T = E_N = 0
        ids, t, n = batch()
        want = base(ids, terminal_ids=t, nonterminal_ids=n, output_attentions=plain).logits
        got = model(ids, terminal_ids=t, nonterminal_ids=n, output_attentions=plain).logits
    rotated = injection in ("lis_tree", "lis_tree2")
    if (plain and not rotated) or injection in ("input", "position"):
        assert torch.equal(got, want)
    else:
        # The fused path appends the tag-key dims to q/k, so SDPA runs at a larger head dim whose
        # kernel may sum in another order (seen on AVX-512 CPUs); a rotation by angle 0 returns q
        # and k value for value but contiguous (``rotary.rotate_with``'s cat), where the baseline's
        # are strided views, and the score matmul may then sum in another order (seen on an AVX2
        # EPYC: 1.3e-6 on logits of size 3.7). Equal up to float rounding.
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_no_tags_means_no_prior():
    model = tiny("position")
    ids, t, n = batch()
    neutral = torch.full_like(t, -100)
    with torch.no_grad():
        a = model(ids).logits
        b = model(ids, terminal_ids=neutral, nonterminal_ids=neutral).logits
        c = model(ids, terminal_ids=t, nonterminal_ids=n).logits
    assert torch.equal(a, b) and not torch.allclose(a, c)


# -- losses, training, save / load -----------------------------------------------------------------


def test_loss_terms():
    model = tiny("position")
    ids, t, n = batch()
    out = model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids)
    lm = torch.nn.functional.cross_entropy(out.logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
    torch.testing.assert_close(out.lm_loss, lm)
    torch.testing.assert_close(out.loss, out.lm_loss + out.terminal_loss + out.nonterminal_loss)
    assert out.terminal_logits.shape == (2, LENGTH, 2) and out.nonterminal_logits.shape == (2, LENGTH, 5)
    only_lm = model(ids, labels=ids)
    assert only_lm.terminal_loss is None and torch.equal(only_lm.loss, only_lm.lm_loss)


@pytest.mark.parametrize("injection", VARIANTS)
def test_a_few_steps_lower_the_loss(injection):
    model = tiny(injection, dtype=torch.float32, d_model=32, initializer_range=0.02, prior_proj_init_std=1e-3)
    model.train()
    ids, t, n = batch(seed=3, bsz=4, length=12)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(12):
        loss = model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


@pytest.mark.parametrize("injection", ["none", "position+attn_bias", "input", "lis_tree"])
def test_save_load_round_trip(tmp_path, injection):
    model = tiny(injection, dtype=torch.float32, projection="shared", n_deprels=3)
    ids, t, n = batch()
    dr = torch.where(t == -100, -100, ids % 3)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    for loaded in (TransfoXLSiPEForCausalLM.from_pretrained(tmp_path), load(tmp_path)):
        loaded.eval()
        assert loaded.lm_head.weight is loaded.embed.weight  # tied after loading
        assert loaded.config.injection == injection and loaded.config.n_deprels == 3
        with torch.no_grad():
            want = model(ids, terminal_ids=t, nonterminal_ids=n, deprel_ids=dr).logits
            got = loaded(ids, terminal_ids=t, nonterminal_ids=n, deprel_ids=dr).logits
        assert torch.equal(got, want)


def test_a_checkpoint_naming_another_class_is_one_error_naming_ours(tmp_path):
    """The decoder saves as TransfoXLSiPEForCausalLM; a config.json naming another class (an older
    name) is refused in one line that names the class the family builds."""
    from structpe.errors import StructpeError

    model = tiny("position")
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["architectures"] == ["TransfoXLSiPEForCausalLM"]
    cfg["architectures"] = ["TransfoXLSiPEModel"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(StructpeError, match="builds TransfoXLSiPEForCausalLM, but the weights were saved"):
        load(tmp_path)


def test_generate_tokens_greedy_is_argmax():
    model = tiny("none")
    ids, _, _ = batch(length=4)
    out = model.generate(ids, max_new_tokens=3, do_sample=False)  # transformers' loop on the cache
    assert out.shape == (2, 7) and torch.equal(out[:, :4], ids)
    assert torch.equal(out[:, 4], model(ids).logits[:, -1].argmax(-1))


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_model=15, n_heads=3), "even d_model"),
        (dict(injection="input", fusion="concat"), "fusion='concat'"),
        (dict(injection="input", entry_layer=2), "no effect"),
        (dict(injection="input", n_deprels=4, prior_parts="dr_nt"), "absolute-encoder ablation"),
        (dict(injection="position", entry_layer=3), "entry_layer must be in"),
        (dict(injection="rope"), "injection must be one of"),
        (dict(injection="position", projection="tied"), "projection must be one of"),
    ],
)
def test_bad_configs_are_rejected(kwargs, message):
    base = dict(family="txl", vocab_size=VOCAB, d_model=16, n_layers=2, n_heads=2)
    with pytest.raises(ValueError, match=message):
        SiPEConfig(**{**base, **kwargs})


def test_wrong_family_is_rejected():
    with pytest.raises(ValueError, match="family='txl'"):
        TransfoXLSiPEForCausalLM(
            SiPEConfig(family="roberta", vocab_size=VOCAB, d_model=16, n_layers=2, n_heads=2)
        )


@pytest.mark.parametrize("injection", ["none", "position"])
def test_bad_tag_ids_raise(injection):
    model = tiny(injection)
    ids, t, n = batch()
    bad = t.clone()
    bad[1, 4] = 2
    with pytest.raises(TagIdError, match=r"terminal_ids\[1, 4\] = 2"):
        model(ids, terminal_ids=bad, nonterminal_ids=n)
    bad = n.clone()
    bad[0, 2] = 5
    with pytest.raises(TagIdError, match="nonterminal_ids"):
        model(ids, terminal_ids=t, nonterminal_ids=bad)
    with pytest.raises(TagIdError, match="same positions|disagree"):
        model(ids, terminal_ids=torch.where(t == 1, -100, t), nonterminal_ids=n)
    with pytest.raises(ValueError, match="both"):
        model(ids, terminal_ids=t)
    with pytest.raises(ValueError, match="must match input_ids"):
        model(ids, terminal_ids=t[:, :4], nonterminal_ids=n[:, :4])


# -- recipes ---------------------------------------------------------------------------------------

RECIPES = sorted((Path(structpe.__file__).parent / "configs" / "txl").glob("*.yaml"))
TRAIN_KEYS = {
    "lr",
    "batch_size",
    "seq_len",
    "max_steps",
    "warmup",
    "weight_decay",
    "eval_every",
    "seed",
    "bf16",
    "threads",
}


def test_every_variant_has_tiny_and_small_recipes():
    names = {p.stem for p in RECIPES}
    rivals = SYNTAX_LOSSES[1:]  # the parser-free rivals: `none` + a training loss (txl/tpt, txl/treereg)
    assert names == {f"{v}-{profile}" for v in (*VARIANTS, *rivals) for profile in ("tiny", "small")}


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_recipe_builds_its_model(path):
    recipe = yaml.safe_load(path.read_text())
    assert set(recipe) <= {"description", "model", "train"} and set(recipe["train"]) <= TRAIN_KEYS
    cfg = SiPEConfig(vocab_size=100, **recipe["model"])
    name = path.stem.rsplit("-", 1)[0]
    assert cfg.family == "txl" and name in (cfg.injection, cfg.syntax_loss)
    if path.stem.endswith("tiny"):
        assert cfg.d_model <= 192 and cfg.n_layers <= 4
        ids = torch.randint(0, 100, (2, 8))
        assert build_model(cfg)(ids, labels=ids).loss.isfinite()


# -- the GLUE head -----------------------------------------------------------------------------------


def test_classification_head_reads_the_last_real_token(tmp_path: Path) -> None:
    """Loaded from a saved LM, the classifier scores the LM's final state at each row's last
    unpadded token (later padding changes nothing before it: the decoder is causal); no LM head."""
    from structpe.models.registry import model_class

    lm = tiny("position", dtype=torch.float32)
    lm.save_pretrained(tmp_path / "lm")
    clf = model_class("txl", "classification").from_pretrained(tmp_path / "lm", num_labels=3).eval()
    assert not hasattr(clf, "lm_head") and torch.equal(clf.embed.weight, lm.embed.weight)
    ids, t, n = batch()
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    labels = torch.tensor([0, 2])
    out = clf(ids, attention_mask=mask, terminal_ids=t, nonterminal_ids=n, labels=labels)
    final = lm(ids, attention_mask=mask, terminal_ids=t, nonterminal_ids=n, output_hidden_states=True)
    pooled = final.hidden_states[-1][[0, 1], [LENGTH - 1, 5]]
    assert out.logits.shape == (2, 3)
    assert torch.allclose(out.logits, clf.score(pooled), atol=1e-6)
    assert torch.allclose(out.loss, torch.nn.functional.cross_entropy(out.logits, labels))
