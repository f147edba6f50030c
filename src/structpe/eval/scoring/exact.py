"""The exact p(x) = sum_T p(x, T) of a short text, every well-formed tag sequence enumerated.

A tag-reading decoder's p(x) is a sum over hexatag sequences that the particle estimator (``smc``)
samples and the k-best ``marginal`` bounds. Its tags shape every later token through attention, so
no dynamic program factors the sum; but the sequences of n words are few for small n (8 at n = 3,
224 at 5, 1,344 at 6, 8,448 at 7: the moves of ``allowed_pairs``), and each is one row of the
``joint`` mode, p(x, T) in the model's own generative order (leak-free over words). Summing them
gives p(x) with no estimator at all: the ground truth for the estimators on short sentences and an
honest score where every sentence of a benchmark is short enough (docs/likelihoods.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from structpe.choices import EXACT_MAX_WORDS
from structpe.eval.scoring.inputs import parse_texts
from structpe.eval.scoring.likelihood import log_sum_exp
from structpe.eval.scoring.prefixes import allowed_pairs
from structpe.eval.scoring.scorer import CausalScorer
from structpe.syntax.hexatags import decode
from structpe.syntax.tagged import TaggedSentence


@cache
def every_sequence(n: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Every well-formed (terminal, non-terminal) sequence of n words: the paths of ``allowed_pairs``,
    which generate exactly the well-formed sequences."""
    out: list[tuple[tuple[int, int], ...]] = []

    def walk(prefix: tuple[tuple[int, int], ...], depth: int) -> None:
        if len(prefix) == n:
            out.append(prefix)
            return
        for t, nt, d in allowed_pairs(depth, len(prefix) + 1, n):
            walk((*prefix, (t, nt)), d)

    walk((), 0)
    return tuple(out)


class ExactScorer:
    """log p(x) of texts of at most ``max_words`` words (the parser's words), summed over every tree
    by a ``joint`` scorer. A model that reads no tags gets its plain p(x) (every tree would give the
    same row). The parser is needed for any model: it counts the words that decide which texts are
    short enough, so a tag-reading model and a baseline select the same texts."""

    def __init__(
        self, model: Any, tokenizer: Any, parser: Any, max_words: int, *, batch_size: int = 32,
        append_eos: bool = False,
    ) -> None:
        if not 1 <= max_words <= EXACT_MAX_WORDS:
            raise ValueError(
                f"exact p(x) enumerates every tree: max_words must be 1..{EXACT_MAX_WORDS} "
                f"(8,448 trees at 7 words), got {max_words}"
            )
        if parser is None:
            raise ValueError("exact p(x) counts a text's words with a parser: give one")
        self.max_words = max_words
        self.parser = parser
        self.joint = CausalScorer(
            model, tokenizer, parser, likelihood="joint", batch_size=batch_size, append_eos=append_eos
        )

    def parse(self, texts: Sequence[str]) -> list[Any]:
        return parse_texts(self.parser, list(texts)) or []

    def fits(self, text: str, parse: Any) -> bool:
        """At most ``max_words`` words, each on a token of its own: a word that shares its first
        token with another carries no tags (the scorers count it unaligned), so trees that differ in
        its tags alone would give the same row and be counted twice; such texts are left out (the
        tokenizer, not the model, decides, so every cell of a study leaves out the same ones)."""
        if len(parse.words) > self.max_words:
            return False
        return self.joint.encode([text], [parse])[0].unaligned == 0

    def totals(self, texts: Sequence[str], parses: Sequence[Any]) -> list[float]:
        """log p(x) of each text, given its parse (for its words; the parse's tags play no part)."""
        for text, parse in zip(texts, parses, strict=True):
            if not self.fits(text, parse):
                raise ValueError(
                    f"{text!r}: {len(parse.words)} words (over the exact limit of {self.max_words}?) "
                    "or a word without a token of its own"
                )
        if not self.joint.tagged:  # one row per text, all in one batch
            return [s.total for s in self.joint.score(list(texts), list(parses))]
        out = []
        for text, parse in zip(texts, parses, strict=True):
            trees = []
            for seq in every_sequence(len(parse.words)):
                t, nt = [a for a, _ in seq], [b for _, b in seq]
                trees.append(TaggedSentence(list(parse.words), decode(t, nt), t, nt))
            out.append(log_sum_exp([s.total for s in self.joint.score([text] * len(trees), trees)]))
        return out
