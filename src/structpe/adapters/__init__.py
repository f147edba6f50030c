"""SiPE adapters for existing Hugging Face causal LMs (rotary phase offset or input prior; docs/adapters.md).

    from structpe.adapters import add_sipe, load_adapted
    model = add_sipe(AutoModelForCausalLM.from_pretrained(path), injection="position")
    out = model(input_ids, terminal_ids=t, nonterminal_ids=n, labels=input_ids)

Training an adapter (LoRA + the SiPE parameters) is a pre-training recipe: ``structpe.train.adapter``.
"""

from structpe.exports import lazy_exports

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "sipe": ("add_sipe", "load_adapted", "apply_lora", "load_adapter_weights", "SiPEAdapterForCausalLM",
        "UnsupportedModelError"), "config": ("SiPEAdapterConfig",),
})
