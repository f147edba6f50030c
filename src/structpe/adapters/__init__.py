"""SiPE adapters for existing Hugging Face causal LMs (rotary phase offset or input prior; docs/adapters.md).

from structpe.adapters import add_sipe, load_adapted
model = add_sipe(AutoModelForCausalLM.from_pretrained(path), injection="position")
out = model(input_ids, terminal_ids=t, nonterminal_ids=n, labels=input_ids)
"""

from structpe.adapters.sipe import (
    ADAPTER_MODEL_TYPE,
    SUPPORTED_MODEL_TYPES,
    SiPEAdapterConfig,
    SiPEAdapterForCausalLM,
    UnsupportedModelError,
    add_sipe,
    apply_lora,
    load_adapted,
)

__all__ = [
    "ADAPTER_MODEL_TYPE",
    "SUPPORTED_MODEL_TYPES",
    "SiPEAdapterConfig",
    "SiPEAdapterForCausalLM",
    "UnsupportedModelError",
    "add_sipe",
    "apply_lora",
    "load_adapted",
]
