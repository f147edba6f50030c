"""RoBERTa-style SiPE encoder: parity with transformers, table-12 variants, MLM rule, save/load."""

from __future__ import annotations

import pytest
import torch
from sipe_encoder_checks import (
    N_DEPRELS,
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
    tiny_batch,
    tiny_model,
)
from transformers import RobertaConfig, RobertaForMaskedLM, RobertaForSequenceClassification

from structpe.models import SiPEConfig
from structpe.models.config import INPUT_VARIANTS
from structpe.models.roberta import RobertaSiPEForMaskedLM, from_hf

PAD = 1


def hf_config(**kw) -> RobertaConfig:
    base = dict(
        TINY_HF,
        max_position_embeddings=40,
        type_vocab_size=2,
        pad_token_id=PAD,
        layer_norm_eps=1e-5,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    base.update(kw)
    return RobertaConfig(**base)


@pytest.fixture(scope="module")
def hf_mlm() -> RobertaForMaskedLM:
    torch.manual_seed(0)
    return RobertaForMaskedLM(hf_config()).eval()


@pytest.fixture(scope="module")
def batch() -> dict:
    return tiny_batch(64, PAD)


def variant_kwargs(name: str) -> dict:
    if name == "none":
        return {"injection": "none"}
    kw = {"injection": "input", **INPUT_VARIANTS[name]}
    if "dr" in kw["prior_parts"]:
        kw["n_deprels"] = N_DEPRELS
    if kw["fusion"] == "alpha":
        kw["alpha_init"] = 0.9
    return kw


VARIANTS = ["none", *INPUT_VARIANTS]


def test_parity_with_transformers(hf_mlm, batch):
    assert_hf_parity(hf_mlm, from_hf(hf_mlm), batch)


def test_gradients_match_transformers(batch):
    torch.manual_seed(5)
    hf = RobertaForMaskedLM(hf_config())
    pairs = {
        "backbone.embeddings.word.weight": "roberta.embeddings.word_embeddings.weight",
        "backbone.embeddings.position.weight": "roberta.embeddings.position_embeddings.weight",
        "backbone.layers.0.attn_out.weight": "roberta.encoder.layer.0.attention.output.dense.weight",
    }
    assert_hf_grad_parity(hf, from_hf(hf), batch, pairs)


def test_segment_ids_and_classification_head_parity(batch):
    torch.manual_seed(1)
    hf = RobertaForSequenceClassification(hf_config(num_labels=3)).eval()
    ours = from_hf(hf, head="classification").eval()
    segments = torch.zeros_like(batch["input_ids"])
    segments[:, 6:] = 1
    assert_classification_parity(hf, ours, batch, token_type_ids=segments)
    labels = torch.tensor([0, 2, 1])
    out = ours(batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels)
    assert out.loss is not None and out.logits.shape == (3, 3)


@pytest.mark.parametrize("name", VARIANTS)
def test_zeroed_prior_equals_baseline(hf_mlm, batch, name):
    assert_zeroed_prior_is_baseline(from_hf(hf_mlm, **variant_kwargs(name)), from_hf(hf_mlm), batch)


@pytest.mark.parametrize("name", [v for v in VARIANTS if v != "none"])
def test_masked_positions_never_see_their_prior(hf_mlm, batch, name):
    assert_masked_positions_blind(from_hf(hf_mlm, **variant_kwargs(name)), batch)


@pytest.mark.parametrize("name", VARIANTS)
def test_training_steps_lower_the_loss(batch, name):
    model = tiny_model("roberta", max_position_embeddings=40, pad_token_id=PAD, **variant_kwargs(name))
    assert_training_lowers_loss(model, batch)


@pytest.mark.parametrize("name", ["none", "ADD_T_NT", "CONCAT_POS_NT_T_DR", "ADD_DNT_ALPHA"])
def test_save_load_roundtrip(hf_mlm, batch, tmp_path, name):
    assert_roundtrip(from_hf(hf_mlm, **variant_kwargs(name)), batch, tmp_path)


def test_classification_roundtrip_and_attentions(hf_mlm, batch, tmp_path):
    assert_classification_roundtrip_and_attentions(from_hf, hf_mlm, "input", batch, tmp_path)


def test_checkpoint_directory_loads(hf_mlm, batch, tmp_path):
    assert_checkpoint_directory_loads(from_hf, hf_mlm, RobertaSiPEForMaskedLM, "input", batch, tmp_path)


def test_errors_are_clear(hf_mlm):
    with pytest.raises(ValueError, match="position id"):
        from_hf(hf_mlm)(torch.full((1, 45), 7))
    with pytest.raises(ValueError, match="absolute"):
        SiPEConfig(family="deberta", injection="input", fusion="concat")
    with pytest.raises(ValueError, match="n_deprels"):
        SiPEConfig(family="roberta", injection="input", prior_parts="dr_nt")
    model = from_hf(hf_mlm, injection="input", n_deprels=4)
    with pytest.raises(ValueError, match="deprel_ids"):
        tags = torch.zeros(1, 5, dtype=torch.long)
        model(torch.full((1, 5), 7), terminal_ids=tags, nonterminal_ids=tags)


@pytest.mark.parametrize(
    "name", ["CONCAT_T_NT", "CONCAT_POS_NT_T_DR", "CONCAT_POS_DNT", "ADD_DNT_ALPHA", "ADD_T_NT_DR"]
)
def test_fusions_follow_table_12(hf_mlm, batch, name):
    """x' recomputed naively from table 12 (W [x; parts], a x + (1 - a) sum parts, x + sum parts)."""
    model = from_hf(hf_mlm, **variant_kwargs(name))
    fusion = model.backbone.input_prior
    with torch.no_grad():
        if fusion.fusion == "concat":
            fusion.proj.weight.normal_(std=0.2)
        x = model.backbone.embeddings.raw(batch["input_ids"], None)
        keep = (batch["labels"] == -100) & (batch["terminal_ids"] != -100)
        tags = fusion.tags
        vec = {
            "t": tags.terminal(batch["terminal_ids"].clamp_min(0)),
            "nt": tags.nonterminal(batch["nonterminal_ids"].clamp_min(0)),
            "dr": tags.deprel(batch["deprel_ids"].clamp_min(0)) if tags.deprel is not None else None,
        }
        parts = [vec[p] * keep[..., None] for p in INPUT_VARIANT_ORDER[name]]
        if fusion.fusion == "concat":
            expected = fusion.proj(torch.cat([x, *parts], dim=-1))
        elif fusion.fusion == "alpha":
            expected = fusion.alpha * x + (1 - fusion.alpha) * sum(parts)
        else:
            expected = x + sum(parts)
        got, _ = fusion(
            x, batch["terminal_ids"], batch["nonterminal_ids"], batch["deprel_ids"], batch["labels"] == -100
        )
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


# the concatenation order of each variant in SiPE table 12 (x first)
INPUT_VARIANT_ORDER = {
    "CONCAT_T_NT": ("t", "nt"),
    "CONCAT_POS_NT_T_DR": ("nt", "t", "dr"),
    "CONCAT_POS_DNT": ("dr", "nt"),
    "ADD_DNT_ALPHA": ("dr", "nt"),
    "ADD_T_NT_DR": ("t", "nt", "dr"),
}
