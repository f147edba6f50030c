"""Init rules carried by leaf modules, applied by whichever model owns them.

transformers' ``post_init`` re-initialises every leaf module that owns parameters; a SiPE
parameter that must start somewhere particular (near zero, the identity) says so with
``set_init`` and the owning model's ``_init_weights`` calls ``apply_init_rule``. Modules that
are built outside a ``PreTrainedModel`` (the HF adapter) apply the rule at construction.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import initialization as init

INIT_RULES = ("normal", "trunc_normal", "identity_concat")


def set_init(module: nn.Linear | nn.Embedding, rule: str, std: float) -> None:
    """Tag a leaf module with its init rule; ``apply_init_rule`` applies it (transformers only
    visits modules that own parameters, so the rule has to sit on the leaf itself).

    rules: ``normal`` N(0, std); ``trunc_normal`` N(0, std) cut at +-2 std; ``identity_concat``
    W = [I | N(0, std)] (the concat fusion starts as the identity on x).
    """
    if rule not in INIT_RULES:
        raise ValueError(f"unknown init rule {rule!r}")
    module._sipe_init = (rule, std)


def apply_init_rule(module: nn.Module) -> None:
    """Initialise ``module`` by its ``set_init`` rule (nothing without one); a bias is zeroed."""
    rule = getattr(module, "_sipe_init", None)
    if rule is None:
        return
    kind, std = rule
    if kind == "normal":
        init.normal_(module.weight, mean=0.0, std=std)
    elif kind == "trunc_normal":
        init.trunc_normal_(module.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
    else:
        d = module.weight.shape[0]
        weight = torch.randn(module.weight.shape) * std
        weight[:, :d] = torch.eye(d)
        init.copy_(module.weight, weight)
    if getattr(module, "bias", None) is not None:
        init.zeros_(module.bias)


def gpt2_init(module: nn.Module, std: float = 0.02) -> None:
    """GPT-2's init for models built outside transformers (``model.apply(gpt2_init)``: the
    LISformer, the hexatagger): Linear and Embedding weights N(0, std), biases and an embedding's
    padding row zero. (transformers' ``_init_weights`` does this for its own models.)"""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=std)
        if module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
