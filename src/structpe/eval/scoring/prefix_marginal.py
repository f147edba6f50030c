"""The leak-free prefix marginal: the bound log p^(text[:c]) of a text's prefix at any character cut,
a function of the prefix alone (docs/likelihoods.md). SyntaxGym's ``marginal`` and ``smc`` region
surprisals are differences of these bounds or estimates (``structpe.eval.syntaxgym.evaluate``)."""

from __future__ import annotations

from collections.abc import Sequence

from structpe.eval.scoring.types import CausalScoring, Encoded, TokenScores
from structpe.syntax.hexatags import IGNORE_INDEX as IGNORE


def prefix_bounds(
    scorer: CausalScoring, texts: Sequence[str], cuts: Sequence[Sequence[int]]
) -> tuple[list[TokenScores], list[list[float]]]:
    """Marginal scores of ``texts`` and, per text, the open prefix bound log p^(text[:c]) at each cut
    (``prefix_sources``, each read as the sum of its scores' first tokens)."""
    full, sources = prefix_sources(scorer, texts, cuts)
    bounds = [[float(sum(ts.logprobs[:m])) if ts is not None else 0.0 for ts, m in row] for row in sources]
    return full, bounds


def prefix_sources(
    scorer: CausalScoring, texts: Sequence[str], cuts: Sequence[Sequence[int]]
) -> tuple[list[TokenScores], list[list[tuple[TokenScores | None, int]]]]:
    """Scores of ``texts`` and, per text and cut, where the prefix ``text[:c]``'s estimate lies: a
    text's scores and how many of its first tokens make the prefix (None, 0: the empty prefix).
    ``marginal`` (the k-best bound) and ``smc`` (the particle estimate) modes alike.

    Each bound is a function of ``text[:c]`` alone (docs/likelihoods.md, prefix marginal): the
    tokenizer's tokens of ``text[:c]``, its words as the scorer's parser segments ``text[:c]``
    itself, and a beam whose moves never look ahead. Where those tokens and word starts are the
    whole text's first ones, the bound is read off the whole text's beam (its open bound at a
    token depends on nothing after the token); otherwise ``text[:c]`` is scored on its own.
    """
    from structpe.eval.scoring.inputs import parse_texts

    if not scorer.tagged or scorer.likelihood not in ("marginal", "smc"):
        raise ValueError("prefix bounds need a marginal- or smc-mode scorer of a model that reads tags")
    if scorer.likelihood == "smc" and getattr(scorer, "smc_parts", "both") == "sentence":
        raise ValueError("prefix estimates need the smc mode's open systems (smc_parts 'both' or 'prefix')")
    if scorer.parser is None:
        raise ValueError("prefix bounds segment every prefix with the scorer's parser: give it one")
    texts = list(texts)
    enc = scorer.encode(texts, parse_texts(scorer.parser, texts))
    full = scorer.score_encoded(enc)
    prefixes = sorted({t[:c] for t, cs in zip(texts, cuts, strict=True) for c in cs if 0 < c < len(t)})
    penc = dict(zip(prefixes, scorer.encode(prefixes, parse_texts(scorer.parser, prefixes)), strict=True))

    def starts(e: Encoded) -> list[bool]:
        return [t != IGNORE for t in e.terminals]

    todo: list[tuple[int, int, str]] = []  # (text, cut index, prefix) scored on its own
    bounds: list[list[tuple[TokenScores | None, int]]] = []
    for i, (e, sc, cs) in enumerate(zip(enc, full, cuts, strict=True)):
        row: list[tuple[TokenScores | None, int]] = []
        for j, c in enumerate(cs):
            if c <= 0 or c >= len(e.text):
                row.append((None, 0) if c <= 0 else (sc, len(sc.logprobs)))
                continue
            p = penc[e.text[:c]]
            m = len(p.ids)
            if (
                p.ids == e.ids[:m]
                and starts(p) == starts(e)[:m]
                and (m == len(e.ids) or e.offsets[m][0] >= c)
            ):
                row.append((sc, m))
            else:
                row.append((None, -1))
                todo.append((i, j, p.text))
        bounds.append(row)
    need = sorted({p for _, _, p in todo})
    own = dict(zip(need, scorer.score_encoded([penc[p] for p in need]), strict=True))
    for i, j, p in todo:
        bounds[i][j] = (own[p], len(own[p].logprobs))
    return full, bounds
