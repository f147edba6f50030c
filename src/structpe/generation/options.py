"""What ``generate`` can be asked: its options checked before any model loads (the CLI calls
:func:`check_options` first), and top-k / nucleus filtering of one row of logits."""

from __future__ import annotations

import math

import torch

from structpe.choices import STRATEGIES


def check_options(
    strategy: str,
    n: int,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    num_beams: int,
    max_words: int,
    max_tokens_per_word: int,
) -> None:
    """ValueError for options :func:`generate` cannot honour; the CLI calls it before loading a model."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if n < 1 or max_words < 1 or max_tokens_per_word < 1 or num_beams < 1:
        raise ValueError("n, max_words, max_tokens_per_word and num_beams must be >= 1")
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1 (leave it out for no limit), got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if n > 1 and (strategy in ("greedy", "beam") or temperature == 0):
        raise ValueError(
            f"n={n} with the deterministic {strategy} strategy would repeat one sentence {n} times; "
            "use strategy sample (temperature > 0) for several sentences"
        )


def filter_logits(logits: torch.Tensor, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """Top-k, then nucleus (top-p) filtering of one row of logits (-inf outside)."""
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        probs = sorted_logits.softmax(-1)
        cut = probs.cumsum(-1) - probs > top_p  # keep the smallest prefix with mass >= top_p
        logits = logits.clone()
        logits[order[cut]] = -math.inf
    return logits
