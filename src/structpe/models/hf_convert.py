"""Hugging Face encoder checkpoints -> our encoders: one conversion routine for every family.

A family describes its conversion in an ``HFConversion`` (its transformers classes, the config
fields it takes over, the weight-name map of its backbone and heads); ``convert_hf`` does the rest
the same way for all: check the source, build our config and model, copy the weights, and refuse
silently-missing or left-over weights (``load_converted``). SiPE parameters start fresh.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from structpe.models.config import SiPEConfig


@dataclass(frozen=True)
class HFConversion:
    """What ``convert_hf`` needs to know about one family.

    ``hf_classes()`` returns the transformers (masked LM, sequence classification, bare model)
    classes, imported lazily; ``base_attr`` names the bare model inside the two task models.
    ``backbone_weights(base, n_layers)``, ``mlm_head_weights(hf_model, config)`` and
    ``classifier_weights(hf_model)`` map their tensors to our names (backbone ones without the
    ``backbone.`` prefix); ``fresh_head`` lists the prefixes of our classification head, kept
    freshly initialised when the source has none.
    """

    name: str
    hf_classes: Callable[[], tuple[type, type, type]]
    base_attr: str
    config_from_hf: Callable[[Any, dict], SiPEConfig]
    backbone_weights: Callable[[nn.Module, int], dict[str, torch.Tensor]]
    mlm_head_weights: Callable[[nn.Module, SiPEConfig], dict[str, torch.Tensor]]
    classifier_weights: Callable[[nn.Module], dict[str, torch.Tensor]]
    fresh_head: tuple[str, ...]
    masked_lm: Callable[[SiPEConfig], nn.Module]
    classification: Callable[[SiPEConfig], nn.Module]


def convert_hf(hf_model: nn.Module, conv: HFConversion, head: str = "mlm", **sipe_kwargs: Any) -> nn.Module:
    """Our ``conv`` encoder (``head`` mlm or classification) with the weights of ``hf_model``.

    ``hf_model`` is the family's transformers masked LM, sequence classifier or bare model;
    ``sipe_kwargs`` set the SiPE fields (``injection``, ``fusion`` ...). A classification head is
    copied when the source has one, else freshly initialised.
    """
    masked_cls, classifier_cls, base_cls = conv.hf_classes()
    if not isinstance(hf_model, (masked_cls, classifier_cls, base_cls)):
        raise TypeError(f"expected a transformers {conv.name} model, got {type(hf_model).__name__}")
    config = conv.config_from_hf(hf_model.config, sipe_kwargs)
    base = hf_model if isinstance(hf_model, base_cls) else getattr(hf_model, conv.base_attr)
    weights = {f"backbone.{k}": v for k, v in conv.backbone_weights(base, config.n_layers).items()}
    if head == "mlm":
        if not isinstance(hf_model, masked_cls):
            raise ValueError(f"head='mlm' needs a {masked_cls.__name__} (the source has no MLM head)")
        model = conv.masked_lm(config)
        weights.update(conv.mlm_head_weights(hf_model, config))
    elif head == "classification":
        model = conv.classification(config)
        if isinstance(hf_model, classifier_cls):
            weights.update(conv.classifier_weights(hf_model))
        else:
            fresh = model.state_dict()
            weights.update({k: fresh[k] for k in fresh if k.startswith(conv.fresh_head)})
    else:
        raise ValueError(f"head must be 'mlm' or 'classification', got {head!r}")
    load_converted(model, weights, type(hf_model).__name__)
    return model


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
