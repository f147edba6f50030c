"""The one sentence split of raw text: paragraphs -> sentences of words, whatever the parser.

Below the parsers and the data pipeline, since both cut text with it: the hexatagger's
``parse_text``, the prepare step for ``text`` corpora and the study's test sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache


@lru_cache(maxsize=1)
def _sentencizer() -> object:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def split_sentences(paragraphs: Sequence[str]) -> list[list[list[str]]]:
    """Per paragraph, its sentences as lists of words: spaCy's rule-based English tokenizer and its
    ``sentencizer`` (a sentence ends after ``.``, ``!``, ``?`` and similar marks, closing quotes and
    brackets included), whitespace tokens dropped.

    The one sentence split of ``text`` corpora: the prepare step parses these word lists with
    whichever parser (``parse_words``: spaCy's dependency parse does not move the boundaries), the
    LM is trained on them (one packed sentence each) and the study's test sentences are cut the same
    way, so no parser choice changes what a sentence is. Rule-based, hence fast (no model).
    """
    out = []
    for doc in _sentencizer().pipe(list(paragraphs)):
        sents = [[t.text for t in s if not t.is_space] for s in doc.sents]
        out.append([s for s in sents if s])
    return out
