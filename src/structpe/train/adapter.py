"""``structpe pretrain`` on an adapted Hugging Face model: the ``adapter:`` section of a recipe.

A recipe with an ``adapter:`` section trains a Hugging Face causal LM (a ``save_pretrained`` folder
named by ``base_model``, or a fresh one from ``base_init``) with the SiPE adapter of
:mod:`structpe.adapters.sipe`, on the same data, Trainer, logging and run folder as every structpe
recipe. How the base weights train is ``base_training``:

  lora    PEFT LoRA on the base (frozen base, low-rank updates); the SiPE parameters train fully.
          The run's ``final/`` holds ``config.json`` (naming the base folder), ``sipe.safetensors``
          and ``lora/`` (PEFT's adapter format) -- megabytes, not the base.
  frozen  only the SiPE parameters train.
  full    every base weight trains (pre-training from scratch with ``base_init``); ``final/base/``
          then holds the whole model.

Distributed training is the Trainer's: ``torchrun`` / ``accelerate launch`` with an Accelerate
config (FSDP: docs/adapters.md). The adapter's hooks live on the attention modules, which FSDP
wraps but does not replace.
"""

from __future__ import annotations

import dataclasses
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structpe.adapters.config import INJECTIONS, PROJECTIONS
from structpe.adapters.sipe import SiPEAdapterForCausalLM, add_sipe, apply_lora, load_adapter_weights
from structpe.errors import RecipeError
from structpe.train.trainer import SiPETrainer, VocabularyMismatchError

BASE_TRAINING = ("lora", "frozen", "full")


@dataclass
class AdapterSettings:
    """The ``adapter:`` section of a recipe.

    base_model          Hugging Face causal LM folder (model + config; Llama, Mistral, Qwen2, GPT-NeoX)
    base_init           instead of base_model: a fresh base from these ``AutoConfig.for_model``
                        arguments (``model_type: llama``, ``hidden_size`` ...); vocab_size and the
                        special-token ids come from the tokenizer
    injection           position (rotary phase offset) | input (prior on the embeddings) | none
    entry_layer, projection, tag_loss_weight   as in SiPEAdapterConfig
    base_training       lora | frozen | full (module docstring)
    lora_r, lora_alpha, lora_dropout, lora_target_modules   peft.LoraConfig (``all-linear``: every
                        linear layer of the blocks)
    """

    base_model: str | None = None
    base_init: dict[str, Any] | None = None
    injection: str = "position"
    entry_layer: int = 1
    projection: str = "per_layer"
    tag_loss_weight: float = 1.0
    base_training: str = "lora"
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_target_modules: Any = field(default="all-linear")

    def validate(self, where: str) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise RecipeError(f"{where}: {msg}")

        need(
            (self.base_model is None) != (self.base_init is None), "set exactly one of base_model, base_init"
        )
        need(self.base_init is None or isinstance(self.base_init, dict), "base_init must be a mapping")
        need(self.base_init is None or "model_type" in self.base_init, "base_init needs a model_type")
        need(self.injection in INJECTIONS, f"injection must be one of {INJECTIONS}, got {self.injection!r}")
        need(self.projection in PROJECTIONS, f"projection must be one of {PROJECTIONS}")
        need(self.base_training in BASE_TRAINING, f"base_training must be one of {BASE_TRAINING}")
        need(self.entry_layer >= 1, f"entry_layer must be >= 1, got {self.entry_layer}")
        need(self.lora_r >= 1, f"lora_r must be >= 1, got {self.lora_r}")
        need(self.tag_loss_weight >= 0, "tag_loss_weight must be >= 0")


def adapter_settings(raw: dict[str, Any], where: str) -> AdapterSettings:
    """Validate an ``adapter:`` mapping (unknown keys, types) into :class:`AdapterSettings`."""
    import difflib

    fields = {f.name: f for f in dataclasses.fields(AdapterSettings)}
    hints = typing.get_type_hints(AdapterSettings)
    kw = {}
    for key, value in raw.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=3)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise RecipeError(f"{where}: unknown adapter key {key!r}.{hint} Valid: {', '.join(fields)}")
        kind = hints[key]
        try:
            if kind is int:
                value = int(value)
            elif kind is float:
                value = float(value)
        except (TypeError, ValueError):
            raise RecipeError(f"{where}: adapter.{key}={value!r} is not a valid {kind.__name__}") from None
        kw[key] = value
    settings = AdapterSettings(**kw)
    settings.validate(where)
    return settings


def _base_model(settings: AdapterSettings, tokenizer: Any, where: str):
    from transformers import AutoConfig, AutoModelForCausalLM

    if settings.base_init is not None:
        kw = dict(settings.base_init)
        model_type = kw.pop("model_type")
        kw.update(
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        try:
            config = AutoConfig.for_model(model_type, **kw)
        except (ValueError, TypeError) as err:
            raise RecipeError(f"{where}: adapter.base_init: {err}") from None
        return AutoModelForCausalLM.from_config(config)
    path = Path(settings.base_model)
    if not (path / "config.json").is_file():
        raise RecipeError(f"{where}: adapter.base_model={str(path)!r} is not a model folder (no config.json)")
    return AutoModelForCausalLM.from_pretrained(path)


def build_adapted(recipe: Any, tokenizer: Any, seq_len: int) -> SiPEAdapterForCausalLM:
    """The recipe's base model with the SiPE adapter, LoRA / frozen / full as ``base_training`` says."""
    where = str(recipe.source)
    settings = adapter_settings(recipe.adapter, where)
    if recipe.train.objective == "mlm":
        raise RecipeError(
            f"{where}: adapter recipes train causal LMs; train.objective must be auto or causal"
        )
    base = _base_model(settings, tokenizer, where)
    if base.config.vocab_size != len(tokenizer):
        raise VocabularyMismatchError(
            f"{where}: the base model has vocab_size {base.config.vocab_size} but the tokenizer has "
            f"{len(tokenizer)} tokens; prepare the data with the base model's tokenizer"
        )
    max_pos = getattr(base.config, "max_position_embeddings", None)
    if max_pos is not None and seq_len > max_pos:
        raise RecipeError(f"{where}: train.seq_len={seq_len} > the base's max_position_embeddings={max_pos}")
    adapted = add_sipe(
        base,
        settings.injection,
        entry_layer=settings.entry_layer,
        projection=settings.projection,
        tag_loss_weight=settings.tag_loss_weight,
        base_model=settings.base_model and str(Path(settings.base_model).resolve()),
    )
    if settings.base_training == "lora":
        adapted = apply_lora(adapted, _lora(settings))
    elif settings.base_training == "frozen":
        adapted.base.requires_grad_(False)
    return adapted


def _lora(settings: AdapterSettings) -> dict[str, Any]:
    """PEFT's LoRA settings of a recipe (``apply_lora``)."""
    return {
        "r": settings.lora_r,
        "lora_alpha": settings.lora_alpha,
        "lora_dropout": settings.lora_dropout,
        "target_modules": settings.lora_target_modules,
    }


def adapter_parameter_count(
    raw: dict[str, Any], where: str, bases: dict[str, dict[str, Any]]
) -> dict[str, int] | None:
    """Exact parameters an adapter recipe adds to its base: ``prior`` (tag tables), ``heads`` (the
    causal tag head), ``other`` (W_delta and the LoRA matrices), ``total``. Counted from the built
    modules on the meta device (no memory, no init), so it cannot drift from the code. The base is
    sized by ``base_init``, its ``base_model`` folder, or ``bases`` (the ``base_init`` of the recipe
    whose run writes that folder); None when none of them is known."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from structpe.modules.prior import HexatagPrior, TagHeads

    settings = adapter_settings(raw, where)
    if settings.base_init is not None or settings.base_model in bases:
        kw = dict(settings.base_init if settings.base_init is not None else bases[settings.base_model])
        config = AutoConfig.for_model(kw.pop("model_type"), **kw)
    elif (Path(settings.base_model) / "config.json").is_file():
        config = AutoConfig.from_pretrained(settings.base_model)
    else:
        return None

    def n_params(module: Any) -> int:
        return sum(p.numel() for p in module.parameters())

    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # PEFT calls transformers' deprecated names
        base = AutoModelForCausalLM.from_config(config)
        plain = n_params(base)
        adapted = add_sipe(base, settings.injection, entry_layer=settings.entry_layer,
                           projection=settings.projection)
        if settings.base_training == "lora":
            adapted = apply_lora(adapted, _lora(settings))
    total = n_params(adapted) - plain
    prior = sum(n_params(m) for m in adapted.modules() if isinstance(m, HexatagPrior))
    heads = sum(n_params(m) for m in adapted.modules() if isinstance(m, TagHeads))
    return {"total": total, "prior": prior, "heads": heads, "other": total - prior - heads}


class AdapterTrainer(SiPETrainer):
    """``SiPETrainer`` that saves (and resumes) the adapter folder instead of the full state dict."""

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        out = Path(output_dir if output_dir is not None else self.args.output_dir)
        if not self.args.should_save:
            return
        self.accelerator.unwrap_model(self.model).save_pretrained(out)
        if self.processing_class is not None:
            self.processing_class.save_pretrained(out)
        (out / "training_args.json").write_text(self.args.to_json_string())

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        load_adapter_weights(self.accelerator.unwrap_model(self.model), resume_from_checkpoint)
