"""SiPE as an adapter on a Hugging Face rotary causal LM (SiPE §3.5, eq. 14-16, applied to decoders).

ModernBERT's position-side SiPE is a rotary *phase offset*: a per-layer, per-token shift of the
RoPE angles of q and k by

    dtheta_{p,t}^(l) = (W_delta^(l) (E_T[tau_p] + E_N[nu_p]))_t

so the angle between positions m and j becomes (m - j) w_t + dtheta_{m,t} - dtheta_{j,t}. Every
rotary LM (Llama, Mistral, Qwen2, GPT-NeoX, ...) computes its RoPE once as ``(cos, sin)`` and hands
the pair to each attention module as the ``position_embeddings`` keyword, so the adapter needs no
copy of the model's code: a forward pre-hook on each attention module swaps in cos/sin of
theta + dtheta (angle addition on the <= 11 distinct dtheta values, ``modernbert.shifted_cos_sin``).

``injection="input"`` instead adds the prior to the token embeddings (SiPE eq. 2), through a
forward hook on the model's input embedding module.

Exactness at init: W_delta (position) and the tag tables (input) start at zero, so the adapted
model computes the base model's numbers *exactly* until trained (cos * 1 - sin * 0 = cos in
floating point). The tag tables of the position variant start random, as in structpe's own models,
so W_delta gets a gradient from the first step.

The dtheta are shared by all heads of a layer (``projection_target="head"`` in SiPE table 7):
Hugging Face's ``apply_rotary_pos_emb`` broadcasts one cos/sin over the heads, and a per-head
shift would need the attention code itself.

The causal tag head (``TagHeads`` on the final hidden state, targets ``causal_tag_targets``)
makes p(x, T) defined, so ``structpe eval ... --likelihood joint|marginal`` work as for ``txl``.

Supported: ``transformers`` 5.x model types in :data:`SUPPORTED_MODEL_TYPES` (tested with 5.24);
an attention module that stops receiving ``position_embeddings`` as a keyword fails loudly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from structpe.adapters.config import ADAPTER_MODEL_TYPE, SiPEAdapterConfig
from structpe.errors import StructpeError
from structpe.io import read_json_object
from structpe.models.modernbert import shifted_cos_sin
from structpe.models.outputs import SiPEOutput
from structpe.models.sipe_parts import check_tags
from structpe.models.validate import check_inputs
from structpe.modules.prior import HexatagPrior, TagHeads, add_causal_tag_loss
from structpe.modules.prior_projection import PriorProjection

ADAPTER_WEIGHTS = "sipe.safetensors"
LORA_FOLDER = "lora"
# transformers model_type -> attribute of each decoder layer that holds the attention module
# (the module that receives ``position_embeddings=(cos, sin)``)
SUPPORTED_MODEL_TYPES: dict[str, str] = {
    "llama": "self_attn",
    "mistral": "self_attn",
    "qwen2": "self_attn",
    "gpt_neox": "attention",
}


class UnsupportedModelError(StructpeError, TypeError):
    """The model is not a rotary causal LM the adapter knows how to hook."""


def _unwrap(model: nn.Module) -> nn.Module:
    """The transformers model under a PEFT wrapper (LoRA layers stay inside it)."""
    getter = getattr(model, "get_base_model", None)
    return getter() if callable(getter) else model


def _layers(base: nn.Module) -> nn.ModuleList:
    backbone = getattr(base, base.base_model_prefix)
    layers = getattr(backbone, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise UnsupportedModelError(
            f"{type(base).__name__}: no decoder layer list at {base.base_model_prefix}.layers"
        )
    return layers


def _check_supported(base: nn.Module) -> str:
    model_type = getattr(getattr(base, "config", None), "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise UnsupportedModelError(
            f"add_sipe: {type(base).__name__} (model_type {model_type!r}) is not supported; supported "
            f"rotary causal LMs: {', '.join(sorted(SUPPORTED_MODEL_TYPES))}"
        )
    if not callable(getattr(base, "get_output_embeddings", None)) or base.get_output_embeddings() is None:
        raise UnsupportedModelError(f"add_sipe: {type(base).__name__} has no LM head (use a *ForCausalLM)")
    return model_type


class SiPEAdapterForCausalLM(nn.Module):
    """A Hugging Face rotary causal LM + SiPE (tag tables, W_delta, causal tag head), structpe-style.

    ``model(input_ids, attention_mask=None, terminal_ids=None, nonterminal_ids=None, labels=None)``
    returns :class:`~structpe.models.outputs.SiPEOutput` (labels unshifted, as for ``txl``).
    Build one with :func:`add_sipe`; ``save_pretrained`` writes only the adapter (and LoRA) weights.
    """

    main_input_name = "input_ids"

    def __init__(self, base: nn.Module, config: SiPEAdapterConfig):
        super().__init__()
        self.base = base
        self.config = config
        self._pair_ids: torch.Tensor | None = None  # set per forward, read by the hooks
        self._table: torch.Tensor | None = None
        self.prior = self.delta = self.tag_heads = None
        if config.injection != "none":
            # position: E_T, E_N random (as in structpe's models) and W_delta = 0; input: E_T = E_N = 0
            std = 0.02 if config.injection == "position" else 0.0
            self.prior = HexatagPrior(config.d_model, init_std=std)
            self.tag_heads = TagHeads(config.d_model)
        if config.injection == "position":
            self.delta = PriorProjection(  # one d/2 angle vector per pair, shared by all heads; W_delta = 0
                config.d_model,
                n_heads=1,
                d_out=config.rotary_pairs,
                layers=[i for i in range(config.n_layers) if config.layer_gets_prior(i)],
                shared=config.projection == "shared",
                target="head",
                init_std=0.0,
            )
        self._hooks: list[Any] = []
        self.attach_hooks()

    # -- hooks -----------------------------------------------------------------------------------
    def attach_hooks(self) -> None:
        """Register the SiPE hooks on the base model's own modules (idempotent)."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        base = _unwrap(self.base)
        if self.config.injection == "position":
            attr = SUPPORTED_MODEL_TYPES[base.config.model_type]
            for i, layer in enumerate(_layers(base)):
                if self.delta.has_layer(i):
                    attn = getattr(layer, attr)
                    self._hooks.append(attn.register_forward_pre_hook(self._phase_hook(i), with_kwargs=True))
        elif self.config.injection == "input":
            self._hooks.append(base.get_input_embeddings().register_forward_hook(self._input_hook))

    def _phase_hook(self, layer: int) -> Callable:
        def hook(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
            if self._pair_ids is None:
                return None
            if "position_embeddings" not in kwargs:
                raise RuntimeError(
                    f"{type(module).__name__} was called without position_embeddings=(cos, sin); this "
                    "transformers version passes RoPE differently and the SiPE adapter cannot hook it"
                )
            cos, sin = kwargs["position_embeddings"]
            shift = self.delta(self._table, layer).float()  # [1, P, d/2]: dtheta per tag pair
            shift = torch.cat((shift, shift), dim=-1)  # HF cos/sin repeat the d/2 angles (split halves)
            c, s = shifted_cos_sin(cos.float(), sin.float(), shift, self._pair_ids)
            kwargs["position_embeddings"] = (c.squeeze(1).to(cos.dtype), s.squeeze(1).to(sin.dtype))
            return args, kwargs

        return hook

    def _input_hook(self, module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor | None:
        if self._pair_ids is None:
            return None
        return output + self._table[self._pair_ids].to(output.dtype)  # h_p = e(x_p) + m_p prior_p  (eq. 2)

    # -- the HF-ish surface the Trainer and the scorers use --------------------------------------
    def get_input_embeddings(self) -> nn.Module:
        return _unwrap(self.base).get_input_embeddings()

    def get_output_embeddings(self) -> nn.Module:
        return _unwrap(self.base).get_output_embeddings()

    def adapter_state_dict(self) -> dict[str, torch.Tensor]:
        """The SiPE parameters (tag tables, W_delta, tag heads): what ``sipe.safetensors`` holds."""
        return {k: v for k, v in self.state_dict().items() if not k.startswith("base.")}

    def forward(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
        terminal_ids: torch.LongTensor | None = None, nonterminal_ids: torch.LongTensor | None = None,
        labels: torch.LongTensor | None = None, output_hidden_states: bool = False,
        output_attentions: bool = False, deprel_ids: torch.LongTensor | None = None,
    ) -> SiPEOutput:
        """Causal LM; tags [B, L] with -100 where a position has none (absent: the base model's numbers).

        ``deprel_ids`` is in the calling convention every structpe model shares; the adapter has no
        DEPREL table, so giving them is an error (``models.validate.check_inputs``), as for a TXL
        without E_D.
        """
        check_inputs(self.config, input_ids, attention_mask, terminal_ids, nonterminal_ids, deprel_ids,
                     vocab_size=self.get_input_embeddings().num_embeddings)
        device = input_ids.device
        tagged = check_tags(terminal_ids, nonterminal_ids) and self.prior is not None
        if tagged:
            self._pair_ids = self.prior.pair_ids(terminal_ids.to(device), nonterminal_ids.to(device))
            self._table = self.prior.pair_table()
        else:
            self._pair_ids = self._table = None
        base = _unwrap(self.base)
        try:
            out = getattr(base, base.base_model_prefix)(
                input_ids=input_ids,
                attention_mask=attention_mask,
                use_cache=False,
                output_hidden_states=output_hidden_states,
                output_attentions=output_attentions,
            )
        finally:
            # gradient checkpointing re-runs the layers in backward: the hooks must see the same tags
            # then; otherwise clear them, so calling the base model directly gives its own numbers
            if not any(getattr(m, "gradient_checkpointing", False) for m in base.modules()):
                self._pair_ids = self._table = None
        h = out.last_hidden_state
        logits = base.get_output_embeddings()(h)
        terminal_logits = nonterminal_logits = None
        if self.tag_heads is not None:
            terminal_logits, nonterminal_logits = self.tag_heads(h)
        lm_loss = terminal_loss = nonterminal_loss = loss = None
        if labels is not None:
            # the base model's own causal LM loss (shifts the labels, upcasts, ignores -100)
            lm_loss = base.loss_function(logits=logits, labels=labels, vocab_size=base.config.vocab_size)
            loss = lm_loss
        if tagged:
            loss, terminal_loss, nonterminal_loss = add_causal_tag_loss(
                loss, terminal_logits, nonterminal_logits, terminal_ids, nonterminal_ids,
                self.config.tag_loss_weight,
            )
        return SiPEOutput(
            loss=loss,
            logits=logits,
            terminal_logits=terminal_logits,
            nonterminal_logits=nonterminal_logits,
            lm_loss=lm_loss,
            terminal_loss=terminal_loss,
            nonterminal_loss=nonterminal_loss,
            hidden_states=getattr(out, "hidden_states", None),
            attentions=getattr(out, "attentions", None),
        )

    # -- save / load -----------------------------------------------------------------------------
    def save_pretrained(self, output_dir: str | Path, is_main_process: bool = True, **_: Any) -> None:
        """Write the adapter folder: config.json, sipe.safetensors and, with LoRA, lora/ (PEFT's format).

        Full fine-tuning of the base (no LoRA, base trainable) also writes the base to ``base/``.
        Other keyword arguments of ``PreTrainedModel.save_pretrained`` (the Trainer's) are ignored:
        the weights written are always this module's own.
        """
        if not is_main_process:
            return
        from safetensors.torch import save_file

        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        config = SiPEAdapterConfig.from_dict(self.config.to_dict())
        if self.config.lora is not None:
            self.base.save_pretrained(
                out / LORA_FOLDER
            )  # PeftModel: adapter_config.json + adapter_model.safetensors
        elif any(p.requires_grad for p in self.base.parameters()):
            self.base.save_pretrained(out / "base")
            config.base_model = "base"
        tensors = {k: v.detach().contiguous().cpu() for k, v in self.adapter_state_dict().items()}
        tmp = out / (ADAPTER_WEIGHTS + ".tmp")
        save_file(tensors, str(tmp), metadata={"format": "pt"})
        tmp.replace(out / ADAPTER_WEIGHTS)
        config.save_pretrained(out)


def add_sipe(
    model: nn.Module,
    injection: str = "position",
    *,
    entry_layer: int = 1,
    projection: str = "per_layer",
    tag_loss_weight: float = 1.0,
    base_model: str | Path | None = None,
) -> SiPEAdapterForCausalLM:
    """Wrap a Hugging Face rotary causal LM (Llama, Mistral, Qwen2, GPT-NeoX) as a SiPE model.

    The returned module computes exactly the base model's logits until W_delta (position) or the
    tag tables (input) move away from zero. ``base_model`` is recorded in the saved adapter's
    config (default: the base's ``name_or_path``).
    """
    base = _unwrap(model)
    model_type = _check_supported(base)
    cfg = base.config
    rotary = getattr(getattr(base, base.base_model_prefix), "rotary_emb", None)
    inv_freq = getattr(rotary, "inv_freq", None)
    if not isinstance(inv_freq, torch.Tensor):
        raise UnsupportedModelError(
            f"add_sipe: {type(base).__name__} has no rotary_emb.inv_freq to size W_delta"
        )
    config = SiPEAdapterConfig(
        base_model=str(base_model) if base_model is not None else getattr(cfg, "name_or_path", None),
        base_model_type=model_type,
        injection=injection,
        entry_layer=entry_layer,
        projection=projection,
        tag_loss_weight=tag_loss_weight,
        d_model=cfg.hidden_size,
        n_layers=len(_layers(base)),
        rotary_pairs=int(inv_freq.numel()),
    )
    adapted = SiPEAdapterForCausalLM(model, config)
    return adapted.to(device=next(base.parameters()).device)


def apply_lora(adapted: SiPEAdapterForCausalLM, lora: dict[str, Any]) -> SiPEAdapterForCausalLM:
    """LoRA on the base weights (PEFT; the base is frozen), SiPE parameters fully trainable.

    ``lora``: keyword arguments of ``peft.LoraConfig`` (``r``, ``lora_alpha``, ``lora_dropout``,
    ``target_modules`` -- default: every linear layer of the blocks, ``"all-linear"``).
    """
    from peft import LoraConfig, get_peft_model

    if adapted.config.lora is not None:
        raise ValueError("this adapter already has LoRA")
    settings = {"target_modules": "all-linear", **lora}
    adapted.base = get_peft_model(adapted.base, LoraConfig(task_type="CAUSAL_LM", **settings))
    adapted.config.lora = {k: v for k, v in settings.items()}
    adapted.attach_hooks()
    return adapted


def load_adapted(
    path: str | Path, base_model: str | Path | None = None, **base_kwargs: Any
) -> SiPEAdapterForCausalLM:
    """Load an adapter folder onto its base model (``config.base_model``, or ``base_model``)."""
    from transformers import AutoModelForCausalLM

    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file() or read_json_object(cfg_file).get("model_type") != ADAPTER_MODEL_TYPE:
        raise FileNotFoundError(
            f"{path} is not a SiPE adapter folder (config.json with model_type {ADAPTER_MODEL_TYPE!r})"
        )
    config = SiPEAdapterConfig.from_pretrained(path)
    ref = Path(base_model if base_model is not None else (config.base_model or ""))
    if not ref.is_absolute():
        ref = path / ref
    if not (ref / "config.json").is_file():
        raise FileNotFoundError(
            f"{path}: base model {str(ref)!r} (config.base_model) not found; pass base_model=<folder>"
        )
    base = AutoModelForCausalLM.from_pretrained(ref, **base_kwargs)
    if base.config.model_type != config.base_model_type:
        raise ValueError(
            f"{path} was trained on a {config.base_model_type!r} model; {ref} is {base.config.model_type!r}"
        )
    lora = config.lora
    config.lora = None
    adapted = SiPEAdapterForCausalLM(base, config)
    if lora is not None:
        from peft import PeftModel

        adapted.base = PeftModel.from_pretrained(base, path / LORA_FOLDER)
        adapted.config.lora = lora
        adapted.attach_hooks()
    load_adapter_weights(adapted, path, lora=False)
    return adapted.to(base.device)


def load_adapter_weights(adapted: SiPEAdapterForCausalLM, path: str | Path, lora: bool = True) -> None:
    """Load a saved adapter folder's trained weights into ``adapted`` (same architecture, in place).

    ``sipe.safetensors`` always; with ``lora`` also the LoRA weights of ``lora/``, and a full base
    of ``base/`` when the folder has one (what the Trainer's resume needs).
    """
    from safetensors.torch import load_file

    path = Path(path)
    weights = load_file(str(path / ADAPTER_WEIGHTS))
    missing, unexpected = adapted.load_state_dict(weights, strict=False)
    missing = [k for k in missing if not k.startswith("base.")]
    if missing or unexpected:
        raise ValueError(f"{path / ADAPTER_WEIGHTS}: missing {missing}, unexpected {unexpected}")
    if lora and adapted.config.lora is not None:
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(
            adapted.base, load_file(str(path / LORA_FOLDER / "adapter_model.safetensors"))
        )
    elif lora and (path / "base" / "model.safetensors").is_file():
        _unwrap(adapted.base).load_state_dict(
            load_file(str(path / "base" / "model.safetensors")), strict=False
        )
