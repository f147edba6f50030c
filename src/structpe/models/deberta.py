"""DeBERTa-v3-style SiPE encoder: disentangled relative attention (SiPE §3.4, App. A.5).

No absolute positions; every layer scores a query i and key j as (SiPE eq. 10)

    S_ij = Q^c_i K^c_j^T  +  Q^c_i K^r_delta(i,j)^T + K^c_j Q^r_delta(i,j)^T
           \\_ S^con_ij _/    \\__________________ S^pos_ij ________________/

all divided by sqrt(3 d_head). delta(i, j) is the log-bucketed offset i - j (``log_bucket``),
K^r / Q^r are the shared relative table -- LayerNorm'd once per forward -- projected with the
*content* W_K / W_Q (DeBERTa-v3's share_att_key). Because delta is odd, c2p and p2c read the same
table row for (i, j), so one index matrix serves both.

SiPE sites: ``input`` (eq. 11: h^(0)_p = LN(e^tok_p + e^seg_p + prior_p)) and ``position``
(PP-SiPE, eq. 12-13): with c_ij = <Q^c_i, W_E^(l) prior_j> / sqrt(d_head),

    S~_ij = S^con_ij + (1 + c_ij) S^pos_ij

c_ij is computed per query against the <= 11 distinct prior values and spread over the keys
(``structpe.modules.prior_projection.tag_alignment``, as every family computes c), never as an
[L, L, d] product. With ``injection="none"`` the numbers equal ``transformers``'
``DebertaV2ForMaskedLM`` (v3 layout) given the same weights; ``from_hf`` converts.
"""

from __future__ import annotations

import math

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
)
from structpe.models.hf_convert import (
    HFConversion,
    bert_embedding_weights,
    bert_layer_weights,
    convert_hf,
    hf_sipe_config,
)
from structpe.models.sipe_parts import (
    apply_input_prior,
    input_prior,
    layer_pair_projection,
    position_prior,
    tag_pairs,
)
from structpe.modules.prior_projection import tag_alignment


def log_bucket(rel: torch.Tensor, buckets: int, max_position: int) -> torch.Tensor:
    """DeBERTa's bucket of a signed offset: exact for |rel| <= buckets/2, log-spaced beyond."""
    mid = buckets // 2
    sign = torch.sign(rel)
    # values inside the exact range are replaced by mid-1 only to keep the log finite
    magnitude = torch.where(rel.abs() < mid, torch.full_like(rel, mid - 1), rel.abs())
    log_pos = torch.ceil(torch.log(magnitude / mid) / math.log((max_position - 1) / mid) * (mid - 1)) + mid
    return torch.where(magnitude <= mid, rel.to(log_pos.dtype), log_pos * sign).long()


class RelativePositions(nn.Module):
    """The relative table r (2 * span rows) and, per length L, the rows and index matrix in use."""

    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.buckets = config.position_buckets
        self.max_position = config.max_relative_positions
        self.span = self.buckets if self.buckets > 0 else self.max_position
        self.table = nn.Embedding(2 * self.span, config.d_model)
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.drop = nn.Dropout(config.dropout)

    def index(self, length: int, device: torch.device) -> tuple[int, int, torch.Tensor]:
        """(lo, hi, idx): table rows lo..hi are the only ones used; idx[i, j] = row of delta(i, j) - lo."""
        rel = torch.arange(-(length - 1), length)  # every offset i - j, ascending
        if self.buckets > 0:
            rel = log_bucket(rel, self.buckets, self.max_position)
        rows = (rel + self.span).clamp(0, 2 * self.span - 1)  # monotone in the offset
        lo, hi = int(rows[0]), int(rows[-1])
        pos = torch.arange(length)
        idx = (rows - lo)[pos[:, None] - pos[None, :] + length - 1]
        return lo, hi, idx.to(device)

    def rows(self, lo: int, hi: int) -> torch.Tensor:
        """LayerNorm'd (row-wise, so slicing first is exact) and dropped-out rows lo..hi."""
        return self.drop(self.norm(self.table.weight[lo : hi + 1]))


class DebertaEmbeddings(nn.Module):
    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.token_type = (
            nn.Embedding(config.type_vocab_size, config.d_model) if config.type_vocab_size else None
        )
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.drop = nn.Dropout(config.dropout)

    def raw(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        return add_segment_embedding(self.word(input_ids), self.token_type, token_type_ids)

    def finish(self, x: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        x = self.norm(x)
        if attention_mask is not None:  # DeBERTa zeroes padded positions' embeddings
            x = x * attention_mask.unsqueeze(-1).to(x.dtype)
        return self.drop(x)


class DebertaLayer(nn.Module):
    """Post-LN block with disentangled attention; ``tag_keys`` switches on PP-SiPE's (1 + c)."""

    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_head = config.d_head
        d = config.d_model
        self.qkv = nn.Linear(d, 3 * d)  # fused content W_Q, W_K, W_V (also project the rel table)
        self.attn_out = nn.Linear(d, d)
        self.attn_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.ff_in = nn.Linear(d, config.d_ff)
        self.ff_out = nn.Linear(config.d_ff, d)
        self.ff_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.act = activation(config.hidden_act)
        self.drop = nn.Dropout(config.dropout)
        self.attn_dropout = config.attention_dropout
        self.scale = 1.0 / math.sqrt(3 * self.d_head)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.n_heads, self.d_head).transpose(-3, -2)

    def forward(
        self,
        x: torch.Tensor,
        rel_rows: torch.Tensor,
        rel_idx: torch.Tensor,
        pair_mask: torch.Tensor | None,
        tag_keys: torch.Tensor | None = None,
        pair_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        bsz, length, d = x.shape
        q, k, v = self.qkv(x).view(bsz, length, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        w_q, w_k, _ = self.qkv.weight.split(d)
        b_q, b_k, _ = self.qkv.bias.split(d)
        # Q^r, K^r [H, R, dh], with the 1/sqrt(3 d_head) of S^pos applied to these few rows
        pos_q = self._heads(nn.functional.linear(rel_rows, w_q, b_q)) * self.scale
        pos_k = self._heads(nn.functional.linear(rel_rows, w_k, b_k)) * self.scale
        index = rel_idx.expand(bsz, self.n_heads, length, length)
        c2p = torch.matmul(q, pos_k.transpose(-1, -2)).gather(-1, index)  # Q^c_i . K^r_delta(i,j)
        p2c = torch.matmul(k, pos_q.transpose(-1, -2)).gather(-1, index.transpose(-1, -2))
        s_pos = c2p + p2c.transpose(-1, -2)  # K^c_j . Q^r_delta(i,j), transposed to [i, j]
        if tag_keys is not None:  # PP-SiPE: S~ = S^con + (1 + c) S^pos
            tag_keys = tag_keys.expand(bsz, -1, -1, -1)  # per-row products, see pair_scores
            s_pos = s_pos * (1 + tag_alignment(q, tag_keys, pair_ids))
        if pair_mask is not None:
            s_pos = s_pos.masked_fill(~pair_mask, torch.finfo(s_pos.dtype).min)
        dropout = self.attn_dropout if self.training else 0.0
        ctx, probs = attend(q, k, v, s_pos, self.scale, dropout, output_attentions)
        ctx = ctx.transpose(1, 2).reshape(bsz, length, d)
        h = self.attn_norm(self.drop(self.attn_out(ctx)) + x)
        out = self.ff_norm(self.drop(self.ff_out(self.act(self.ff_in(h)))) + h)
        return out, probs


class DebertaSiPEModel(nn.Module):
    """Embeddings (+ input prior), shared relative table, layer stack (+ PP-SiPE projections)."""

    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.config = config
        self.embeddings = DebertaEmbeddings(config)
        self.rel = RelativePositions(config)
        self.layers = nn.ModuleList(DebertaLayer(config) for _ in range(config.n_layers))
        self.input_prior = input_prior(config)
        self.prior, self.prior_proj = position_prior(config, d_out=config.d_head)  # E_T, E_N; W_E^(l)

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
        length = input_ids.shape[1]
        x = self.embeddings.raw(input_ids, token_type_ids)
        x, _ = apply_input_prior(self.input_prior, x, terminal_ids, nonterminal_ids, deprel_ids, keep)
        x = self.embeddings.finish(x, attention_mask)

        pair_mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            m = attention_mask.bool()
            # query and key both real; padded rows attend uniformly, as in DeBERTa
            pair_mask = (m[:, :, None] & m[:, None, :])[:, None]
        lo, hi, rel_idx = self.rel.index(length, input_ids.device)
        rel_rows = self.rel.rows(lo, hi)

        pair_ids, table = tag_pairs(self.prior, terminal_ids, nonterminal_ids, deprel_ids, keep)

        outputs = LayerOutputs(x, output_hidden_states, output_attentions)
        for i, layer in enumerate(self.layers):
            tag_keys = layer_pair_projection(self.prior_proj, table, i)  # W_E^(i) prior per tag pair
            x, probs = layer(x, rel_rows, rel_idx, pair_mask, tag_keys, pair_ids, output_attentions)
            outputs.add(x, probs)
        return outputs.result(x)


class DebertaSiPEForMaskedLM(SiPEEncoderForMaskedLM):
    """DeBERTa-v3 + SiPE (input | position) + tied MLM head + tag heads."""

    family = "deberta"
    backbone_class = DebertaSiPEModel


class DebertaSiPEForSequenceClassification(SiPEEncoderForSequenceClassification):
    """DeBERTa's GLUE head: [CLS] -> dropout -> dense -> act (ContextPooler) -> dropout -> classifier."""

    family = "deberta"
    backbone_class = DebertaSiPEModel

    def build_classifier(self, config: SiPEConfig) -> None:
        p = config.classifier_dropout if config.classifier_dropout is not None else config.dropout
        self.classifier_drop = nn.Dropout(p)
        self.pooler_dense = nn.Linear(config.d_model, config.d_model)
        self.pooler_act = activation(config.pooler_hidden_act)
        self.classifier = nn.Linear(config.d_model, config.num_labels)

    def classify(self, last: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        pooled = self.pooler_act(self.pooler_dense(self.classifier_drop(last[:, 0])))
        return self.classifier(self.classifier_drop(pooled))


# --------------------------------------------------------------------------- Hugging Face conversion


def _config_from_hf(hf_config, sipe_kwargs: dict) -> SiPEConfig:
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError(f"only the DeBERTa-v3 layout converts: {what}")

    need(getattr(hf_config, "relative_attention", False), "relative_attention must be true")
    need(set(hf_config.pos_att_type or []) == {"c2p", "p2c"}, "pos_att_type must be [p2c, c2p]")
    need(getattr(hf_config, "share_att_key", False), "share_att_key must be true")
    need(
        "layer_norm" in str(getattr(hf_config, "norm_rel_ebd", "none")),
        "norm_rel_ebd must include layer_norm",
    )
    need(not getattr(hf_config, "position_biased_input", True), "position_biased_input must be false")
    need(getattr(hf_config, "conv_kernel_size", 0) == 0, "no ConvLayer (conv_kernel_size=0)")
    need(
        getattr(hf_config, "embedding_size", hf_config.hidden_size) == hf_config.hidden_size, "embedding_size"
    )
    need(
        getattr(hf_config, "attention_head_size", None)
        in (None, hf_config.hidden_size // hf_config.num_attention_heads),
        "attention_head_size must be hidden_size / num_attention_heads",
    )
    max_rel = hf_config.max_relative_positions
    arch = {
        "dropout": hf_config.hidden_dropout_prob,
        "attention_dropout": hf_config.attention_probs_dropout_prob,
        "layer_norm_eps": hf_config.layer_norm_eps,
        "type_vocab_size": hf_config.type_vocab_size,
        "hidden_act": hf_config.hidden_act,
        "pooler_hidden_act": getattr(hf_config, "pooler_hidden_act", "gelu"),
        "classifier_dropout": getattr(hf_config, "cls_dropout", None),
        "position_buckets": getattr(hf_config, "position_buckets", -1),
        "max_relative_positions": max_rel if max_rel >= 1 else hf_config.max_position_embeddings,
    }
    return hf_sipe_config(hf_config, "deberta", arch, sipe_kwargs)


def _backbone_weights(hf_base, n_layers: int) -> dict[str, torch.Tensor]:
    sd = hf_base.state_dict()
    out = bert_embedding_weights(sd)
    out["rel.table.weight"] = sd["encoder.rel_embeddings.weight"]
    out["rel.norm.weight"] = sd["encoder.LayerNorm.weight"]
    out["rel.norm.bias"] = sd["encoder.LayerNorm.bias"]
    out.update(bert_layer_weights(sd, n_layers, qkv="self.{n}_proj"))
    return out


def _deberta_classes() -> tuple[type, type, type]:
    from transformers import DebertaV2ForMaskedLM, DebertaV2ForSequenceClassification, DebertaV2Model

    return DebertaV2ForMaskedLM, DebertaV2ForSequenceClassification, DebertaV2Model


def _mlm_head_weights(hf_model, config: SiPEConfig) -> dict[str, torch.Tensor]:
    """The legacy (``cls.predictions``) or the new (``lm_predictions``) MLM head."""
    if hf_model.legacy:
        sd = hf_model.cls.predictions.state_dict()
        dense, norm, bias = "transform.dense", "transform.LayerNorm", "bias"
    else:
        sd = hf_model.lm_predictions.lm_head.state_dict()
        dense, norm, bias = "dense", "LayerNorm", "bias"
    weights = {"lm_head.decoder.bias": sd[bias]}
    for kind in ("weight", "bias"):
        weights[f"lm_head.dense.{kind}"] = sd[f"{dense}.{kind}"]
        weights[f"lm_head.norm.{kind}"] = sd[f"{norm}.{kind}"]
    return weights


def _classifier_weights(hf_model) -> dict[str, torch.Tensor]:
    weights = {}
    for ours, theirs in (("pooler_dense", hf_model.pooler.dense), ("classifier", hf_model.classifier)):
        weights[f"{ours}.weight"] = theirs.weight
        weights[f"{ours}.bias"] = theirs.bias
    return weights


HF_CONVERSION = HFConversion(
    name="DeBERTa-v2/v3",
    hf_classes=_deberta_classes,
    base_attr="deberta",
    config_from_hf=_config_from_hf,
    backbone_weights=_backbone_weights,
    mlm_head_weights=_mlm_head_weights,
    classifier_weights=_classifier_weights,
    fresh_head=("pooler_", "classifier"),
    masked_lm=DebertaSiPEForMaskedLM,
    classification=DebertaSiPEForSequenceClassification,
)


def from_hf(hf_model, head: str = "mlm", **sipe_kwargs):
    """Our DeBERTa (MLM or classification) with the weights of a ``transformers`` DeBERTa-v2/v3 model
    (``DebertaV2ForMaskedLM``, legacy or new MLM head, ``DebertaV2ForSequenceClassification`` or
    ``DebertaV2Model``); see ``convert_hf``."""
    return convert_hf(hf_model, HF_CONVERSION, head, **sipe_kwargs)


__all__ = [
    "DebertaSiPEForMaskedLM",
    "DebertaSiPEForSequenceClassification",
    "DebertaSiPEModel",
    "from_hf",
    "log_bucket",
]
