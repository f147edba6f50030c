"""A parser that parses each distinct text once.

The same BLiMP / SyntaxGym / leakage sentences are scored by several models and likelihood modes
(every cell of a study, every variant of the quickstart), and parsing them is the slow part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class CachedParser:
    """Wraps any parser; ``parse_text`` results are cached per (text, split_sentences)."""

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self.cache: dict[tuple[str, bool], Any] = {}

    def parse_text(self, texts: Sequence[str], *, split_sentences: bool = True) -> list[Any]:
        # the texts not yet parsed, once each, in first-seen order (one batch for the parser)
        todo = list(dict.fromkeys(t for t in texts if (t, split_sentences) not in self.cache))
        if todo:
            parsed = self.parser.parse_text(todo, split_sentences=split_sentences)
            if len(parsed) != len(todo):
                raise ValueError(f"the parser returned {len(parsed)} parses for {len(todo)} texts")
            self.cache.update({(t, split_sentences): p for t, p in zip(todo, parsed, strict=True)})
        return [self.cache[(t, split_sentences)] for t in texts]

    def __getattr__(self, name: str) -> Any:  # parse_words, name, stats, ... of the wrapped parser
        return getattr(self.parser, name)
