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

Implementations: ``gold`` (CoNLL-U trees, here), ``spacy`` (``structpe.parser.spacy``) and
``hexatagger`` (``structpe.parser.hexatagger``); ``structpe.parser.registry.get_parser`` builds
them by name.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TextIO

from structpe.errors import StructpeError
from structpe.syntax.conllu_io import ConlluSentence, read_conllu
from structpe.syntax.hexatags import encode
from structpe.syntax.tagged import TaggedSentence
from structpe.syntax.trees import NonProjectiveError, projectivize_with_count

# CPU inference modes of the hexatagger (``structpe.parser.hexatagger.quantize_for_cpu``); here, so
# that the command lines can offer them without importing torch
QUANTIZE_MODES = ("none", "int8", "bf16")
QUANTIZE_HELP = (
    "hexatagger CPU inference: none (fp32), int8 (dynamic quantization of the Linear and LSTM layers) "
    "or bf16 (bfloat16 weights, fast where the CPU has native bf16); docs/hexatagger.md has the speed "
    "and UAS of each"
)

class NonProjectivePolicy(StrEnum):
    """What to do with a non-projective tree: lift arcs, skip the sentence, or raise."""

    LIFT = "lift"
    SKIP = "skip"
    ERROR = "error"


class NonProjectiveSentenceError(NonProjectiveError):
    """Raised under the ``error`` policy; names the sentence."""


class ParserInputError(StructpeError):
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
