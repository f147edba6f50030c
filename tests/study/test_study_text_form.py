"""The study scores Brown test sentences in the raw text form its models were trained on."""

from __future__ import annotations

from types import SimpleNamespace

from structpe.study.data import parse_units


class WordsParser:
    """Stands in for spaCy: one 'parse' per word list, with the words it was given."""

    def parse_words(self, sentences):
        return [SimpleNamespace(words=list(w), meta=None) for w in sentences]


def test_brown_lines_are_scored_detokenized():
    lines = ["I do n't know .", "", "The glass , he said , broke ."]
    sents = parse_units(WordsParser(), lines, "lines", limit=5)
    assert [s.meta["text"] for s in sents] == ["I don't know.", "The glass, he said, broke."]
    assert sents[0].words[-1] == "."  # the parser still sees words, aligned to the raw text
