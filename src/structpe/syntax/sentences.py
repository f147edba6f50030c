"""The one sentence split of raw text: paragraphs -> sentences of words, whatever the parser.

Below the parsers and the data pipeline, since both cut text with it: the hexatagger's
``parse_text``, the prepare step for ``text`` corpora and the study's test sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

# spaCy's ``nlp.max_length`` (its default): a longer text is refused deep in the pipeline (E088),
# because its parser needs about 1 GB of memory per 100,000 characters
MAX_TEXT_CHARS = 1_000_000


def check_text_lengths(
    texts: Sequence[str], where: str = "", limit: int = MAX_TEXT_CHARS, error: type[Exception] | None = None
) -> None:
    """Refuse, before any parsing, a text longer than spaCy takes, naming the text (``where``: a
    prefix such as ``"split 'train': "``), the limit and the way out (the sentence split and the
    spaCy parser both run spaCy on whole texts). ``error``: the class raised (a StructpeError)."""
    from structpe.errors import StructpeError

    for i, text in enumerate(texts):
        if len(text) > limit:
            raise (error or StructpeError)(
                f"{where}text {i + 1} ({text[:40]!r}...) has {len(text):,} characters, over spaCy's "
                f"limit of {limit:,} per text; split it (one sentence or paragraph per line)"
            )


@lru_cache(maxsize=1)
def _sentencizer() -> object:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def split_sentences(paragraphs: Sequence[str], max_words: int | None = None) -> list[list[list[str]]]:
    """Per paragraph, its sentences as lists of words: spaCy's rule-based English tokenizer and its
    ``sentencizer`` (a sentence ends after ``.``, ``!``, ``?`` and similar marks, closing quotes and
    brackets included), whitespace tokens dropped. With ``max_words``, a longer sentence (in old
    books mostly run-on passages joined by semicolons, lists and verse) is cut into consecutive
    pieces of near-equal length, none longer: a parser's encoder takes a bounded number of subwords
    (the hexatagger 512), and every piece is then a sentence of its own, to the parser and the LM.

    The one sentence split of ``text`` corpora: the prepare step parses these word lists with
    whichever parser (``parse_words``: spaCy's dependency parse does not move the boundaries), the
    LM is trained on them (one packed sentence each) and the study's test sentences are cut the same
    way, so no parser choice changes what a sentence is. Rule-based, hence fast (no model).
    """
    if max_words is not None and max_words < 1:
        raise ValueError(f"max_words must be >= 1, got {max_words}")
    out = []
    for doc in _sentencizer().pipe(list(paragraphs)):
        sents = [[t.text for t in s if not t.is_space] for s in doc.sents]
        out.append([piece for s in sents if s for piece in _cut(s, max_words)])
    return out


def split_words(text: str) -> list[str]:
    """The words of ``text`` as one sentence: the word rule of :func:`split_sentences` (what
    ``structpe tag`` and the prepare step use), so any Unicode text keeps its words (a URL is one)."""
    return [w for sent in split_sentences([text])[0] for w in sent]


def _cut(words: list[str], max_words: int | None) -> list[list[str]]:
    """``words`` in ceil(n / max_words) consecutive pieces whose lengths differ by at most one."""
    if max_words is None or len(words) <= max_words:
        return [words]
    pieces = -(-len(words) // max_words)
    size, extra = divmod(len(words), pieces)
    out, start = [], 0
    for k in range(pieces):
        end = start + size + (k < extra)
        out.append(words[start:end])
        start = end
    return out
