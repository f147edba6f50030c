"""The one CachedParser: each distinct (text, split_sentences) is parsed once, in first-seen order."""

from __future__ import annotations

from structpe.parser.cached import CachedParser


class Counting:
    name = "counting"

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], bool]] = []

    def parse_text(self, texts, *, split_sentences=True):
        self.calls.append((list(texts), split_sentences))
        return [f"{t}|{split_sentences}" for t in texts]


def test_each_text_is_parsed_once_per_split_setting():
    inner = Counting()
    p = CachedParser(inner)
    assert p.parse_text(["b", "a", "b"], split_sentences=False) == ["b|False", "a|False", "b|False"]
    assert p.parse_text(["a", "c"], split_sentences=False) == ["a|False", "c|False"]
    assert p.parse_text(["a"]) == ["a|True"]  # the wrapped parser's default: split
    assert inner.calls == [(["b", "a"], False), (["c"], False), (["a"], True)]
    assert p.name == "counting"  # everything else is the wrapped parser's
