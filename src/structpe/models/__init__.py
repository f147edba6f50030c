"""SiPE model families behind one config and one calling convention (docs/design.md §3, §6).

    model = build_model(SiPEConfig(family="txl", injection="position", vocab_size=..., ...))
    out = model(input_ids, attention_mask=None, terminal_ids=None, nonterminal_ids=None, labels=None)
    out.loss, out.logits, out.terminal_logits, out.nonterminal_logits, out.lm_loss, ...

One file per family: ``txl.py`` (Transformer-XL-style decoder), ``roberta.py``, ``deberta.py``,
``modernbert.py`` (encoders). ``load(path)`` reads a ``save_pretrained`` folder of any family.
Encoders also have GLUE heads: ``build_model(config, head="classification")``;
``from_hf_pretrained(directory, **sipe_kwargs)`` turns a Hugging Face RoBERTa / DeBERTa-v3 /
ModernBERT checkpoint folder into ours.
"""

from structpe.models.config import SiPEConfig
from structpe.models.registry import build_model, load

# the stable interface of docs/design.md §6; everything else is imported from its own module
__all__ = ["SiPEConfig", "build_model", "load"]
