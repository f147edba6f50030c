"""SiPE adapters for existing Hugging Face causal LMs (rotary phase offset or input prior; docs/adapters.md).

    from structpe.adapters import add_sipe, load_adapted
    model = add_sipe(AutoModelForCausalLM.from_pretrained(path), injection="position")
    out = model(input_ids, terminal_ids=t, nonterminal_ids=n, labels=input_ids)

Training an adapter (LoRA + the SiPE parameters) is a pre-training recipe: ``structpe.train.adapter``.
"""

from structpe.exports import lazy_exports

_WHERE = {  # public name -> the module that defines it
    "add_sipe": "sipe",
    "load_adapted": "sipe",
    "apply_lora": "sipe",
    "load_adapter_weights": "sipe",
    "SiPEAdapterForCausalLM": "sipe",
    "UnsupportedModelError": "sipe",
    "SiPEAdapterConfig": "config",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
