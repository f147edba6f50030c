"""ModernBERT-style SiPE encoder: parity with transformers, rotary phase offsets, MLM rule, save/load."""

from __future__ import annotations

import math

import pytest
import torch
from sipe_encoder_checks import (
    INPUT_AND_POSITION_VARIANTS,
    TINY_HF,
    assert_checkpoint_directory_loads,
    assert_classification_parity,
    assert_classification_roundtrip_and_attentions,
    assert_hf_grad_parity,
    assert_hf_parity,
    assert_masked_positions_blind,
    assert_roundtrip,
    assert_training_lowers_loss,
    assert_zeroed_prior_is_baseline,
    logits_of,
    randomize_position_prior,
    tiny_batch,
    tiny_model,
)
from transformers import ModernBertConfig, ModernBertForMaskedLM, ModernBertForSequenceClassification

from structpe.models.modernbert import ModernBertSiPEForMaskedLM, from_hf
from structpe.modules.rotary import rope_angles

PAD = 0
LENGTH = 20  # > local_attention / 2, so the sliding window is exercised


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    """RoPE's full-width form as Hugging Face writes it: the reference the model is held to."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def hf_config(**kw) -> ModernBertConfig:
    base = dict(
        TINY_HF,
        num_hidden_layers=4,  # layers 0 and 3 global, 1 and 2 sliding
        local_attention=8,
        pad_token_id=PAD,
        bos_token_id=1,
        eos_token_id=2,
        cls_token_id=1,
        sep_token_id=2,
    )
    base.update(kw)
    return ModernBertConfig(**base)


@pytest.fixture(scope="module")
def hf_mlm() -> ModernBertForMaskedLM:
    torch.manual_seed(0)
    return ModernBertForMaskedLM(hf_config()).eval()


@pytest.fixture(scope="module")
def batch() -> dict:
    return tiny_batch(64, PAD, length=LENGTH)


VARIANTS = INPUT_AND_POSITION_VARIANTS


def randomize_w_delta(model) -> None:
    """W_delta ~ N(0, 0.5), E_T, E_N ~ N(0, 1): phase offsets large enough to move attention."""
    randomize_position_prior(model, std=0.5)


def test_parity_with_transformers(hf_mlm, batch):
    assert_hf_parity(hf_mlm, from_hf(hf_mlm), batch)


def test_gradients_match_transformers(batch):
    torch.manual_seed(5)
    hf = ModernBertForMaskedLM(hf_config())
    pairs = {
        "backbone.embeddings.word.weight": "model.embeddings.tok_embeddings.weight",
        "backbone.layers.1.qkv.weight": "model.layers.1.attn.Wqkv.weight",
        "backbone.layers.0.mlp_in.weight": "model.layers.0.mlp.Wi.weight",
    }
    assert_hf_grad_parity(hf, from_hf(hf), batch, pairs)


def test_parity_with_rows_that_see_only_padding(hf_mlm):
    """A long pad tail leaves sliding-window queries with no visible key; both sides agree."""
    heavy = tiny_batch(64, PAD, length=LENGTH, seed=3)
    heavy["attention_mask"][1, 9:] = 0
    heavy["input_ids"][1, 9:] = PAD
    assert_hf_parity(hf_mlm, from_hf(hf_mlm), heavy)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_classification_head_parity(batch, pooling):
    torch.manual_seed(1)
    hf = ModernBertForSequenceClassification(hf_config(num_labels=3, classifier_pooling=pooling)).eval()
    assert_classification_parity(hf, from_hf(hf, head="classification"), batch)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_zeroed_prior_equals_baseline(hf_mlm, batch, name):
    assert_zeroed_prior_is_baseline(from_hf(hf_mlm, **VARIANTS[name]), from_hf(hf_mlm), batch)


def test_zero_w_delta_is_plain_rope(hf_mlm, batch):
    model = from_hf(hf_mlm, injection="position")
    randomize_w_delta(model)
    with torch.no_grad():
        for lin in model.backbone.prior_proj.proj.values():
            lin.weight.zero_()
    with torch.no_grad():
        ref = hf_mlm(batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    torch.testing.assert_close(logits_of(model, batch), ref, atol=1e-5, rtol=0)


def test_equal_tags_shift_every_angle_equally(hf_mlm, batch):
    """(m - j) w + dtheta_m - dtheta_j: one tag pair everywhere cancels, leaving plain RoPE."""
    model = from_hf(hf_mlm, injection="position").eval()
    randomize_w_delta(model)
    with torch.no_grad():
        for layer in model.backbone.layers:  # sharpen attention so that angles matter
            layer.qkv.weight.mul_(20.0)
        ids = batch["input_ids"]
        same = torch.ones_like(ids)
        plain = model(ids).logits  # no tags: plain RoPE
        out = model(ids, terminal_ids=same, nonterminal_ids=same).logits
        one_differs = same.clone().index_fill_(1, torch.tensor([5]), 0)
        moved = model(ids, terminal_ids=one_differs, nonterminal_ids=same).logits
    torch.testing.assert_close(out, plain, atol=1e-4, rtol=0)
    assert (moved - plain).abs().max() > 1e-2  # ... but a different tag at one position is seen


def test_phase_offsets_follow_eq_14_16(hf_mlm, batch):
    """Layer-1 attention recomputed naively: rotate q_m by m w + dtheta_m and k_j by j w + dtheta_j."""
    model = from_hf(hf_mlm, injection="position").eval()
    randomize_w_delta(model)
    with torch.no_grad():
        keys = ("input_ids", "attention_mask", "terminal_ids", "nonterminal_ids", "labels")
        out = model(**{k: batch[k] for k in keys}, output_attentions=True, output_hidden_states=True)
        bb = model.backbone
        layer = bb.layers[0]
        x = out.hidden_states[0]
        bsz, length, d = x.shape
        n_heads, dh = layer.n_heads, layer.d_head
        q, k, _ = (t.view(bsz, length, n_heads, dh).transpose(1, 2) for t in layer.qkv(x).split(d, dim=-1))
        prior = bb.prior(batch["terminal_ids"], batch["nonterminal_ids"], keep=batch["labels"] == -100)
        dtheta = bb.prior_proj.proj["0"](prior).view(bsz, length, n_heads, dh // 2).transpose(1, 2)
        angles = rope_angles(torch.arange(length), dh, 160000.0) + dtheta  # layer 0 is global
        cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        scores = scores.masked_fill(
            ~batch["attention_mask"].bool()[:, None, None, :], torch.finfo(q.dtype).min
        )
        expected = scores.softmax(-1)
    assert dtheta.abs().max() > 0.1
    torch.testing.assert_close(out.attentions[0], expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", [v for v in VARIANTS if v != "none"])
def test_masked_positions_never_see_their_prior(hf_mlm, batch, name):
    model = from_hf(hf_mlm, **VARIANTS[name])
    if model.config.uses_position_prior:
        randomize_w_delta(model)
    assert_masked_positions_blind(model, batch)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_training_steps_lower_the_loss(batch, name):
    model = tiny_model(
        "modernbert", n_layers=4, local_attention=8, type_vocab_size=0, pad_token_id=PAD, **VARIANTS[name]
    )
    assert_training_lowers_loss(model, batch)


@pytest.mark.parametrize("name", ["none", "input", "position"])
def test_save_load_roundtrip(hf_mlm, batch, tmp_path, name):
    assert_roundtrip(from_hf(hf_mlm, **VARIANTS[name]), batch, tmp_path)


def test_classification_roundtrip_and_attentions(hf_mlm, batch, tmp_path):
    assert_classification_roundtrip_and_attentions(from_hf, hf_mlm, "position", batch, tmp_path)


def test_checkpoint_directory_loads(hf_mlm, batch, tmp_path):
    assert_checkpoint_directory_loads(from_hf, hf_mlm, ModernBertSiPEForMaskedLM, "input", batch, tmp_path)
