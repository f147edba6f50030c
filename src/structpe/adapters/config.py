"""The adapter's config: which SiPE injection and projection a Hugging Face rotary LM gets, saved
beside the adapter weights (``structpe.adapters.sipe``)."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedConfig

ADAPTER_MODEL_TYPE = "structpe-sipe-adapter"
INJECTIONS = ("position", "input", "none")
PROJECTIONS = ("per_layer", "shared")


class SiPEAdapterConfig(PreTrainedConfig):
    """Settings of a SiPE adapter and the base model it sits on.

    base_model        path of the base model folder (``save_pretrained``); relative paths are
                      relative to the adapter folder
    base_model_type   the base's ``model_type`` (checked when loading)
    injection         ``position`` (rotary phase offset), ``input`` (prior added to the token
                      embeddings) or ``none`` (no tags: a plain LoRA baseline on the same path)
    entry_layer       k (1-based): layers < k get no phase offset (position only)
    projection        W_delta one per layer (``per_layer``) or ``shared``
    tag_loss_weight   loss = LM + tag_loss_weight (CE_T + CE_N)
    d_model, n_layers, rotary_pairs   read from the base (hidden size, layers, RoPE frequencies)
    lora              the PEFT LoRA settings applied to the base, or None (base frozen or full)
    """

    model_type = ADAPTER_MODEL_TYPE
    family = "hf"  # structpe's model families: a Hugging Face causal LM (scoring treats it as causal)

    def __init__(
        self,
        base_model: str | None = None,
        base_model_type: str | None = None,
        injection: str = "position",
        entry_layer: int = 1,
        projection: str = "per_layer",
        tag_loss_weight: float = 1.0,
        d_model: int = 0,
        n_layers: int = 0,
        rotary_pairs: int = 0,
        lora: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        self.base_model = base_model
        self.base_model_type = base_model_type
        self.injection = injection
        self.entry_layer = entry_layer
        self.projection = projection
        self.tag_loss_weight = tag_loss_weight
        self.d_model = d_model
        self.n_layers = n_layers
        self.rotary_pairs = rotary_pairs
        self.lora = lora
        super().__init__(**kwargs)
        if injection not in INJECTIONS:
            raise ValueError(f"adapter injection must be one of {INJECTIONS}, got {injection!r}")
        if projection not in PROJECTIONS:
            raise ValueError(f"adapter projection must be one of {PROJECTIONS}, got {projection!r}")
        if n_layers and not 1 <= entry_layer <= n_layers:
            raise ValueError(f"entry_layer must be in 1..{n_layers}, got {entry_layer}")
        if tag_loss_weight < 0:
            raise ValueError(f"tag_loss_weight must be >= 0, got {tag_loss_weight}")

    def layer_gets_prior(self, layer_index: int) -> bool:
        return layer_index + 1 >= self.entry_layer
