"""Decoding a hexatagger's per-word scores into a well-formed tag sequence (docs/design.md §1).

The arg-max tag sequence is used when it is well formed (it is then also the Viterbi optimum);
otherwise the constrained Viterbi decoder of ``structpe.syntax.hexatags`` (run once per length
bucket, ``constrained_decode_batch``) returns the best well-formed sequence, so the output is always
a tree. Pure score -> tags functions, kept apart from the network and the ``Parser`` wrapper.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from structpe.syntax.hexatags import (
    EOS,
    N_NONTERMINALS,
    N_TERMINALS,
    NR_L,
    NR_R,
    TL,
    constrained_decode_batch,
    decode,
)


def greedy_is_well_formed(terminals: Sequence[int], nonterminals: Sequence[int]) -> bool:
    """Depth check of docs/design.md §1 on an arg-max sequence (tl +1, tr needs >= 1, nr needs >= 2 and -1,
    eos exactly on the last word, final depth 1); cheaper than decoding and raising."""
    depth = 0
    last = len(terminals) - 1
    for i, (t, nt) in enumerate(zip(terminals, nonterminals, strict=True)):
        if t == TL:
            depth += 1
        elif depth < 1:
            return False
        if i == last:
            return nt == EOS and depth == 1
        if nt == EOS:
            return False
        if nt in (NR_L, NR_R):
            if depth < 2:
                return False
            depth -= 1
    return False


def decode_scores(
    terminal_scores: np.ndarray, nonterminal_scores: np.ndarray
) -> tuple[list[int], list[int], list[int]]:
    """(terminals, nonterminals, heads) of the best well-formed tag sequence for one sentence."""
    return decode_scores_batch([terminal_scores], [nonterminal_scores])[0]


def decode_scores_batch(
    terminal_scores: Sequence[np.ndarray], nonterminal_scores: Sequence[np.ndarray]
) -> list[tuple[list[int], list[int], list[int]]]:
    """``decode_scores`` for many sentences (per-word scores [n_i, 2] and [n_i, 5] each).

    If a sentence's per-word arg-max is well formed it maximises the summed scores over *all*
    sequences, so it is also the constrained optimum; only ill-formed arg-maxes pay for Viterbi,
    and those run together, vectorised over the batch (``constrained_decode_batch``).
    """
    out: list[tuple[list[int], list[int], list[int]] | None] = []
    viterbi = []
    for k, (ts, ns) in enumerate(zip(terminal_scores, nonterminal_scores, strict=True)):
        n = ts.shape[0]
        terms = ts.argmax(-1).tolist()
        nts = ns[:, :EOS].argmax(-1).tolist()
        nts[n - 1] = EOS
        if greedy_is_well_formed(terms, nts):
            out.append((terms, nts, decode(terms, nts)))
        else:
            out.append(None)
            viterbi.append(k)
    if viterbi:
        longest = max(terminal_scores[k].shape[0] for k in viterbi)
        ts_pad = np.zeros((len(viterbi), longest, N_TERMINALS))
        ns_pad = np.zeros((len(viterbi), longest, N_NONTERMINALS))
        for r, k in enumerate(viterbi):
            n = terminal_scores[k].shape[0]
            ts_pad[r, :n] = terminal_scores[k]
            ns_pad[r, :n] = nonterminal_scores[k]
        lengths = [terminal_scores[k].shape[0] for k in viterbi]
        for k, res in zip(viterbi, constrained_decode_batch(ts_pad, ns_pad, lengths), strict=True):
            out[k] = res
    return out  # type: ignore[return-value]
