"""ModernBERT-style SiPE encoder: rotary positions, local/global attention (SiPE §3.5, App. A.6).

Pre-norm blocks without biases, GeGLU MLP, RoPE with theta 160k on global layers and 10k on
sliding-window layers (|i - j| <= local_attention / 2); layer l is global iff l % 3 == 0. With
``injection="none"`` the numbers equal ``transformers``' ``ModernBertForMaskedLM`` given the same
weights; ``from_hf`` converts one.

SiPE sites: ``input`` (the prior joins the token embedding inside the embedding LayerNorm) and
``position`` (PP-SiPE, eq. 14-16): a per-layer phase offset

    dtheta_{p,t} = (W_delta^(l) (E_T[tau_p] + E_N[nu_p]))_t
    q~_{m,t} = R(m w_t + dtheta_{m,t}) q_{m,t},   k~_{j,t} = R(j w_t + dtheta_{j,t}) k_{j,t}

so the angle between m and j becomes (m - j) w_t + dtheta_{m,t} - dtheta_{j,t}. W_delta starts
near zero, and W_delta = 0 is exactly plain RoPE. Angles come from ``structpe.modules.rotary``
(shared with LIS; Hugging Face split-halves pairs); ``rotate_with`` applies them with cos/sin computed
once per forward, and the tag shift is added by angle addition on the <= 11 distinct dtheta values.
``lis_tree2`` (not SiPE's; docs/lis.md) adds each word's address in the whole dependency tree to
the angles instead: theta_{p,t} + (tree angle)_{p,t}, so the score's journey is the linear offset
plus the tree path between the two words.
"""

from __future__ import annotations

import torch
from torch import nn

from structpe.models.config import SiPEConfig
from structpe.models.encoder_base import SiPEEncoderForMaskedLM, SiPEEncoderForSequenceClassification
from structpe.models.encoder_layers import (
    BackboneOutput,
    LayerOutputs,
    MaskedLMHead,
    activation,
    attend,
    key_padding_mask,
)
from structpe.models.hf_convert import HFConversion, convert_hf, hf_sipe_config
from structpe.models.sipe_parts import (
    apply_input_prior,
    encoder_tree_angles,
    input_prior,
    layer_pair_projection,
    position_prior,
    tag_pairs,
    tree_address,
)
from structpe.modules.init_rules import set_init
from structpe.modules.rotary import rope_angles, rotate_with


def shifted_cos_sin(
    cos: torch.Tensor, sin: torch.Tensor, shift_table: torch.Tensor, pair_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos / sin of theta_{p,t} + dtheta_{p,t} [B, H, L, d/2] by angle addition.

    dtheta depends on p only through its tag pair, so cos/sin of the [H, P, d/2] shift table are
    computed once and gathered (one contiguous index_select): no transcendental over [B, H, L, d/2].
    """
    n_heads, n_pairs, half = shift_table.shape
    table = torch.cat((shift_table.cos(), shift_table.sin()), dim=-1).reshape(n_heads * n_pairs, 2 * half)
    flat = pair_ids[:, None, :] + torch.arange(n_heads, device=pair_ids.device)[None, :, None] * n_pairs
    cos_d, sin_d = table[flat].chunk(2, dim=-1)  # [B, H, L, d/2] each
    return cos * cos_d - sin * sin_d, sin * cos_d + cos * sin_d


class ModernBertEmbeddings(nn.Module):
    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        set_init(self.word, "trunc_normal", config.initializer_range)
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=False)
        self.drop = nn.Dropout(config.dropout)


class ModernBertLayer(nn.Module):
    """x += Attn(LN(x)); x += GeGLU(LN(x)). Layer 0 skips its attention norm (embeddings are normed)."""

    def __init__(self, config: SiPEConfig, index: int):
        super().__init__()
        d = config.d_model
        self.n_heads = config.n_heads
        self.d_head = config.d_head
        self.is_global = index % config.global_attn_every_n_layers == 0
        self.attn_norm = (
            nn.Identity() if index == 0 else nn.LayerNorm(d, eps=config.layer_norm_eps, bias=False)
        )
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.attn_out = nn.Linear(d, d, bias=False)
        self.mlp_norm = nn.LayerNorm(d, eps=config.layer_norm_eps, bias=False)
        self.mlp_in = nn.Linear(d, 2 * config.d_ff, bias=False)  # GeGLU: [input; gate]
        self.mlp_out = nn.Linear(config.d_ff, d, bias=False)
        self.act = activation(config.hidden_act)
        # ModernBERT's init: truncated normal, output projections scaled by 1/sqrt(2 n_layers)
        out_std = config.initializer_range / (2.0 * config.n_layers) ** 0.5
        for lin, std in ((self.qkv, config.initializer_range), (self.mlp_in, config.initializer_range)):
            set_init(lin, "trunc_normal", std)
        for lin in (self.attn_out, self.mlp_out):
            set_init(lin, "trunc_normal", out_std)
        self.attn_dropout = config.attention_dropout
        self.out_drop = nn.Dropout(config.attention_dropout)
        self.mlp_drop = nn.Dropout(config.dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        cos: torch.Tensor,
        sin: torch.Tensor,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        bsz, length, d = x.shape
        qkv = self.qkv(self.attn_norm(x)).view(bsz, length, 3, self.n_heads, self.d_head)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # [3, B, H, L, dh]
        q, k = rotate_with(qkv[:2], cos, sin).unbind(0)  # q and k in one rotation
        v = qkv[2]
        dropout = self.attn_dropout if self.training else 0.0
        ctx, probs = attend(q, k, v, mask, self.d_head**-0.5, dropout, output_attentions)
        x = x + self.out_drop(self.attn_out(ctx.transpose(1, 2).reshape(bsz, length, d)))
        inp, gate = self.mlp_in(self.mlp_norm(x)).chunk(2, dim=-1)
        x = x + self.mlp_out(self.mlp_drop(self.act(inp) * gate))
        return x, probs


class ModernBertSiPEModel(nn.Module):
    """Embeddings (+ input prior), alternating global/local rotary layers (+ PP-SiPE phase), final norm."""

    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.config = config
        self.embeddings = ModernBertEmbeddings(config)
        self.layers = nn.ModuleList(ModernBertLayer(config, i) for i in range(config.n_layers))
        self.final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=False)
        self.input_prior = input_prior(config)
        # E_T, E_N and W_delta^(l): one angle per frequency pair
        self.prior, self.prior_proj = position_prior(config, d_out=config.d_head // 2)
        self.tree_address = tree_address(config) if config.uses_tree_address else None  # lis_tree2

    def _masks(self, attention_mask: torch.Tensor | None, length: int, device) -> tuple:
        """(global, local) boolean masks, True = attend; None where nothing is masked."""
        keys = key_padding_mask(attention_mask)
        half = self.config.local_attention // 2
        if length <= half + 1:
            return keys, keys  # the window covers the whole sequence
        pos = torch.arange(length, device=device)
        band = ((pos[:, None] - pos[None, :]).abs() <= half)[None, None]
        return keys, band if keys is None else band & keys

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
        if token_type_ids is not None and bool(token_type_ids.any()):
            raise ValueError("ModernBERT has no segment embeddings; token_type_ids must be None or all zero")
        length = input_ids.shape[1]
        cfg = self.config
        x = self.embeddings.word(input_ids)
        x, _ = apply_input_prior(self.input_prior, x, terminal_ids, nonterminal_ids, deprel_ids, keep)
        x = self.embeddings.drop(self.embeddings.norm(x))

        global_mask, local_mask = self._masks(attention_mask, length, input_ids.device)
        positions = torch.arange(length, device=input_ids.device)
        base = {  # theta_{p,t} = p w_t per layer type, [L, d_head/2]
            True: rope_angles(positions, cfg.d_head, cfg.global_rope_theta),
            False: rope_angles(positions, cfg.d_head, cfg.local_rope_theta),
        }
        cos_sin = {kind: (angles.cos(), angles.sin()) for kind, angles in base.items()}
        pair_ids, table = tag_pairs(self.prior, terminal_ids, nonterminal_ids, deprel_ids, keep)
        trees = encoder_tree_angles(self.tree_address, cfg, terminal_ids, nonterminal_ids, deprel_ids, keep)

        outputs = LayerOutputs(x, output_hidden_states, output_attentions)
        for i, layer in enumerate(self.layers):
            cos, sin = cos_sin[layer.is_global]
            # PP-SiPE: dtheta per head and tag pair [H, P, d_head/2], added to the angles by angle addition
            shifts = layer_pair_projection(self.prior_proj, table, i)
            if shifts is not None:
                cos, sin = shifted_cos_sin(cos, sin, shifts.float(), pair_ids)
            if trees[i] is not None:  # lis_tree2: theta + tree angle [B, H, L, d_head/2], by angle addition
                cos_t, sin_t = trees[i].cos(), trees[i].sin()
                cos, sin = cos * cos_t - sin * sin_t, sin * cos_t + cos * sin_t
            mask = global_mask if layer.is_global else local_mask
            x, probs = layer(x, mask, cos, sin, output_attentions)
            outputs.add(x, probs)
        x = self.final_norm(x)
        if outputs.hidden_states is not None:
            outputs.hidden_states[-1] = x  # as transformers: the last entry is the final-normed output
        return outputs.result(x)


class ModernBertSiPEForMaskedLM(SiPEEncoderForMaskedLM):
    """ModernBERT + SiPE (input | position) + tied MLM head (no-bias dense/norm) + tag heads."""

    family = "modernbert"
    backbone_class = ModernBertSiPEModel

    def make_lm_head(self, config: SiPEConfig) -> MaskedLMHead:
        head = MaskedLMHead(config, act=config.hidden_act, bias=False, norm_bias=False)
        set_init(head.dense, "trunc_normal", config.initializer_range / (2.0 * config.n_layers) ** 0.5)
        return head


class ModernBertSiPEForSequenceClassification(SiPEEncoderForSequenceClassification):
    """ModernBERT's GLUE head: pool ([CLS] or mean) -> dense -> act -> LN -> dropout -> classifier."""

    family = "modernbert"
    backbone_class = ModernBertSiPEModel

    def build_classifier(self, config: SiPEConfig) -> None:
        self.classifier_dense = nn.Linear(config.d_model, config.d_model, bias=False)
        self.classifier_act = activation(config.hidden_act)
        self.classifier_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=False)
        p = config.classifier_dropout if config.classifier_dropout is not None else 0.0
        self.classifier_drop = nn.Dropout(p)
        self.classifier = nn.Linear(config.d_model, config.num_labels)
        set_init(
            self.classifier_dense, "trunc_normal", config.initializer_range / (2.0 * config.n_layers) ** 0.5
        )
        set_init(self.classifier, "trunc_normal", config.d_model**-0.5)

    def classify(self, last: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        if self.config.classifier_pooling == "cls":
            pooled = last[:, 0]
        else:
            weights = (
                torch.ones(last.shape[:2], device=last.device) if attention_mask is None else attention_mask
            )
            weights = weights.to(last.dtype).unsqueeze(-1)
            pooled = (last * weights).sum(1) / weights.sum(1)
        pooled = self.classifier_norm(self.classifier_act(self.classifier_dense(pooled)))
        return self.classifier(self.classifier_drop(pooled))


# --------------------------------------------------------------------------- Hugging Face conversion


def _config_from_hf(hf_config, sipe_kwargs: dict) -> SiPEConfig:
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError(f"this ModernBERT checkpoint does not fit our layout: {what}")

    for flag in ("attention_bias", "mlp_bias", "norm_bias", "classifier_bias"):
        need(not getattr(hf_config, flag, False), f"{flag} must be false")
    need(getattr(hf_config, "decoder_bias", True), "decoder_bias must be true")
    need(
        hf_config.classifier_activation == hf_config.hidden_activation,
        "classifier_activation != hidden_activation",
    )
    types = list(hf_config.layer_types)
    every = next((i for i in range(1, len(types)) if types[i] == "full_attention"), len(types))
    expected = ["sliding_attention" if i % every else "full_attention" for i in range(len(types))]
    need(types == expected, f"layer_types must be global every n-th layer, got {types}")
    rope = hf_config.rope_parameters
    for kind in ("full_attention", "sliding_attention"):
        need(rope[kind].get("rope_type", "default") == "default", f"{kind} rope_type must be default")
    arch = {
        "dropout": hf_config.mlp_dropout,
        "attention_dropout": hf_config.attention_dropout,
        "layer_norm_eps": hf_config.norm_eps,
        "type_vocab_size": 0,
        "hidden_act": hf_config.hidden_activation,
        "classifier_dropout": hf_config.classifier_dropout,
        "classifier_pooling": hf_config.classifier_pooling,
        "global_rope_theta": rope["full_attention"]["rope_theta"],
        "local_rope_theta": rope["sliding_attention"]["rope_theta"],
        "local_attention": hf_config.local_attention,
        "global_attn_every_n_layers": max(every, 1),
        "pre_norm": True,
    }
    return hf_sipe_config(hf_config, "modernbert", arch, sipe_kwargs)


def _backbone_weights(hf_base, n_layers: int) -> dict[str, torch.Tensor]:
    sd = hf_base.state_dict()
    out = {
        "embeddings.word.weight": sd["embeddings.tok_embeddings.weight"],
        "embeddings.norm.weight": sd["embeddings.norm.weight"],
        "final_norm.weight": sd["final_norm.weight"],
    }
    for i in range(n_layers):
        src, dst = f"layers.{i}.", f"layers.{i}."
        if i > 0:
            out[dst + "attn_norm.weight"] = sd[src + "attn_norm.weight"]
        out[dst + "qkv.weight"] = sd[src + "attn.Wqkv.weight"]
        out[dst + "attn_out.weight"] = sd[src + "attn.Wo.weight"]
        out[dst + "mlp_norm.weight"] = sd[src + "mlp_norm.weight"]
        out[dst + "mlp_in.weight"] = sd[src + "mlp.Wi.weight"]
        out[dst + "mlp_out.weight"] = sd[src + "mlp.Wo.weight"]
    return out


def _modernbert_classes() -> tuple[type, type, type]:
    from transformers import ModernBertForMaskedLM, ModernBertForSequenceClassification, ModernBertModel

    return ModernBertForMaskedLM, ModernBertForSequenceClassification, ModernBertModel


def _mlm_head_weights(hf_model, config: SiPEConfig) -> dict[str, torch.Tensor]:
    return {
        "lm_head.dense.weight": hf_model.head.dense.weight,
        "lm_head.norm.weight": hf_model.head.norm.weight,
        "lm_head.decoder.bias": hf_model.decoder.bias,
    }


def _classifier_weights(hf_model) -> dict[str, torch.Tensor]:
    return {
        "classifier_dense.weight": hf_model.head.dense.weight,
        "classifier_norm.weight": hf_model.head.norm.weight,
        "classifier.weight": hf_model.classifier.weight,
        "classifier.bias": hf_model.classifier.bias,
    }


HF_CONVERSION = HFConversion(
    name="ModernBERT",
    hf_classes=_modernbert_classes,
    base_attr="model",
    config_from_hf=_config_from_hf,
    backbone_weights=_backbone_weights,
    mlm_head_weights=_mlm_head_weights,
    classifier_weights=_classifier_weights,
    fresh_head=("classifier",),
    masked_lm=ModernBertSiPEForMaskedLM,
    classification=ModernBertSiPEForSequenceClassification,
)


def from_hf(hf_model, head: str = "mlm", **sipe_kwargs):
    """Our ModernBERT (MLM or classification) with the weights of a ``transformers`` ModernBERT model
    (``ModernBertForMaskedLM``, ``ModernBertForSequenceClassification`` or ``ModernBertModel``); see
    ``convert_hf``."""
    return convert_hf(hf_model, HF_CONVERSION, head, **sipe_kwargs)


__all__ = [
    "ModernBertSiPEForMaskedLM",
    "ModernBertSiPEForSequenceClassification",
    "ModernBertSiPEModel",
    "from_hf",
]
