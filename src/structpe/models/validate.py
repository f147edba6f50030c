"""Checks at the model's edge, shared by every family (TXL, RoBERTa, DeBERTa, ModernBERT).

A wrong input to ``forward`` (an attention mask of another shape, float ids, 1-D ids, tags without
their partner, DEPREL ids for a model without a DEPREL table) would otherwise end in a low-level
indexing or broadcasting error deep in a layer, or be silently ignored. Each check raises one
``ValueError`` naming the argument, the expected shape and what was given. Loading checks the
weights: a checkpoint whose floating weights hold NaN/inf, or whose tensors are not floating point
(torch would cast an int32 table to float without a word), is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from structpe.errors import StructpeError
from structpe.modules.token_ids import check_token_ids


def _describe(t: torch.Tensor) -> str:
    return f"{list(t.shape)} {str(t.dtype).removeprefix('torch.')}"


def _check_ids(name: str, t: Any, shape: tuple[int, int], what: str = "integer ids") -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor of {what} [batch, length], got {type(t).__name__}")
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise ValueError(f"{name}: expected {what} (torch.long) of shape {list(shape)}, got {_describe(t)}")
    if tuple(t.shape) != shape:
        raise ValueError(f"{name}: expected shape {list(shape)} (must match input_ids), got {_describe(t)}")


def check_inputs(
    config: Any,
    input_ids: Any,
    attention_mask: Any = None,
    terminal_ids: Any = None,
    nonterminal_ids: Any = None,
    deprel_ids: Any = None,
    token_type_ids: Any = None,
    past_length: int = 0,
    vocab_size: int | None = None,
) -> None:
    """ValueError unless the inputs fit ``input_ids`` [batch, length] and the model ``config``.

    ``input_ids`` must be non-empty and inside the vocabulary (:func:`check_token_ids`):
    ``config.vocab_size``, or ``vocab_size`` for a model whose config names none (the adapter's).
    ``attention_mask`` is [batch, length], or [batch, past_length + length] with a cache (decoders).
    The tags come as a pair; ``deprel_ids`` only for a model built with a DEPREL table
    (``config.n_deprels > 0``): given to another model it would be ignored.
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        got = _describe(input_ids) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(f"input_ids: expected a 2-D tensor of token ids [batch, length], got {got}")
    shape = (int(input_ids.shape[0]), int(input_ids.shape[1]))
    _check_ids("input_ids", input_ids, shape, "token ids")
    check_token_ids(input_ids, vocab_size or config.vocab_size)
    if attention_mask is not None:
        if not isinstance(attention_mask, torch.Tensor):
            raise ValueError(f"attention_mask: expected a torch.Tensor, got {type(attention_mask).__name__}")
        allowed = {shape, (shape[0], past_length + shape[1])}
        if tuple(attention_mask.shape) not in allowed:
            want = " or ".join(str(list(s)) for s in sorted(allowed))
            raise ValueError(
                f"attention_mask: expected shape {want} (1 keep, 0 pad), got {_describe(attention_mask)}"
            )
    if (terminal_ids is None) != (nonterminal_ids is None):
        given = "terminal_ids" if terminal_ids is not None else "nonterminal_ids"
        raise ValueError(
            f"{given} given alone: give both terminal_ids and nonterminal_ids together (a hexatag pair)"
        )
    for name, t in (
        ("terminal_ids", terminal_ids),
        ("nonterminal_ids", nonterminal_ids),
        ("deprel_ids", deprel_ids),
        ("token_type_ids", token_type_ids),
    ):
        if t is not None:
            _check_ids(name, t, shape)
    if deprel_ids is not None and not getattr(config, "n_deprels", 0):
        raise ValueError(
            "deprel_ids: this model has no DEPREL table (n_deprels=0), so the labels would be ignored; "
            "leave them out or use a *_DR recipe"
        )


def check_loading_info(model: Any, info: dict[str, Any], where: str | Path) -> None:
    """StructpeError naming ``where`` unless ``from_pretrained`` loaded every tensor of ``model``
    from the checkpoint and used every tensor of the checkpoint (transformers only prints a load
    report and initialises missing weights at random: a foreign or damaged checkpoint would give
    results of a half-random model).

    Exceptions, the intended uses of a new head: a language model loaded as a sequence classifier
    (or back: ``config.architectures`` names the other class) may lack the new head's tensors and
    hold the old head's, and a head of another size may be replaced (``ignore_mismatched_sizes``),
    as long as the body (``base_model_prefix``) is whole.
    """
    problems = {k: sorted(info.get(k) or []) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    archs = getattr(model.config, "architectures", None) or []
    prefix = f"{model.base_model_prefix}."
    body_prefixed = any(name.startswith(prefix) for name, _ in model.named_parameters())
    name = type(model).__name__
    if archs and name not in archs and any("ForSequenceClassification" in a for a in (name, *archs)):
        problems["unexpected_keys"] = [k for k in problems["unexpected_keys"] if k.startswith(prefix)]
        if body_prefixed:
            problems["missing_keys"] = [k for k in problems["missing_keys"] if k.startswith(prefix)]
    # a head of another size (2 labels saved, 1 wanted): only with ``ignore_mismatched_sizes``, which
    # asks for a fresh head; a mismatched body is refused
    problems["mismatched_keys"] = [k for k in problems["mismatched_keys"]
                                   if (k[0] if isinstance(k, tuple) else k).startswith(prefix)]
    problems = {k: v for k, v in problems.items() if v}
    if problems:
        detail = "; ".join(f"{len(v)} {k.replace('_', ' ')} {v[:3]}" for k, v in problems.items())
        raise StructpeError(
            f"{where}: the checkpoint does not match the model its config.json builds ({detail}); "
            "a damaged checkpoint or one of another model family"
        )


def check_model_fits(config: Any, where: str = "model config") -> None:
    """StructpeError, before anything is allocated, when the weights ``config`` describes cannot fit
    in the memory available now (a config with absurd sizes would otherwise hang in allocation or
    be killed). The estimate is a lower bound -- the embedding, attention and feed-forward matrices
    in float32 -- so a model that fits is never refused."""
    import psutil

    d, layers = int(config.d_model), int(config.n_layers)
    params = int(config.vocab_size) * d + layers * (4 * d * d + 2 * d * int(config.d_ff))
    need, free = 4 * params, psutil.virtual_memory().available
    if need > free:
        raise StructpeError(
            f"{where}: vocab_size={config.vocab_size}, d_model={d}, n_layers={layers}, "
            f"d_ff={config.d_ff} need at least {params:,} parameters ({need / 2**30:,.1f} GiB in float32), "
            f"more than the {free / 2**30:,.1f} GiB of memory available; check the sizes"
        )


_HUB = ("cache_dir", "force_download", "local_files_only", "token", "revision", "subfolder")


class CheckedModel:
    """The first base of every structpe model class: its size is checked before any weight is
    allocated (:func:`check_model_fits`; skipped on the meta device, which allocates nothing), and
    ``from_pretrained`` loads every tensor or refuses (:func:`check_loading_info`), so the Auto
    classes (``AutoModelForCausalLM``, ...) load structpe folders as strictly as
    ``structpe.models.load``."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        if torch.get_default_device().type != "meta":
            check_model_fits(config)
        super().__init__(config, *args, **kwargs)

    @classmethod
    def from_pretrained(cls, path: Any, *args: Any, **kwargs: Any) -> Any:
        want_info = kwargs.pop("output_loading_info", False)
        config = kwargs.get("config")
        if not isinstance(config, cls.config_class):  # transformers builds on the meta device: check here
            config = cls.config_class.from_pretrained(path, **{k: v for k, v in kwargs.items() if k in _HUB})
        check_model_fits(config, f"{path}/config.json")
        model, info = load_strictly(super().from_pretrained, path, *args, **kwargs)  # type: ignore[misc]
        return (model, info) if want_info else model


def load_strictly(from_pretrained: Any, path: Any, *args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """``from_pretrained(path, ...)`` (any transformers class), refused unless every tensor matches
    (:func:`check_loading_info`). Transformers' own load report (a multi-line table on stderr) is
    silenced: the refusal names the keys in one line."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        model, info = from_pretrained(path, *args, output_loading_info=True, **kwargs)
    finally:
        hf_logging.set_verbosity(level)
    check_loading_info(model, info, path)
    return model, info


def position_limit(model: Any) -> int | None:
    """The most tokens one sequence may have: the config's ``max_position_embeddings`` (GPT-2's
    ``n_positions``), or None when it names none. Transformer-XL's relative positions would go on
    past it, but the model never saw such distances, and its attention grows with the square."""
    cfg = getattr(model, "config", None)
    for key in ("max_position_embeddings", "n_positions"):
        value = getattr(cfg, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def check_weights(model: torch.nn.Module, where: str | Path) -> None:
    """StructpeError naming ``where`` when a floating parameter or buffer holds NaN or inf."""
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        if t.dtype.is_floating_point and not bool(torch.isfinite(t).all()):
            raise StructpeError(
                f"{where}: weight {name} holds NaN or infinite values; the checkpoint is broken"
            )


def check_weight_dtypes(weights: str | Path) -> None:
    """StructpeError when a tensor of the safetensors file ``weights`` is not floating point: every
    weight of a structpe model is a float (torch would cast an integer table silently on load)."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(weights), "pt") as fh:
            dtypes = {key: fh.get_slice(key).get_dtype() for key in fh.keys()}  # noqa: SIM118
    except (OSError, SafetensorError) as err:
        raise StructpeError(f"{weights}: unreadable weights ({' '.join(str(err).split())})") from None
    for key, dtype in dtypes.items():
        if not dtype.startswith(("F", "BF")):
            raise StructpeError(
                f"{weights}: tensor {key} is {dtype}, not floating point; not a structpe checkpoint"
            )
