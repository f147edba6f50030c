"""SiPE model families behind one config and one calling convention (DESIGN §3, §6).

    model = build_model(SiPEConfig(family="txl", injection="position", vocab_size=..., ...))
    out = model(input_ids, attention_mask=None, terminal_ids=None, nonterminal_ids=None, labels=None)
    out.loss, out.logits, out.terminal_logits, out.nonterminal_logits, out.lm_loss, ...

One file per family: ``txl.py`` (Transformer-XL-style decoder), ``roberta.py``, ``deberta.py``,
``modernbert.py`` (encoders). ``load(path)`` reads a ``save_pretrained`` folder of any family.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from structpe.models.config import FAMILIES, INJECTIONS, SiPEConfig
from structpe.models.outputs import SiPEOutput

# family -> (module, class); imported lazily so ``import structpe.models`` stays cheap
_FAMILY_CLASSES = {
    "txl": ("structpe.models.txl", "TransfoXLSiPEModel"),
    "roberta": ("structpe.models.roberta", "RobertaSiPEForMaskedLM"),
    "deberta": ("structpe.models.deberta", "DebertaSiPEForMaskedLM"),
    "modernbert": ("structpe.models.modernbert", "ModernBertSiPEForMaskedLM"),
}


def model_class(family: str):
    if family not in _FAMILY_CLASSES:
        raise ValueError(f"unknown model family {family!r}; expected one of {FAMILIES}")
    module, name = _FAMILY_CLASSES[family]
    return getattr(importlib.import_module(module), name)


def build_model(config: SiPEConfig):
    """A freshly initialised model of ``config.family``."""
    return model_class(config.family)(config)


def load(path: str | Path, **kwargs):
    """Load a ``save_pretrained`` folder of any family (config.json decides the class)."""
    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{path} is not a saved structpe model folder (no config.json)")
    family = json.loads(cfg_file.read_text()).get("family")
    if family is None:
        raise ValueError(f"{cfg_file} has no 'family' field; was it saved by structpe?")
    return model_class(family).from_pretrained(path, **kwargs)


__all__ = ["FAMILIES", "INJECTIONS", "SiPEConfig", "SiPEOutput", "build_model", "load", "model_class"]
