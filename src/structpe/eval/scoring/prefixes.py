"""Well-formed hexatag prefixes and the nested beam's hypotheses (docs/design.md §1 stack depth).

``prefix_pairs`` lists the (terminal, non-terminal) pairs that extend a well-formed prefix without
looking at later words (open), or that end the tree (close); ``allowed_pairs`` adds the
length-aware rule of generation (the prefix can still finish within ``n_words``; same rules and
depth cap as ``hexatags.constrained_decode``). ``BeamHyp`` and ``BeamSentence`` hold the beam's state
per prefix and per sentence. Pure bookkeeping without a model, kept apart from the beam itself
(``structpe.eval.scoring.likelihood``: selection, forwards, bounds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from structpe.eval.scoring.types import Encoded
from structpe.syntax.hexatags import DEFAULT_MAX_DEPTH, EOS, NL_L, NL_R, NR_L, NR_R, TL, TR


def allowed_pairs(
    depth: int, word: int, n_words: int, max_depth: int = DEFAULT_MAX_DEPTH
) -> list[tuple[int, int, int]]:
    """(terminal, non-terminal, depth after) for word ``word`` (1-based) of ``n_words``.

    Depth rules of docs/design.md §1 (:func:`prefix_pairs`); eos only on the last word, whose final
    depth must be 1. A prefix is kept only if it can still finish: each remaining non-last word
    lowers the depth by at most one (tr + nr) and the last word must start at depth 1, so after
    word i < n the depth must be <= n - i. Every path these moves allow decodes to a tree, and every
    tree's tags are a path (checked exhaustively in tests). Generation uses this length-aware form;
    the marginal likelihood uses :func:`prefix_pairs`, which knows nothing of the length.
    """
    if word == n_words:
        return prefix_pairs(depth, True, max_depth)
    return [m for m in prefix_pairs(depth, False, max_depth) if m[2] <= n_words - word]


def prefix_pairs(depth: int, close: bool, max_depth: int = DEFAULT_MAX_DEPTH) -> list[tuple[int, int, int]]:
    """(terminal, non-terminal, depth after) moves that depend on no later word.

    tl +1 (at most ``max_depth``), tr needs depth >= 1; then nl keeps the depth, nr needs >= 2 and
    subtracts 1 (docs/design.md §1). ``close=False``: the tree stays open (no eos; any depth the
    cap allows, so a prefix's moves do not depend on how many words follow). ``close=True``: the
    word ends the sentence (eos), which needs depth 1 after its terminal.
    """
    out = []
    for t, after_t in ((TL, depth + 1), (TR, depth)):
        if (t == TR and depth < 1) or after_t > max_depth:
            continue
        if close:
            if after_t == 1:
                out.append((t, EOS, 1))
            continue
        for nt in (NL_L, NL_R, NR_L, NR_R):
            if nt in (NR_L, NR_R) and after_t < 2:
                continue
            out.append((t, nt, after_t - 1 if nt in (NR_L, NR_R) else after_t))
    return out


@dataclass
class BeamHyp:
    """One tag prefix in the nested beam, with its score and the tag heads' next predictions."""

    terminals: list[int]
    nonterminals: list[int]
    depth: int
    score: float  # log p(x_<=pos_i, T_<=i) once selected; grows with tokens after the forward
    tier: int  # smallest beam width that holds this hypothesis
    next_t: torch.Tensor | None = None  # tag head log-softmax at pos_i (predicts word i+1)
    next_n: torch.Tensor | None = None
    cum: list[float] = field(default_factory=list)  # score at each token of the current segment
    parent: int = -1  # index of the parent in the previous beam (the cached beam copies its rows)


@dataclass
class BeamSentence:
    """One sentence's beam state: its open prefixes, their bound per position, and closed trees."""

    enc: Encoded
    positions: list[int]  # tagged positions, BOS = 0
    end: int  # last position of the full row (EOS included when appended)
    hyps: list[BeamHyp]  # the open beam: its prefixes never end the tree
    bound: list[float]  # open prefix bound at each position 1..end (index t-1)
    closed: list[BeamHyp] = field(default_factory=list)  # the last word's closing children (eos)


def log_sum_exp(values: Sequence[float]) -> float:
    """log(sum(exp(v))) of Python floats, stable; -inf for all -inf (no tensor for a handful of values)."""
    m = max(values)
    if m == -math.inf:
        return m
    return m + math.log(sum(math.exp(v - m) for v in values))
