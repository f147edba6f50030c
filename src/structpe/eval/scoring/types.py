"""The types every scorer and likelihood mode share (docs/design.md §4, §6).

``structpe.eval.scoring.scorer`` (the scorers), ``structpe.eval.scoring.likelihood`` (the joint and
marginal modes) and ``structpe.eval.scoring.smc`` (the particle estimate) build on these, so none has
to import another's internals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from structpe.choices import CAUSAL_FAMILIES

LN2 = math.log(2.0)


class Parser(Protocol):
    """What the scorers need from ``structpe.parser.base.Parser`` (docs/design.md §6)."""

    def parse_text(self, texts: list[str], *args: Any, **kwargs: Any) -> list[Any]: ...


class CausalScoring(Protocol):
    """The fields of a causal scorer (``structpe.eval.scoring.scorer.CausalScorer``) that the joint and
    marginal likelihood modes read; typed here so that the modes never import the scorer."""

    model: Any
    batch_size: int
    append_eos: bool
    bos_id: int
    eos_id: int
    pad_id: int
    k: int
    particles: int
    seed: int
    smc_parts: str
    tagged: bool
    likelihood: str
    parser: Any

    def encode(self, texts: list[str], parses: list[Any] | None) -> list[Encoded]: ...

    def score_encoded(self, encoded: list[Encoded]) -> list[TokenScores]: ...


@dataclass
class TokenScores:
    """Per-token scores of one text.

    ``logprobs[i]`` is the natural-log probability of token i (``token_ids[i]``, characters
    ``offsets[i]`` of ``text``); BOS/CLS/SEP are not listed. ``eos_logprob`` is set when the
    scorer appended an EOS (its probability belongs to the end of the text). ``close_logprob`` is
    the ``marginal`` mode's tree closing at the end of the text (the sentence bound minus the open
    prefix bound of the whole text, docs/likelihoods.md): part of ``total``, of no token or region.
    """

    text: str
    token_ids: list[int]
    offsets: list[tuple[int, int]]
    logprobs: list[float]
    eos_logprob: float | None = None
    likelihood: str = "conditional"
    tagged: bool = False
    unaligned_words: int = 0
    meta: dict = field(default_factory=dict)
    close_logprob: float = 0.0

    @property
    def total(self) -> float:
        """Summed log-probability of the text (and the EOS, if one was scored, and the closing)."""
        return float(sum(self.logprobs)) + (self.eos_logprob or 0.0) + self.close_logprob

    def surprisals_bits(self) -> list[float]:
        return [-lp / LN2 for lp in self.logprobs]


def is_structpe_model(model: Any) -> bool:
    """Our models follow docs/design.md §6 (tags as keyword arguments); HF models do not take tags."""
    cfg = getattr(model, "config", None)
    return (
        getattr(cfg, "model_type", None) == "structpe-sipe"
        or hasattr(cfg, "family")
        and hasattr(cfg, "injection")
    )


def model_kind(model: Any) -> str:
    """``causal`` or ``masked``: our ``txl`` family and HF ``*ForCausalLM``/``*LMHeadModel`` are
    causal; our encoders and HF ``*ForMaskedLM`` are masked."""
    cfg = getattr(model, "config", None)
    family = getattr(cfg, "family", None)
    if family is not None:  # "hf": a Hugging Face causal LM with a SiPE adapter (structpe.adapters)
        return "causal" if family in (*CAUSAL_FAMILIES, "hf") else "masked"
    name = type(model).__name__
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if name in set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()) or name.endswith(
        ("ForCausalLM", "LMHeadModel")
    ):
        return "causal"
    if name in set(MODEL_FOR_MASKED_LM_MAPPING_NAMES.values()) or name.endswith("ForMaskedLM"):
        return "masked"
    raise ValueError(
        f"cannot tell whether {name} is a causal or a masked LM; pass kind='causal' or kind='masked'"
    )


def uses_tags(model: Any) -> bool:
    """True when the model reads hexatags (a structpe model whose injection is not ``none``)."""
    return is_structpe_model(model) and getattr(model.config, "injection", "none") != "none"


def model_device(model: Any) -> torch.device:
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")


def forward_logits(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    terminal_ids: torch.Tensor | None,
    nonterminal_ids: torch.Tensor | None,
    **extra: Any,
) -> Any:
    """Call any model with the docs/design.md §6 convention (ours) or the HF one (baselines)."""
    if is_structpe_model(model):
        return model(
            input_ids,
            attention_mask=attention_mask,
            terminal_ids=terminal_ids,
            nonterminal_ids=nonterminal_ids,
            **extra,
        )
    return model(input_ids=input_ids, attention_mask=attention_mask, **extra)


@dataclass
class Encoded:
    """One text as a scorer holds it: token ids and offsets, each token's tags (-100: none), and how
    many words of the parse found no token."""

    text: str
    ids: list[int]
    offsets: list[tuple[int, int]]
    terminals: list[int]
    nonterminals: list[int]
    unaligned: int
