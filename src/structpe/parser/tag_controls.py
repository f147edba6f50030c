"""Tag sources of the study's controls: where a model's hexatags come from, besides the parse.

``parse``     the parser's parse of the whole sentence (SiPE's convention; every recipe but the
              controls below).
``prefix``    causal tags: word i gets the tags the parser gives word i when it parses words 1..i
              only, so no tag depends on a later word (the tags of word i are the same whatever
              words follow). Each distinct word prefix is parsed once (:func:`parse_prefixes`,
              which the leakage audit's causal conditions use too). The tags of consecutive words
              come from different parses, so the sequence need not decode to one tree; ``heads``
              and ``deprels`` are likewise each word's own in its prefix parse. A word's tags sit on
              its first subword and are computed from the whole word, so within a word split into
              several subwords the later subwords can read them: the tags are causal over words,
              not over subwords. As each word ends its own parse, its tags are nearly constant
              (the closing non-terminal; terminal "right" 95% of the time): 0.29 bits per word
              against the parse's 2.82 on Brown train (benchmarks/tag_information.py), so a model
              on these tags has almost no syntax to read (docs/studies/README.md, "Controls").
``shuffled``  syntax-free tags of the same form: a sentence of n words carries the parse (tags,
              heads) of another training sentence of n words. Training sentences are permuted
              within each word count by a fixed seeded derangement (:func:`shuffle_within_lengths`);
              any other sentence (validation, test, BLiMP, SyntaxGym) takes the parse of the training
              sentence of its word count that a seeded hash of its words picks (:class:`ShuffledParser`,
              over the pool of training parses that preparing the shuffled data writes). A length no
              training sentence has (2 of Brown's 4,744 test sentences, 104 and 145 words) takes
              the parses of the fewest training sentences whose lengths add up to it, joined into
              one tree.
"""

from __future__ import annotations

import gzip
import hashlib
import inspect
import json
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from structpe.errors import StructpeError
from structpe.parser.base import Parser, join_trees
from structpe.syntax.hexatags import decode
from structpe.syntax.tagged import TaggedSentence

TAG_SOURCES = ("parse", "prefix", "shuffled")
SHUFFLE_SEED = 0  # the one fixed seed of the shuffled control (training permutation and test rule)
POOL_FILE = "tag_pool.json.gz"  # training parses by word count, written next to the shuffled data


class TagSourceError(StructpeError):
    """A tag source cannot give a sentence its tags (e.g. no training sentence of its length)."""


def parse_prefixes(parser: Any, prefixes: Iterable[str | tuple[str, ...]]) -> dict[Any, Any]:
    """One parse per distinct prefix: text prefixes (str) through ``parse_text`` (one tree per
    text), word prefixes (tuples of words) through ``parse_words``."""
    todo = sorted(set(prefixes))
    texts = [p for p in todo if isinstance(p, str)]
    words = [p for p in todo if not isinstance(p, str)]
    out: dict[Any, Any] = {}
    if texts:
        if "split_sentences" in inspect.signature(parser.parse_text).parameters:
            parses = parser.parse_text(texts, split_sentences=False)
        else:
            parses = parser.parse_text(texts)
        out.update(_zip_parses(texts, parses))
    if words:
        out.update(_zip_parses(words, parser.parse_words([list(w) for w in words])))
    return out


def _zip_parses(keys: list[Any], parses: list[Any]) -> dict[Any, Any]:
    if len(parses) != len(keys):
        raise TagSourceError(
            f"the parser returned {len(parses)} parses for {len(keys)} prefixes (a 'skip' "
            "non-projective policy drops sentences; use 'lift')"
        )
    return dict(zip(keys, parses, strict=True))


class PrefixParser:
    """A parser whose tags are causal over words (module docstring, ``prefix``).

    ``parse_words`` / ``parse_text`` keep the wrapped parser's words (and, for text, its word
    segmentation) and replace every word's tags, head and label by those of its prefix parse;
    ``retag`` does the same for sentences parsed before. Prefix parses are cached by their words.
    """

    name = "prefix"

    def __init__(self, parser: Any):
        self.parser = parser
        self._cache: dict[tuple[str, ...], tuple[int, int, int, str | None]] = {}

    def retag(self, sentences: Sequence[Any]) -> list[TaggedSentence]:
        sentences = list(sentences)
        keys = {tuple(s.words[: i + 1]) for s in sentences for i in range(len(s.words))}
        todo = [k for k in keys if k not in self._cache]
        for k, p in parse_prefixes(self.parser, todo).items():
            if list(p.words) != list(k):
                raise TagSourceError(f"the parser changed the words of the prefix {list(k)!r}")
            last = len(k) - 1
            rel = p.deprels[last] if p.deprels is not None else None
            self._cache[k] = (p.terminals[last], p.nonterminals[last], p.heads[last], rel)
        out = []
        for s in sentences:
            rows = [self._cache[tuple(s.words[: i + 1])] for i in range(len(s.words))]
            rels = [r[3] for r in rows]
            out.append(
                TaggedSentence(
                    list(s.words),
                    [r[2] for r in rows],
                    [r[0] for r in rows],
                    [r[1] for r in rows],
                    rels if all(r is not None for r in rels) else None,
                    s.sent_id,
                    0,
                    dict(getattr(s, "meta", None) or {}),
                )
            )
        return out

    def parse_words(self, sentences: Sequence[Sequence[str]], sent_ids: Any = None) -> list[TaggedSentence]:
        # the words are given: only their prefixes are parsed (a sentence's last prefix is itself)
        ids = sent_ids if sent_ids is not None else [None] * len(sentences)
        stubs = [SimpleNamespace(words=list(w), sent_id=i) for w, i in zip(sentences, ids, strict=True)]
        return self.retag(stubs)

    def parse_text(self, texts: Sequence[str], ids: Any = None, *, split_sentences: bool = True) -> list[Any]:
        return self.retag(_parse_text(self.parser, texts, ids, split_sentences))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parser, name)


def _parse_text(parser: Any, texts: Sequence[str], ids: Any, split_sentences: bool) -> list[Any]:
    """The wrapped parser's ``parse_text`` (a study's CachedParser takes no ``ids``)."""
    if ids is None:
        return parser.parse_text(list(texts), split_sentences=split_sentences)
    return parser.parse_text(list(texts), ids, split_sentences=split_sentences)


def shuffle_within_lengths(lengths: Sequence[int], seed: int = SHUFFLE_SEED) -> list[int]:
    """``donor[i]``: the index of the sentence whose tags sentence ``i`` takes.

    Within each word count the sentences are put in a seeded random order and each takes the tags
    of the next one in that order (a cycle), so no sentence keeps its own parse unless it is the
    only one of its length.
    """
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(n, []).append(i)
    rng = random.Random(seed)
    donor = list(range(len(lengths)))
    for n in sorted(groups):
        order = groups[n]
        rng.shuffle(order)
        for j, i in enumerate(order):
            donor[i] = order[(j + 1) % len(order)]
    return donor


def write_pool(path: Path, terminals: Sequence[Sequence[int]], nonterminals: Sequence[Sequence[int]]) -> None:
    """The training parses (tag pairs) by word count, for :class:`ShuffledParser`."""
    from structpe.io import atomic_write_bytes

    pool: dict[str, list[list[list[int]]]] = {}
    for t, nt in zip(terminals, nonterminals, strict=True):
        pool.setdefault(str(len(t)), []).append([list(t), list(nt)])
    atomic_write_bytes(path, gzip.compress(json.dumps(pool, sort_keys=True).encode(), mtime=0))


class ShuffledParser:
    """A parser that gives each sentence the parse of a training sentence of its word count.

    The donor is ``pool[n][h % len(pool[n])]`` with h a sha256 of the sentence's words and
    :data:`SHUFFLE_SEED`: fixed, so every mode and every cell sees the same tags for a text. The
    words (and, for text, the wrapped parser's segmentation) are the sentence's own.
    """

    name = "shuffled"

    def __init__(self, parser: Any, pool_file: Path):
        self.parser = parser
        self.pool_file = Path(pool_file)
        if not self.pool_file.is_file():
            raise TagSourceError(f"{self.pool_file}: no pool of training parses (prepare the shuffled data)")
        raw = json.loads(gzip.decompress(self.pool_file.read_bytes()))
        self.pool = {int(n): v for n, v in raw.items()}

    def _pick(self, n: int, words: Sequence[str], piece: int) -> tuple[list[int], list[int]]:
        key = hashlib.sha256(f"{SHUFFLE_SEED}\x1f{piece}\x1f".encode() + "\x1f".join(words).encode()).digest()
        t, nt = self.pool[n][int.from_bytes(key[:8], "big") % len(self.pool[n])]
        return list(t), list(nt)

    def donor(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        """The (terminals, non-terminals) that a sentence of these words takes (class docstring)."""
        n = len(words)
        if n in self.pool:
            return self._pick(n, words, 0)
        # no training sentence this long: the fewest training parses whose lengths sum to n, joined
        fewest: list[list[int] | None] = [[]] + [None] * n  # fewest[k]: lengths that fill k words
        for k in range(1, n + 1):
            for m in sorted(self.pool, reverse=True):  # longest first among equally few
                prev = fewest[k - m] if m <= k else None
                if prev is not None and (fewest[k] is None or len(prev) + 1 < len(fewest[k])):
                    fewest[k] = [m, *prev]
        if fewest[n] is None:
            raise TagSourceError(f"{self.pool_file}: no training parses add up to {n} words")
        pieces = [self._pick(m, words, i) for i, m in enumerate(fewest[n])]
        w, heads, _ = join_trees([(["_"] * len(t), decode(t, nt), None) for t, nt in pieces])
        tagged = Parser().tag_tree(w, heads)  # the joined tree, lifted if joining crossed an arc
        return list(tagged.terminals), list(tagged.nonterminals)

    def retag(self, sentences: Sequence[Any]) -> list[TaggedSentence]:
        out = []
        for s in sentences:
            t, nt = self.donor(s.words)
            meta = dict(getattr(s, "meta", None) or {})
            out.append(TaggedSentence(list(s.words), decode(t, nt), t, nt, None, s.sent_id, 0, meta))
        return out

    def parse_words(self, sentences: Sequence[Sequence[str]], sent_ids: Any = None) -> list[TaggedSentence]:
        return self.retag(self.parser.parse_words(sentences, sent_ids))

    def parse_text(self, texts: Sequence[str], ids: Any = None, *, split_sentences: bool = True) -> list[Any]:
        return self.retag(_parse_text(self.parser, texts, ids, split_sentences))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parser, name)


def tag_parser(source: str, parser: Any, pool_file: Path | None = None) -> Any:
    """The parser that gives a cell of tag source ``source`` its tags (``parse``: ``parser`` itself)."""
    if source == "parse":
        return parser
    if source == "prefix":
        return PrefixParser(parser)
    if source == "shuffled":
        if pool_file is None:
            raise TagSourceError("the shuffled tag source needs the pool of training parses")
        return ShuffledParser(parser, pool_file)
    raise TagSourceError(f"unknown tag source {source!r}; choose from {', '.join(TAG_SOURCES)}")
