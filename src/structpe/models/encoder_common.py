"""What the three SiPE encoders share (SiPE §3.2, §3.4, §3.5, App. A.1, E; docs/design.md §2, §6).

* ``SiPEEncoderPreTrainedModel`` -- the ``transformers`` base (config class, weight init that
  respects loaded weights, tied MLM decoder).
* ``InputPrior`` -- input-side injection with the fusion ablations of SiPE table 12:
      add       x'_p = x_p + prior_p                         (eq. 2 / 11; ADD_T_NT)
      alpha     x'_p = a x_p + (1 - a) prior_p               (ADD_T_NT (alpha), ADD_DNT (alpha))
      concat    x'_p = W [x_p; part_1; part_2 (; part_3)]    (CONCAT_T_NT, CONCAT_POS_*)
      residual  h^(1) = LN(x + prior + Attn(x))              (prior on the first skip branch)
  where x_p is the raw embedding sum before the embedding LayerNorm and prior_p =
  m_p (E_T[tau_p] + E_N[nu_p]) (or with E_D[deprel_p], see ``SiPEConfig.prior_parts``).
* ``apply_input_prior``, ``position_prior`` / ``tag_pairs`` / ``layer_pair_projection``,
  ``add_segment_embedding``, ``key_padding_mask``, ``LayerOutputs`` -- the plumbing every backbone runs
  around its own layers (the family files keep the architecture itself).
* ``attend`` -- one attention call: ``F.scaled_dot_product_attention`` unless the caller asks for
  the attention weights.
* ``MaskedLMHead`` + ``masked_lm_output`` -- the tied MLM head and the MLM rule of App. A.1: at
  masked positions (labels != -100) the prior is zeroed and the tag heads predict the position's
  own tags; loss = MLM + tag_loss_weight * (CE_T + CE_N).
* ``classification_output`` -- the GLUE loss (regression / single- / multi-label).
* ``SiPEEncoderWithHead`` -- the forward shared by the MLM and the classification model.
* ``load_converted`` -- copy a converted Hugging Face state dict into one of our models and
  refuse silently-missing or left-over weights.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from structpe.models.config import SiPEConfig
from structpe.models.outputs import SiPEOutput
from structpe.models.sipe_parts import make_tag_heads
from structpe.modules.init_rules import apply_init_rule
from structpe.modules.input_prior import InputPrior
from structpe.modules.prior import IGNORE_INDEX, HexatagPrior, TagHeads, mlm_tag_targets, tag_losses
from structpe.modules.prior_projection import PriorProjection


def keep_mask(labels: torch.Tensor | None) -> torch.Tensor | None:
    """Positions whose prior survives: the MLM rule zeroes it where the token is masked."""
    return None if labels is None else labels == IGNORE_INDEX


def check_tags(
    terminal_ids: torch.Tensor | None,
    nonterminal_ids: torch.Tensor | None,
    shape: torch.Size | None = None,
    deprel_ids: torch.Tensor | None = None,
) -> bool:
    """True when tags are given; both or neither must be passed and, given ``shape`` (input_ids'
    [B, L]), match it exactly -- broadcasting one sentence's tags over a batch is an error."""
    if (terminal_ids is None) != (nonterminal_ids is None):
        raise ValueError("pass terminal_ids and nonterminal_ids together (or neither)")
    if terminal_ids is None or shape is None:
        return terminal_ids is not None
    tags = {"terminal_ids": terminal_ids, "nonterminal_ids": nonterminal_ids, "deprel_ids": deprel_ids}
    bad = {k: tuple(v.shape) for k, v in tags.items() if v is not None and v.shape != shape}
    if bad:
        raise ValueError(f"tag tensors must match input_ids {tuple(shape)}, got {bad}")
    return True


def apply_input_prior(
    input_prior: InputPrior | None,
    x: torch.Tensor,
    terminal_ids: torch.Tensor | None,
    nonterminal_ids: torch.Tensor | None,
    deprel_ids: torch.Tensor | None,
    keep: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``InputPrior``'s (x', skip_prior), or (x, None) when no tags are given or the model has no input prior.

    The tags are checked (both or neither) even when the model ignores them, so a wrong call fails on
    every configuration alike.
    """
    if not check_tags(terminal_ids, nonterminal_ids, x.shape[:2], deprel_ids) or input_prior is None:
        return x, None
    return input_prior(x, terminal_ids, nonterminal_ids, deprel_ids, keep)


def tag_pairs(
    prior: HexatagPrior | None,
    terminal_ids: torch.Tensor | None,
    nonterminal_ids: torch.Tensor | None,
    deprel_ids: torch.Tensor | None,
    keep: torch.Tensor | None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(pair_ids [B, L], pair table [P, d]) of the position prior; (None, None) without tags or prior.

    The prior takes one of P <= 11 values per position, so layers project the small table, not [B, L, d].
    """
    if prior is None or not check_tags(terminal_ids, nonterminal_ids):
        return None, None
    return prior.pair_ids(terminal_ids, nonterminal_ids, deprel_ids, keep), prior.pair_table()


def layer_pair_projection(
    prior_proj: PriorProjection | None, table: torch.Tensor | None, layer: int
) -> torch.Tensor | None:
    """W^(layer) applied to the pair table ([H, P, d_out]), or None where that layer gets no prior."""
    if table is None or not prior_proj.has_layer(layer):
        return None
    return prior_proj(table, layer)


def add_segment_embedding(
    x: torch.Tensor, token_type: nn.Embedding | None, token_type_ids: torch.Tensor | None
) -> torch.Tensor:
    """x + e^seg (segment 0 when no ids are given), as BERT-style embeddings do.

    A model built without segment embeddings (type_vocab_size=0) refuses non-zero ids rather than
    silently dropping them.
    """
    if token_type is not None:
        return x + (token_type.weight[0] if token_type_ids is None else token_type(token_type_ids))
    if token_type_ids is not None and bool(token_type_ids.any()):
        raise ValueError("token_type_ids given but the model has no segment embeddings (type_vocab_size=0)")
    return x


def key_padding_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """[B, 1, 1, L] bool (True = attend) over keys only, as transformers does.

    None when nothing is padded, so that attention can take the unmasked kernel.
    """
    if attention_mask is None or bool(attention_mask.all()):
        return None
    return attention_mask.bool()[:, None, None, :]


# what every backbone's forward returns: (last hidden state, hidden states, attention weights), the last two
# None unless asked for
BackboneOutput = tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, tuple[torch.Tensor, ...] | None]


class LayerOutputs:
    """The per-layer outputs transformers returns on request: hidden states (the embedding output
    first, then one per layer) and attention weights; nothing is kept unless asked for."""

    def __init__(self, x: torch.Tensor, output_hidden_states: bool, output_attentions: bool):
        self.hidden_states: list[torch.Tensor] | None = [x] if output_hidden_states else None
        self.attentions: list[torch.Tensor | None] | None = [] if output_attentions else None

    def add(self, x: torch.Tensor, probs: torch.Tensor | None) -> None:
        if self.hidden_states is not None:
            self.hidden_states.append(x)
        if self.attentions is not None:
            self.attentions.append(probs)

    def result(self, x: torch.Tensor) -> BackboneOutput:
        """(last, hidden_states, attentions) with ``x`` as the last hidden state."""
        return (
            x,
            tuple(self.hidden_states) if self.hidden_states is not None else None,
            tuple(self.attentions) if self.attentions is not None else None,
        )


def attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float,
    dropout: float,
    need_weights: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(q k^T * scale + mask) v over [B, H, L, d]; ``mask`` is bool (True = attend) or additive.

    Uses the fused SDPA kernel; the explicit path only runs when the caller wants the weights
    (attention analysis), with the same numbers.
    """
    if not need_weights:
        out = F.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, dropout_p=dropout, scale=scale
        )
        return out, None
    scores = torch.matmul(query, key.transpose(-1, -2)) * scale
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + mask
    probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(F.dropout(probs, p=dropout), value)
    return out, probs


class MaskedLMHead(nn.Module):
    """dense -> act -> LayerNorm -> decoder (tied to the word embeddings) + bias."""

    def __init__(self, config: SiPEConfig, act: str, bias: bool = True, norm_bias: bool = True):
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model, bias=bias)
        self.act = activation(act)
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=norm_bias)
        self.decoder = nn.Linear(config.d_model, config.vocab_size, bias=True)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.norm(self.act(self.dense(hidden))))


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


ACTIVATIONS = {  # the transformers ACT2FN names our checkpoints use, as plain functions
    "gelu": F.gelu,
    "gelu_new": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "relu": F.relu,
    "tanh": torch.tanh,
}


def activation(name: str):
    """The activation function called ``name`` (transformers' spelling)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unsupported activation {name!r}; expected one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


class SiPEEncoderPreTrainedModel(PreTrainedModel):
    """Base of every encoder model: ``config_class`` SiPEConfig, backbone under ``backbone``."""

    config_class = SiPEConfig
    base_model_prefix = "backbone"
    supports_gradient_checkpointing = False
    _supports_sdpa = True

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        apply_init_rule(module)
        if isinstance(module, InputPrior):
            module.reset_sipe_parameters()


def masked_lm_output(
    config: SiPEConfig,
    logits: torch.Tensor,
    last_hidden: torch.Tensor,
    tag_heads: TagHeads | None,
    labels: torch.Tensor | None,
    terminal_ids: torch.Tensor | None,
    nonterminal_ids: torch.Tensor | None,
    hidden_states: tuple[torch.Tensor, ...] | None,
    attentions: tuple[torch.Tensor, ...] | None,
) -> SiPEOutput:
    """loss = MLM + tag_loss_weight * (CE_T + CE_N), tag targets = own tags at masked positions."""
    out = SiPEOutput(logits=logits, hidden_states=hidden_states, attentions=attentions)
    if tag_heads is not None:
        out.terminal_logits, out.nonterminal_logits = tag_heads(last_hidden)
    if labels is None:
        return out
    out.lm_loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1))
    out.loss = out.lm_loss
    if tag_heads is not None and check_tags(terminal_ids, nonterminal_ids):
        t_target, n_target = mlm_tag_targets(terminal_ids, nonterminal_ids, labels)
        out.terminal_loss, out.nonterminal_loss = tag_losses(
            out.terminal_logits, out.nonterminal_logits, t_target, n_target
        )
        out.loss = out.lm_loss + config.tag_loss_weight * (out.terminal_loss + out.nonterminal_loss)
    return out


def classification_output(
    config: SiPEConfig,
    logits: torch.Tensor,
    labels: torch.Tensor | None,
    hidden_states: tuple[torch.Tensor, ...] | None,
    attentions: tuple[torch.Tensor, ...] | None,
) -> SiPEOutput:
    """GLUE losses as in ``transformers``: MSE for one label, else CE (int labels) or BCE (float)."""
    out = SiPEOutput(logits=logits, hidden_states=hidden_states, attentions=attentions)
    if labels is None:
        return out
    n = config.num_labels
    problem = config.problem_type
    if problem is None:
        if n == 1:
            problem = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem = "single_label_classification"
        else:
            problem = "multi_label_classification"
    if problem == "regression":
        out.loss = (
            F.mse_loss(logits.squeeze(-1).float(), labels.float().reshape(-1))
            if n == 1
            else F.mse_loss(logits.float(), labels.float())
        )
    elif problem == "single_label_classification":
        out.loss = F.cross_entropy(logits.reshape(-1, n).float(), labels.reshape(-1))
    else:
        out.loss = F.binary_cross_entropy_with_logits(logits.float(), labels.float())
    return out


def bert_embedding_weights(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Map Hugging Face's BERT-style embedding weights (RoBERTa, DeBERTa): words, LayerNorm and,
    where the checkpoint has them, segments; positions are the family's own business."""
    out = {
        "embeddings.word.weight": sd["embeddings.word_embeddings.weight"],
        "embeddings.norm.weight": sd["embeddings.LayerNorm.weight"],
        "embeddings.norm.bias": sd["embeddings.LayerNorm.bias"],
    }
    if "embeddings.token_type_embeddings.weight" in sd:
        out["embeddings.token_type.weight"] = sd["embeddings.token_type_embeddings.weight"]
    return out


def bert_layer_weights(sd: Mapping[str, torch.Tensor], n_layers: int, qkv: str) -> dict[str, torch.Tensor]:
    """Map Hugging Face's BERT-style layer weights (RoBERTa, DeBERTa) onto ours, layer by layer.

    ``qkv`` names the self-attention projections, e.g. ``"self.{n}"`` (RoBERTa) or
    ``"self.{n}_proj"`` (DeBERTa), with ``{n}`` in query / key / value; ours are one fused ``qkv``.
    """
    out = {}
    for i in range(n_layers):
        src, dst = f"encoder.layer.{i}.", f"layers.{i}."
        att = src + "attention."
        for kind in ("weight", "bias"):
            out[dst + f"qkv.{kind}"] = torch.cat(
                [sd[att + qkv.format(n=n) + f".{kind}"] for n in ("query", "key", "value")]
            )
            out[dst + f"attn_out.{kind}"] = sd[att + f"output.dense.{kind}"]
            out[dst + f"attn_norm.{kind}"] = sd[att + f"output.LayerNorm.{kind}"]
            out[dst + f"ff_in.{kind}"] = sd[src + f"intermediate.dense.{kind}"]
            out[dst + f"ff_out.{kind}"] = sd[src + f"output.dense.{kind}"]
            out[dst + f"ff_norm.{kind}"] = sd[src + f"output.LayerNorm.{kind}"]
    return out


def load_converted(model: nn.Module, weights: Mapping[str, torch.Tensor], source: str) -> None:
    """Copy ``weights`` (our parameter names) into ``model``; every non-SiPE tensor must be covered.

    SiPE-only parameters (prior tables, projections, fusion, tag heads) keep their fresh init, and
    tied parameters may be left out. Anything else missing, or any name we do not have, is an error.
    """
    own = model.state_dict()
    unknown = sorted(set(weights) - set(own))
    if unknown:
        raise ValueError(f"converting {source}: no parameter of ours is called {unknown[:5]}")
    tied = set(getattr(model, "all_tied_weights_keys", {}) or {})
    sipe_only = ("prior", "tag_heads", "prior_proj", "input_prior")
    missing = [
        k
        for k in own
        if k not in weights and k not in tied and not any(part in k.split(".") for part in sipe_only)
    ]
    if missing:
        raise ValueError(f"converting {source}: these weights of ours have no source: {missing[:8]}")
    for name, tensor in weights.items():
        if own[name].shape != tensor.shape:
            raise ValueError(
                f"converting {source}: {name} has shape {tuple(tensor.shape)}, ours {tuple(own[name].shape)}"
            )
    with torch.no_grad():
        for name, tensor in weights.items():
            own[name].copy_(tensor)


class SiPEEncoderWithHead(SiPEEncoderPreTrainedModel):
    """backbone -> task head, with the calling convention of docs/design.md §6 (MLM and GLUE models alike).

    A family subclass sets ``family`` and ``backbone_class``; the task classes below build their heads
    (``build_heads``), say where the prior survives (``prior_keep``) and read the output (``head_output``).
    """

    family: str = ""
    backbone_class: type[nn.Module]

    def __init__(self, config: SiPEConfig):
        if config.family != self.family:
            raise ValueError(f"{type(self).__name__} needs family={self.family!r}, got {config.family!r}")
        super().__init__(config)
        self.backbone = self.backbone_class(config)
        self.build_heads(config)
        self.post_init()

    def build_heads(self, config: SiPEConfig) -> None:
        """Abstract: create the task head(s) on top of ``self.backbone``."""
        raise NotImplementedError(f"{type(self).__name__} must define build_heads")

    def prior_keep(self, labels: torch.Tensor | None) -> torch.Tensor | None:
        """Abstract: the positions whose prior survives (None: all of them)."""
        raise NotImplementedError(f"{type(self).__name__} must define prior_keep")

    def head_output(
        self,
        last: torch.Tensor,
        attention_mask: torch.Tensor | None,
        labels: torch.Tensor | None,
        terminal_ids: torch.Tensor | None,
        nonterminal_ids: torch.Tensor | None,
        hidden_states: tuple[torch.Tensor, ...] | None,
        attentions: tuple[torch.Tensor, ...] | None,
    ) -> SiPEOutput:
        """Abstract: logits and losses from the last hidden states [B, L, d]."""
        raise NotImplementedError(f"{type(self).__name__} must define head_output")

    def get_input_embeddings(self) -> nn.Embedding:
        return self.backbone.embeddings.word

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.backbone.embeddings.word = value

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        terminal_ids: torch.Tensor | None = None,
        nonterminal_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        deprel_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> SiPEOutput:
        """``labels``: MLM targets (-100 at unmasked positions) or class ids / float targets for GLUE."""
        last, hidden_states, attentions = self.backbone(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            terminal_ids=terminal_ids,
            nonterminal_ids=nonterminal_ids,
            deprel_ids=deprel_ids,
            keep=self.prior_keep(labels),
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        return self.head_output(
            last, attention_mask, labels, terminal_ids, nonterminal_ids, hidden_states, attentions
        )


class SiPEEncoderForMaskedLM(SiPEEncoderWithHead):
    """backbone -> tied MLM head, plus the tag heads; a family says how its MLM head looks."""

    _tied_weights_keys = {"lm_head.decoder.weight": "backbone.embeddings.word.weight"}

    def build_heads(self, config: SiPEConfig) -> None:
        self.lm_head = self.make_lm_head(config)
        self.tag_heads = make_tag_heads(config)

    def make_lm_head(self, config: SiPEConfig) -> MaskedLMHead:
        return MaskedLMHead(config, act=config.hidden_act)

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head.decoder

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head.decoder = value

    def prior_keep(self, labels: torch.Tensor | None) -> torch.Tensor | None:
        """The prior is zeroed where labels != -100 (App. A.1): a masked token must not see its own tags."""
        return keep_mask(labels)

    def head_output(
        self,
        last: torch.Tensor,
        attention_mask: torch.Tensor | None,
        labels: torch.Tensor | None,
        terminal_ids: torch.Tensor | None,
        nonterminal_ids: torch.Tensor | None,
        hidden_states: tuple[torch.Tensor, ...] | None,
        attentions: tuple[torch.Tensor, ...] | None,
    ) -> SiPEOutput:
        return masked_lm_output(
            self.config,
            self.lm_head(last),
            last,
            self.tag_heads,
            labels,
            terminal_ids,
            nonterminal_ids,
            hidden_states,
            attentions,
        )


class SiPEEncoderForSequenceClassification(SiPEEncoderWithHead):
    """backbone -> pooled classifier (GLUE). Tags enter unmasked; there is no auxiliary loss."""

    def build_heads(self, config: SiPEConfig) -> None:
        self.build_classifier(config)

    def build_classifier(self, config: SiPEConfig) -> None:
        """Abstract: each family builds its own head (RoBERTa/DeBERTa pooler + dense, ModernBERT cls/mean)."""
        raise NotImplementedError(f"{type(self).__name__} must define build_classifier")

    def classify(self, last: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Abstract: pool the last hidden states [B, L, d] into class logits [B, n_labels]."""
        raise NotImplementedError(f"{type(self).__name__} must define classify")

    def prior_keep(self, labels: torch.Tensor | None) -> None:
        """Class labels say nothing about positions: every tag enters."""
        return None

    def head_output(
        self,
        last: torch.Tensor,
        attention_mask: torch.Tensor | None,
        labels: torch.Tensor | None,
        terminal_ids: torch.Tensor | None,
        nonterminal_ids: torch.Tensor | None,
        hidden_states: tuple[torch.Tensor, ...] | None,
        attentions: tuple[torch.Tensor, ...] | None,
    ) -> SiPEOutput:
        """``labels`` are class ids [B] (or float targets for regression / multi-label)."""
        logits = self.classify(last, attention_mask)
        return classification_output(self.config, logits, labels, hidden_states, attentions)


def hf_sipe_config(hf_config, family: str, arch: dict, sipe_kwargs: dict) -> SiPEConfig:
    """A SiPEConfig from an HF config's shared fields + the family's ``arch`` fields + SiPE kwargs."""
    fields = {
        "family": family,
        "vocab_size": hf_config.vocab_size,
        "d_model": hf_config.hidden_size,
        "n_layers": hf_config.num_hidden_layers,
        "n_heads": hf_config.num_attention_heads,
        "d_ff": hf_config.intermediate_size,
        "max_position_embeddings": hf_config.max_position_embeddings,
        "initializer_range": hf_config.initializer_range,
        "pad_token_id": hf_config.pad_token_id,
        "bos_token_id": getattr(hf_config, "bos_token_id", None),
        "eos_token_id": getattr(hf_config, "eos_token_id", None),
        "num_labels": hf_config.num_labels,
        "id2label": dict(hf_config.id2label),
        "problem_type": getattr(hf_config, "problem_type", None),
    }
    fields.update(arch)
    clash = sorted(set(sipe_kwargs) & set(fields) - {"num_labels", "id2label", "problem_type"})
    if clash:
        raise ValueError(f"{clash} come from the Hugging Face checkpoint and cannot be overridden")
    fields.update(sipe_kwargs)
    if "num_labels" in sipe_kwargs:
        fields.pop("id2label")
    return SiPEConfig(**fields)
