"""The SiPE adapter on tiny random Hugging Face models built here (no downloads)."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from structpe.adapters.sipe import UnsupportedModelError, add_sipe, apply_lora, load_adapted
from structpe.modules.prior import TagIdError

V, L = 64, 10


def tiny(arch: str) -> torch.nn.Module:
    torch.manual_seed(0)
    common = dict(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4
    )
    if arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common, num_key_value_heads=2))
    elif arch == "mistral":
        model = MistralForCausalLM(MistralConfig(**common, num_key_value_heads=2, sliding_window=4))
    elif arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common, num_key_value_heads=2))
    else:  # GPT-NeoX with partial rotary: only half of each head is rotated
        model = GPTNeoXForCausalLM(GPTNeoXConfig(**common, rotary_pct=0.5))
    return model.eval()


def inputs(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (2, L), generator=g)
    t = torch.randint(0, 2, (2, L), generator=g)
    n = torch.randint(0, 5, (2, L), generator=g)
    untagged = torch.zeros(2, L, dtype=torch.bool)
    untagged[:, 0] = untagged[:, 4] = True  # BOS and a non-first subword
    return ids, t.masked_fill(untagged, -100), n.masked_fill(untagged, -100)


def randomise(model) -> None:
    """Move the zero-initialised SiPE weights away from zero (what training does)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith("base."):
                p.normal_(std=0.5)


ARCHS = ("llama", "mistral", "qwen2", "gpt_neox")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("injection", ["position", "input"])
def test_zero_initialised_adapter_is_exactly_the_base(arch: str, injection: str) -> None:
    base = tiny(arch)
    ids, t, n = inputs()
    with torch.no_grad():
        ref = base(input_ids=ids).logits
        model = add_sipe(base, injection).eval()
        assert torch.equal(model(ids).logits, ref)
        assert torch.equal(model(ids, terminal_ids=t, nonterminal_ids=n).logits, ref)
        mask = torch.ones_like(ids)
        assert torch.equal(model(ids, attention_mask=mask, terminal_ids=t, nonterminal_ids=n).logits, ref)
        lm_loss = model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids).lm_loss
        assert torch.equal(lm_loss, base(input_ids=ids, labels=ids).loss)  # the base's own LM loss


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("injection", ["position", "input"])
def test_trained_adapter_changes_logits_and_stays_causal(arch: str, injection: str) -> None:
    base = tiny(arch)
    ids, t, n = inputs()
    with torch.no_grad():
        ref = base(input_ids=ids).logits
        model = add_sipe(base, injection).eval()
        randomise(model)
        out = model(ids, terminal_ids=t, nonterminal_ids=n).logits
        assert not torch.allclose(out, ref, atol=1e-4)
        assert torch.equal(model(ids).logits, ref)  # no tags: nothing to inject
        assert torch.equal(base(input_ids=ids).logits, ref)  # the base alone is still the base
        later = t.clone()
        later[:, 7] = 1 - later[:, 7]  # change the tags of position 7 only
        out2 = model(ids, terminal_ids=later, nonterminal_ids=n).logits
    assert torch.equal(out[:, :7], out2[:, :7])  # earlier positions cannot see them
    assert not torch.allclose(out[:, 7:], out2[:, 7:], atol=1e-5)


def test_phase_offset_rotates_by_the_tag_shift() -> None:
    """With one head-shared dtheta per tag, a uniform shift on every token leaves q.k unchanged."""
    base = tiny("llama")
    ids, t, n = inputs()
    model = add_sipe(base, "position").eval()
    randomise(model)
    same_t, same_n = torch.zeros_like(t), torch.zeros_like(n)  # one tag pair everywhere -> same dtheta
    with torch.no_grad():
        assert torch.allclose(
            model(ids, terminal_ids=same_t, nonterminal_ids=same_n).logits,
            base(input_ids=ids).logits,
            atol=1e-5,
        )


def test_entry_layer_and_shared_projection() -> None:
    model = add_sipe(tiny("llama"), "position", entry_layer=2, projection="shared")
    assert len(model._hooks) == 1 and list(model.delta.proj) == ["shared"]
    with pytest.raises(ValueError, match="entry_layer"):
        add_sipe(tiny("llama"), "position", entry_layer=3)


def test_unsupported_architecture_and_bad_tags() -> None:
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=32, n_layer=1, n_head=2))
    with pytest.raises(UnsupportedModelError, match="gpt2.*supported rotary causal LMs: gpt_neox, llama"):
        add_sipe(gpt2)
    with pytest.raises(ValueError, match="injection"):
        add_sipe(tiny("llama"), "disentangled")
    model = add_sipe(tiny("llama"))
    ids, t, n = inputs()
    with pytest.raises(TagIdError, match="terminal_ids"):
        model(ids, terminal_ids=t + 5, nonterminal_ids=n)
    with pytest.raises(ValueError, match="together"):
        model(ids, terminal_ids=t)


def test_joint_likelihood_is_defined() -> None:
    """The causal tag head gives log p(T) terms: finite, normalised, and part of the loss."""
    model = add_sipe(tiny("gpt_neox"), "position")
    ids, t, n = inputs()
    out = model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids)
    assert out.terminal_logits.shape == (2, L, 2) and out.nonterminal_logits.shape == (2, L, 5)
    assert torch.isfinite(out.terminal_loss) and torch.isfinite(out.nonterminal_loss)
    assert torch.allclose(out.loss, out.lm_loss + out.terminal_loss + out.nonterminal_loss)
    lp = torch.log_softmax(out.terminal_logits, -1).exp().sum(-1)
    assert torch.allclose(lp, torch.ones_like(lp))


@pytest.mark.parametrize("arch", ["llama", "gpt_neox"])
def test_lora_and_sipe_training_lowers_the_loss(arch: str) -> None:
    model = apply_lora(add_sipe(tiny(arch), "position"), {"r": 4, "lora_alpha": 8})
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert any("lora_" in n for n in trainable) and any(n.startswith("delta.") for n in trainable)
    assert not any(n.startswith("base.") and "lora_" not in n for n in trainable)  # base frozen
    ids, t, n = inputs()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    losses = []
    for _ in range(8):
        out = model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids)
        opt.zero_grad()
        out.loss.backward()
        losses.append(out.loss.item())
        opt.step()
    assert losses[-1] < losses[0] - 0.1
    assert any(float(p.detach().abs().max()) > 0 for p in model.delta.parameters())  # W_delta moved off zero


@pytest.mark.parametrize("training", ["lora", "full"])
def test_save_load_round_trip(tmp_path, training: str) -> None:
    base = tiny("llama")
    base.save_pretrained(tmp_path / "base")
    model = add_sipe(base, "position", base_model=tmp_path / "base")
    if training == "lora":
        model = apply_lora(model, {"r": 4, "lora_alpha": 8})
    randomise(model)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name or (training == "full" and name.endswith("q_proj.weight")):
                p.normal_(std=0.1)  # LoRA B starts at zero; make the update visible
    model.eval()
    ids, t, n = inputs()
    with torch.no_grad():
        before = model(ids, terminal_ids=t, nonterminal_ids=n).logits
    model.save_pretrained(tmp_path / "adapter")
    files = {p.name for p in (tmp_path / "adapter").iterdir()}
    assert {"config.json", "sipe.safetensors"} <= files
    assert ("lora" in files) == (training == "lora") and ("base" in files) == (training == "full")
    loaded = load_adapted(tmp_path / "adapter").eval()
    with torch.no_grad():
        after = loaded(ids, terminal_ids=t, nonterminal_ids=n).logits
        plain = LlamaForCausalLM.from_pretrained(tmp_path / "base")(input_ids=ids).logits
    assert torch.equal(before, after)
    assert not torch.allclose(after, plain, atol=1e-4)


def test_load_refuses_a_missing_base(tmp_path) -> None:
    model = add_sipe(tiny("llama"), base_model=tmp_path / "nowhere")
    model.base.requires_grad_(False)  # a frozen base is referenced, not saved
    model.save_pretrained(tmp_path / "adapter")
    with pytest.raises(FileNotFoundError, match="base model"):
        load_adapted(tmp_path / "adapter")
    with pytest.raises(FileNotFoundError, match="not a SiPE adapter folder"):
        load_adapted(tmp_path / "nowhere")
