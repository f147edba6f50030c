"""RoBERTa-style SiPE encoder: learned absolute positions, post-LN, GELU (SiPE §3.2, App. E).

With ``injection="none"`` the numbers equal ``transformers``' ``RobertaForMaskedLM`` given the same
weights (tests/models/test_roberta.py); ``from_hf`` converts one. The only SiPE site is the input
(eq. 2), with the fusion ablations of table 12 (``structpe.modules.input_prior.InputPrior``):

    x_p = e^tok_p + p_p + e^seg_p + m_p (E_T[tau_p] + E_N[nu_p])

``lis_tree2`` (not SiPE's; docs/lis.md) instead rotates q and k by each word's address in the
whole dependency tree read from the tags, beside the absolute positions.

Positions follow RoBERTa/fairseq: non-pad tokens count from ``pad_token_id + 1``, pads keep
``pad_token_id``, so ``max_position_embeddings`` rows allow sequences of that minus pad + 1.
"""

from __future__ import annotations

import torch
from torch import nn

from structpe.models.config import SiPEConfig
from structpe.models.encoder_base import SiPEEncoderForMaskedLM, SiPEEncoderForSequenceClassification
from structpe.models.encoder_layers import (
    BackboneOutput,
    LayerOutputs,
    activation,
    add_segment_embedding,
    attend,
    key_padding_mask,
)
from structpe.models.hf_convert import (
    HFConversion,
    bert_embedding_weights,
    bert_layer_weights,
    convert_hf,
    hf_sipe_config,
)
from structpe.models.sipe_parts import apply_input_prior, encoder_tree_angles, input_prior, tree_address
from structpe.modules.rotary import rotary_tables, rotate_with


class RobertaEmbeddings(nn.Module):
    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.padding_idx = config.pad_token_id if config.pad_token_id is not None else 1
        self.word = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.position = nn.Embedding(
            config.max_position_embeddings, config.d_model, padding_idx=self.padding_idx
        )
        self.token_type = (
            nn.Embedding(config.type_vocab_size, config.d_model) if config.type_vocab_size else None
        )
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.drop = nn.Dropout(config.dropout)

    def position_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """fairseq's make_positions: running count of non-pad tokens, offset by the pad id."""
        not_pad = input_ids.ne(self.padding_idx).long()
        positions = torch.cumsum(not_pad, dim=1) * not_pad + self.padding_idx
        if input_ids.shape[1] + self.padding_idx >= self.position.num_embeddings:
            top = int(positions.max())
            if top >= self.position.num_embeddings:
                raise ValueError(
                    f"sequence needs position id {top} but the table has {self.position.num_embeddings} rows "
                    f"(at most {self.position.num_embeddings - self.padding_idx - 1} tokens per sequence)"
                )
        return positions

    def raw(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        """x_p = e^tok + p + e^seg, before the LayerNorm (where the prior joins)."""
        x = self.word(input_ids) + self.position(self.position_ids(input_ids))
        return add_segment_embedding(x, self.token_type, token_type_ids)

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.norm(x))


class RobertaLayer(nn.Module):
    """Post-LN block: h = LN(x + Attn(x) [+ prior]); out = LN(h + FFN(h))."""

    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_head = config.d_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)  # fused W_Q, W_K, W_V
        self.attn_out = nn.Linear(config.d_model, config.d_model)
        self.attn_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.ff_in = nn.Linear(config.d_model, config.d_ff)
        self.ff_out = nn.Linear(config.d_ff, config.d_model)
        self.ff_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.act = activation(config.hidden_act)
        self.drop = nn.Dropout(config.dropout)
        self.attn_dropout = config.attention_dropout

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        skip_prior: torch.Tensor | None = None,
        output_attentions: bool = False,
        tree: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``tree``: lis_tree2's address angles [B, H, L, d_head/2]; q and k rotate by them, so the
        content score is <A(i) q_i, A(j) k_j>, the tree path's journey (LIS Def. 4.6)."""
        bsz, length, _ = x.shape
        q, k, v = self.qkv(x).view(bsz, length, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        if tree is not None:
            cos, sin = rotary_tables(tree)
            q, k = rotate_with(q, cos, sin), rotate_with(k, cos, sin)
        dropout = self.attn_dropout if self.training else 0.0
        ctx, probs = attend(q, k, v, mask, self.d_head**-0.5, dropout, output_attentions)
        ctx = ctx.transpose(1, 2).reshape(bsz, length, -1)
        skip = x if skip_prior is None else x + skip_prior  # ADD_T_NT (Residual): prior on the skip branch
        h = self.attn_norm(self.drop(self.attn_out(ctx)) + skip)
        out = self.ff_norm(self.drop(self.ff_out(self.act(self.ff_in(h)))) + h)
        return out, probs


class RobertaSiPEModel(nn.Module):
    """Embeddings (+ input prior) and the post-LN layer stack; returns (last, hidden_states, attentions)."""

    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.config = config
        self.embeddings = RobertaEmbeddings(config)
        self.input_prior = input_prior(config)
        self.layers = nn.ModuleList(RobertaLayer(config) for _ in range(config.n_layers))
        self.tree_address = tree_address(config) if config.uses_tree_address else None  # lis_tree2

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        terminal_ids: torch.Tensor | None = None,
        nonterminal_ids: torch.Tensor | None = None,
        deprel_ids: torch.Tensor | None = None,
        keep: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> BackboneOutput:
        x = self.embeddings.raw(input_ids, token_type_ids)
        x, skip_prior = apply_input_prior(
            self.input_prior, x, terminal_ids, nonterminal_ids, deprel_ids, keep
        )
        x = self.embeddings.finish(x)
        mask = key_padding_mask(attention_mask)
        trees = encoder_tree_angles(
            self.tree_address, self.config, terminal_ids, nonterminal_ids, deprel_ids, keep
        )
        outputs = LayerOutputs(x, output_hidden_states, output_attentions)
        for i, layer in enumerate(self.layers):
            x, probs = layer(x, mask, skip_prior if i == 0 else None, output_attentions, trees[i])
            outputs.add(x, probs)
        return outputs.result(x)


class RobertaSiPEForMaskedLM(SiPEEncoderForMaskedLM):
    """RoBERTa + SiPE input prior + tied MLM head + tag heads."""

    family = "roberta"
    backbone_class = RobertaSiPEModel


class RobertaSiPEForSequenceClassification(SiPEEncoderForSequenceClassification):
    """RoBERTa's GLUE head: <s> -> dropout -> dense -> tanh -> dropout -> out_proj."""

    family = "roberta"
    backbone_class = RobertaSiPEModel

    def build_classifier(self, config: SiPEConfig) -> None:
        p = config.classifier_dropout if config.classifier_dropout is not None else config.dropout
        self.classifier_drop = nn.Dropout(p)
        self.classifier_dense = nn.Linear(config.d_model, config.d_model)
        self.classifier_out = nn.Linear(config.d_model, config.num_labels)

    def classify(self, last: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        x = torch.tanh(self.classifier_dense(self.classifier_drop(last[:, 0])))
        return self.classifier_out(self.classifier_drop(x))


# --------------------------------------------------------------------------- Hugging Face conversion


def _backbone_weights(hf_base, n_layers: int) -> dict[str, torch.Tensor]:
    sd = hf_base.state_dict()
    out = bert_embedding_weights(sd)
    out["embeddings.position.weight"] = sd["embeddings.position_embeddings.weight"]
    out.update(bert_layer_weights(sd, n_layers, qkv="self.{n}"))
    return out


def _config_from_hf(hf_config, sipe_kwargs: dict) -> SiPEConfig:
    if getattr(hf_config, "is_decoder", False) or getattr(hf_config, "add_cross_attention", False):
        raise ValueError("only bidirectional RoBERTa encoders (is_decoder=False, no cross-attention) convert")
    pos_type = getattr(hf_config, "position_embedding_type", "absolute")
    if pos_type not in (None, "absolute"):
        raise ValueError(f"position_embedding_type={pos_type!r} is not RoBERTa's absolute scheme")
    arch = {
        "dropout": hf_config.hidden_dropout_prob,
        "attention_dropout": hf_config.attention_probs_dropout_prob,
        "layer_norm_eps": hf_config.layer_norm_eps,
        "type_vocab_size": hf_config.type_vocab_size,
        "hidden_act": hf_config.hidden_act,
        "classifier_dropout": getattr(hf_config, "classifier_dropout", None),
        "pre_norm": False,
    }
    return hf_sipe_config(hf_config, "roberta", arch, sipe_kwargs)


def _roberta_classes() -> tuple[type, type, type]:
    from transformers import RobertaForMaskedLM, RobertaForSequenceClassification, RobertaModel

    return RobertaForMaskedLM, RobertaForSequenceClassification, RobertaModel


def _mlm_head_weights(hf_model, config: SiPEConfig) -> dict[str, torch.Tensor]:
    sd = hf_model.lm_head.state_dict()
    weights = {
        "lm_head.dense.weight": sd["dense.weight"],
        "lm_head.dense.bias": sd["dense.bias"],
        "lm_head.norm.weight": sd["layer_norm.weight"],
        "lm_head.norm.bias": sd["layer_norm.bias"],
        "lm_head.decoder.bias": sd["bias"],
    }
    if not config.tie_word_embeddings:
        weights["lm_head.decoder.weight"] = sd["decoder.weight"]
    return weights


def _classifier_weights(hf_model) -> dict[str, torch.Tensor]:
    sd = hf_model.classifier.state_dict()
    weights = {}
    for ours, theirs in (("classifier_dense", "dense"), ("classifier_out", "out_proj")):
        weights[f"{ours}.weight"] = sd[f"{theirs}.weight"]
        weights[f"{ours}.bias"] = sd[f"{theirs}.bias"]
    return weights


HF_CONVERSION = HFConversion(
    name="RoBERTa",
    hf_classes=_roberta_classes,
    base_attr="roberta",
    config_from_hf=_config_from_hf,
    backbone_weights=_backbone_weights,
    mlm_head_weights=_mlm_head_weights,
    classifier_weights=_classifier_weights,
    fresh_head=("classifier_",),
    masked_lm=RobertaSiPEForMaskedLM,
    classification=RobertaSiPEForSequenceClassification,
)


def from_hf(hf_model, head: str = "mlm", **sipe_kwargs):
    """Our RoBERTa (MLM or classification) with the weights of a ``transformers`` RoBERTa model
    (``RobertaForMaskedLM``, ``RobertaForSequenceClassification`` or ``RobertaModel``); see ``convert_hf``."""
    return convert_hf(hf_model, HF_CONVERSION, head, **sipe_kwargs)


__all__ = [
    "RobertaSiPEForMaskedLM",
    "RobertaSiPEForSequenceClassification",
    "RobertaSiPEModel",
    "from_hf",
]
