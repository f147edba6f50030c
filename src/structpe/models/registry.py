"""The family registry: a config's family -> its class, building, loading and counting models.

``build_model(config, head=...)`` and ``load(path)`` (any family's ``save_pretrained`` folder) are
exported by ``structpe.models``; ``from_hf_pretrained(directory, **sipe_kwargs)`` turns a Hugging
Face RoBERTa / DeBERTa-v3 / ModernBERT checkpoint folder into ours; ``sipe_parameter_count`` is
what ``structpe pretrain --list`` prints. Family modules are imported on first use
(:data:`FAMILY_CLASSES`), so importing ``structpe.models`` stays cheap.
"""

from __future__ import annotations

from pathlib import Path

from structpe.errors import StructpeError
from structpe.io import read_json
from structpe.models.config import FAMILIES, SiPEConfig

# transformers model_type -> our encoder family
_HF_MODEL_TYPES = {"roberta": "roberta", "deberta-v2": "deberta", "modernbert": "modernbert"}
HEADS = ("lm", "mlm", "classification")


# family -> (its language-model class, its sequence-classification class): the one map from a
# config's family to code (``hf_auto`` registers from it too). Each family module imports torch and
# transformers' model code (seconds), so it is imported when its family is first asked for, by an
# ordinary import lint-imports sees; importing one family never imports another (GPT-2's module loads
# transformers' Auto classes, whose registration hook asks for the other families).


def _txl() -> tuple[type, type]:
    from structpe.models import txl

    return txl.TransfoXLSiPEForCausalLM, txl.TransfoXLSiPEForSequenceClassification


def _roberta() -> tuple[type, type]:
    from structpe.models import roberta

    return roberta.RobertaSiPEForMaskedLM, roberta.RobertaSiPEForSequenceClassification


def _deberta() -> tuple[type, type]:
    from structpe.models import deberta

    return deberta.DebertaSiPEForMaskedLM, deberta.DebertaSiPEForSequenceClassification


def _modernbert() -> tuple[type, type]:
    from structpe.models import modernbert

    return modernbert.ModernBertSiPEForMaskedLM, modernbert.ModernBertSiPEForSequenceClassification


def _gpt2() -> tuple[type, type]:
    from structpe.models import gpt2

    return gpt2.GPT2SiPEForCausalLM, gpt2.GPT2SiPEForSequenceClassification


FAMILY_CLASSES = {
    "txl": _txl, "roberta": _roberta, "deberta": _deberta, "modernbert": _modernbert, "gpt2": _gpt2,
}


def model_class(family: str, head: str = "lm"):
    """The class for ``family``; ``head`` is ``lm``/``mlm`` (the family's LM) or ``classification``."""
    if family not in FAMILIES:
        raise StructpeError(f"unknown model family {family!r}; expected one of {FAMILIES}")
    if head not in HEADS:
        raise StructpeError(f"unknown head {head!r}; expected one of {HEADS}")
    lm, classifier = FAMILY_CLASSES[family]()
    return classifier if head == "classification" else lm


def build_model(config: SiPEConfig, head: str = "lm"):
    """A freshly initialised model of ``config.family`` (``head="classification"``: GLUE head)."""
    return model_class(config.family, head)(config)


def from_hf_pretrained(path: str | Path, head: str = "mlm", **sipe_kwargs):
    """Load a Hugging Face checkpoint folder (RoBERTa, DeBERTa-v2/v3, ModernBERT) into our encoder.

    ``sipe_kwargs`` pick the SiPE variant (``injection="input"`` ...); SiPE parameters start fresh
    (W_E / W_delta near zero, so the converted model starts as the pretrained one).
    """
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a Hugging Face checkpoint folder (no config.json)")
    hf_config = AutoConfig.from_pretrained(path)
    family = _HF_MODEL_TYPES.get(hf_config.model_type)
    if family is None:
        known = sorted(_HF_MODEL_TYPES)
        raise ValueError(f"{path}: model_type {hf_config.model_type!r} is not one of {known}")
    archs = hf_config.architectures or []
    if head == "mlm" or any("MaskedLM" in a for a in archs):
        hf_model = AutoModelForMaskedLM.from_pretrained(path)
    elif any("SequenceClassification" in a for a in archs):
        hf_model = AutoModelForSequenceClassification.from_pretrained(path)
    else:
        hf_model = AutoModel.from_pretrained(path)
    from structpe.models import deberta, modernbert, roberta

    convert = {"roberta": roberta.from_hf, "deberta": deberta.from_hf, "modernbert": modernbert.from_hf}
    return convert[family](hf_model, head=head, **sipe_kwargs)


def load(path: str | Path, **kwargs):
    """Load a ``save_pretrained`` folder of any family (config.json decides the class)."""
    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{path} is not a saved structpe model folder (no config.json)")
    saved = read_json(cfg_file)
    family = saved.get("family") if isinstance(saved, dict) else None
    if family not in FAMILIES:
        raise StructpeError(
            f"{cfg_file}: 'family' is {family!r}, not one of {FAMILIES}; was it saved by structpe?"
        )
    archs = saved.get("architectures") or []
    classifier = any("ForSequenceClassification" in a for a in archs)
    cls = model_class(family, "classification" if classifier else "lm")
    if archs and cls.__name__ not in archs:
        raise StructpeError(
            f"{cfg_file}: family {family!r} builds {cls.__name__}, but the weights were saved from {archs}"
        )
    from safetensors import SafetensorError

    from structpe.models.validate import check_weight_dtypes, check_weights

    if (path / "model.safetensors").is_file():
        check_weight_dtypes(path / "model.safetensors")
    # every weight must load: transformers would initialise missing ones at random with a warning
    want_info = kwargs.pop("output_loading_info", False)
    try:
        model, info = cls.from_pretrained(path, output_loading_info=True, **kwargs)
    except (OSError, RuntimeError, SafetensorError) as err:
        msg = " ".join(str(err).split())[:400]
        raise StructpeError(f"{path}: the weights do not load ({type(err).__name__}: {msg})") from err
    check_weights(model, path)  # every tensor was loaded: CheckedModel.from_pretrained refuses otherwise
    return (model, info) if want_info else model


def sipe_parameter_count(config: SiPEConfig) -> dict[str, int]:
    """Exact parameters a SiPE variant adds to its family's plain ``none`` model of the same size.

    ``prior``: the tag tables E_T, E_N (+ E_D): 7d (+ n_deprels x d) -- the whole cost of input
    injection by addition. ``heads``: the auxiliary tag heads, (d + 1) x 7. ``other``: everything
    else the variant adds (PP-SiPE's d x d W_E per layer or one shared, the W_K^tag / W_V^tag of the
    attention-bias sites, the concat / alpha fusion weights). Counted from the built modules (on
    the meta device: no memory, no init), so it cannot drift from the code.
    """
    import torch

    from structpe.modules.prior import HexatagPrior, TagHeads

    def built(cfg: SiPEConfig):
        with torch.device("meta"):
            return build_model(cfg)

    def n_params(module) -> int:
        return sum(p.numel() for p in module.parameters())

    plain = config.to_dict()
    plain.update(injection="none", n_deprels=0, prior_parts=None, fusion="add", entry_layer=1,
                 multitask_baseline=False)
    for key in ("model_type", "transformers_version", "architectures"):
        plain.pop(key, None)
    model = built(config)
    extra = n_params(model) - n_params(built(SiPEConfig(**plain)))
    prior = sum(n_params(m) for m in model.modules() if isinstance(m, HexatagPrior))
    heads = sum(n_params(m) for m in model.modules() if isinstance(m, TagHeads))
    return {"total": extra, "prior": prior, "heads": heads, "other": extra - prior - heads}


