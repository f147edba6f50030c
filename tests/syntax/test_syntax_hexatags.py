"""Hexatag encode/decode/constrained decoding against docs/design.md §1 (worked examples, invariants)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from structpe.syntax import hexatags as hx
from structpe.syntax import projectivize
from structpe.syntax.hexatags import InvalidTagsError, decode, encode
from structpe.syntax.tagged import TaggedSentence
from structpe.syntax.trees import InvalidTreeError, NonProjectiveError, is_projective, projectivize_with_count

# ---------------------------------------------------------------------------------------------
# helpers: random trees and a literal reference BHT (docs/design.md §1 read word by word)


@st.composite
def projective_trees(draw: st.DrawFn, max_words: int = 30) -> list[int]:
    """A random projective tree: pick a head for a span, split the rest into contiguous subtrees."""
    n = draw(st.integers(1, max_words))
    heads = [0] * n
    todo = [(1, n, 0)]  # (first word, last word, head of this subtree's root)
    while todo:
        a, b, parent = todo.pop()
        h = draw(st.integers(a, b))
        heads[h - 1] = parent
        for lo, hi in ((a, h - 1), (h + 1, b)):
            i = lo
            while i <= hi:
                j = draw(st.integers(i, hi))
                todo.append((i, j, h))
                i = j + 1
    return heads


@st.composite
def any_trees(draw: st.DrawFn, max_words: int = 25) -> list[int]:
    """A random (often non-projective) tree: each word in a random order attaches to an earlier one."""
    n = draw(st.integers(1, max_words))
    order = draw(st.permutations(list(range(1, n + 1))))
    heads = [0] * n
    for k, w in enumerate(order[1:], 1):
        heads[w - 1] = order[draw(st.integers(0, k - 1))]
    return heads


def reference_tags(heads: list[int]) -> tuple[list[str], list[str], str | None]:
    """Build the BHT literally (left dependents nearest first, then right ones) and read it in order.
    Returns per-word terminal and non-terminal names and the BHT root's non-terminal."""
    n = len(heads)
    children = {h: [d for d in range(1, n + 1) if heads[d - 1] == h] for h in range(n + 1)}

    def bht(h: int):
        t = ("leaf", h)
        for d in reversed([d for d in children[h] if d < h]):
            t = ("node", "R", bht(d), t)
        for d in [d for d in children[h] if d > h]:
            t = ("node", "L", t, bht(d))
        return t

    seq: list[tuple[str, str]] = []

    def walk(t, side: str) -> None:
        if t[0] == "leaf":
            seq.append(("t", "tl" if side == "l" else "tr"))
            return
        walk(t[2], "l")
        seq.append(("n", f"n{side}-{t[1]}"))
        walk(t[3], "r")

    root = bht(children[0][0])
    walk(root, "l")
    assert len(seq) == 2 * n - 1
    terms = [x for k, x in seq if k == "t"]
    nts = [x for k, x in seq if k == "n"] + ["eos"]
    return terms, nts, (None if root[0] == "leaf" else f"nl-{root[1]}")


# ---------------------------------------------------------------------------------------------
# docs/design.md §1 worked examples and invariants


@pytest.mark.parametrize(
    ("heads", "terms", "nts"),
    [
        ([2, 0, 4, 2], ["tl", "tr", "tl", "tr"], ["nl-R", "nl-L", "nr-R", "eos"]),  # she watches funny videos
        # I saw dogs with hats
        ([2, 0, 2, 5, 3], ["tl", "tr", "tl", "tl", "tr"], ["nl-R", "nl-L", "nr-L", "nr-R", "eos"]),
        ([0], ["tl"], ["eos"]),
    ],
)
def test_worked_examples(heads: list[int], terms: list[str], nts: list[str]) -> None:
    t, n = encode(heads)
    assert hx.terminal_names(t) == terms
    assert hx.nonterminal_names(n) == nts
    assert decode(t, n) == heads
    assert decode(terms, nts) == heads  # names are accepted too


def test_canonical_ids() -> None:
    assert hx.TERMINALS == ("tl", "tr")
    assert hx.NONTERMINALS == ("nl-L", "nl-R", "nr-L", "nr-R", "eos")
    assert hx.terminal_ids(["tl", "tr"]) == [0, 1]
    assert hx.nonterminal_ids(["nl-L", "nl-R", "nr-L", "nr-R", "eos"]) == [0, 1, 2, 3, 4]
    assert hx.nonterminal_names([4, 0]) == ["eos", "nl-L"]
    with pytest.raises(InvalidTagsError, match="unknown"):
        hx.terminal_ids(["tx"])
    with pytest.raises(InvalidTagsError, match="out of range"):
        hx.nonterminal_ids([5])
    from structpe.modules import prior

    # one tag inventory: the prior's tables are sized by structpe.syntax.hexatags (no copy of it)
    assert (len(hx.TERMINALS), len(hx.NONTERMINALS)) == (prior.N_TERMINALS, prior.N_NONTERMINALS)
    assert (prior.N_TERMINALS, prior.N_NONTERMINALS, prior.IGNORE_INDEX) == (2, 5, -100)


@settings(max_examples=300, deadline=None)
@given(projective_trees())
def test_random_projective_trees_round_trip(heads: list[int]) -> None:
    assert is_projective(heads)
    t, n = encode(heads)
    # agrees with the literal BHT construction of docs/design.md §1
    ref_t, ref_n, root_tag = reference_tags(heads)
    assert hx.terminal_names(t) == ref_t and hx.nonterminal_names(n) == ref_n
    # invariants: 2n-1 symbols, first terminal tl, one eos on the last word, root node is nl-*
    assert len(t) + len([x for x in n if x != hx.EOS]) == 2 * len(heads) - 1
    assert t[0] == hx.TL
    assert n.count(hx.EOS) == 1 and n[-1] == hx.EOS
    assert root_tag is None or root_tag.startswith("nl-")
    assert hx.stack_depths(t, n)[-1] == 1
    assert decode(t, n) == heads


@settings(max_examples=300, deadline=None)
@given(any_trees())
def test_projectivize(heads: list[int]) -> None:
    out, lifted = projectivize_with_count(heads)
    assert is_projective(out)
    assert out.count(0) == 1 and out.index(0) == heads.index(0)
    assert projectivize(heads) == out
    if is_projective(heads):
        assert out == heads and lifted == 0
    else:
        assert lifted >= 1
        with pytest.raises(NonProjectiveError):
            encode(heads)
    assert decode(*encode(out)) == out


def test_projectivize_known_case() -> None:
    heads = [3, 4, 0, 3]  # arc 4 -> 2 crosses 3's arc to 1
    assert not is_projective(heads)
    out, lifted = projectivize_with_count(heads)
    assert (out, lifted) == ([3, 3, 0, 3], 1)


@pytest.mark.parametrize(
    ("heads", "match"),
    [
        ([], "empty"),
        ([2, 0, 9], "outside"),
        ([2, 1, 0], "cycle"),
        ([0, 0], "2 roots"),
        ([2, 1], "no root"),
        ([2, 0, 1.0], "int"),
    ],
)
def test_invalid_trees(heads: list, match: str) -> None:
    with pytest.raises(InvalidTreeError, match=match):
        encode(heads)


@pytest.mark.parametrize(
    ("terms", "nts", "match"),
    [
        ([1, 1], [0, 4], "no open slot"),  # tr first
        ([0, 0], [2, 4], "depth >= 2"),  # nr at depth 1
        ([0, 1], [0, 0], "eos"),  # last word without eos
        ([0, 0, 1], [4, 0, 4], "not allowed"),  # eos in the middle
        ([0, 0], [0, 4], "unfinished"),  # two items left
        ([0], [4, 4], "pair per word"),
        ([2], [4], "terminal id"),
    ],
)
def test_decode_rejects_ill_formed(terms: list[int], nts: list[int], match: str) -> None:
    with pytest.raises(InvalidTagsError, match=match):
        decode(terms, nts)
    assert not hx.is_well_formed(terms, nts) if len(terms) == len(nts) else True


# ---------------------------------------------------------------------------------------------
# constrained decoder


def _all_well_formed(n: int):
    for t in itertools.product(range(2), repeat=n):
        for nt in itertools.product(range(4), repeat=n - 1):
            nts = [*nt, hx.EOS]
            if hx.is_well_formed(list(t), nts):
                yield list(t), nts


@pytest.mark.parametrize("seed", range(40))
def test_constrained_decode_random_scores_give_trees(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    ts = torch.log_softmax(torch.randn(n, 2, generator=torch.Generator().manual_seed(seed)), -1)
    ns = torch.randn(n, 5, generator=torch.Generator().manual_seed(seed + 1))  # logits work too
    depth = int(rng.integers(1, 8))
    t, nt, heads = hx.constrained_decode(ts, ns, max_depth=depth)
    assert len(t) == len(nt) == len(heads) == n
    assert decode(t, nt) == heads and is_projective(heads)
    assert max(hx.stack_depths(t, nt)) <= depth


@pytest.mark.parametrize("n", [2, 3, 4])
def test_constrained_decode_is_exact(n: int) -> None:
    rng = np.random.default_rng(n)
    ts, ns = rng.normal(size=(n, 2)), rng.normal(size=(n, 5))
    t, nt, _ = hx.constrained_decode(ts, ns)

    def score(tt, nn):
        return sum(ts[i, tt[i]] + ns[i, nn[i]] for i in range(n))

    best = max(score(a, b) for a, b in _all_well_formed(n))
    assert score(t, nt) == pytest.approx(best)


@settings(max_examples=150, deadline=None)
@given(projective_trees(max_words=40))
def test_constrained_decode_one_hot_equals_decode(heads: list[int]) -> None:
    t, n = encode(heads)
    out = hx.constrained_decode(np.eye(2)[t], np.eye(5)[n], max_depth=len(heads) + 1)
    assert out == (t, n, decode(t, n))


def test_constrained_decode_edge_cases() -> None:
    assert hx.constrained_decode([[0.0, 5.0]], [[9.0, 0, 0, 0, 0]]) == ([0], [4], [0])
    ninf = float("-inf")
    t, nt, heads = hx.constrained_decode([[ninf, ninf]] * 5, [[ninf] * 5] * 5)
    assert decode(t, nt) == heads
    t, nt, heads = hx.constrained_decode(np.full((6, 2), np.nan), np.zeros((6, 5)), max_depth=1)
    assert max(hx.stack_depths(t, nt)) == 1
    with pytest.raises(ValueError, match="shape"):
        hx.constrained_decode(np.zeros((3, 3)), np.zeros((3, 5)))


def test_constrained_decode_batch_equals_one_at_a_time() -> None:
    rng = np.random.default_rng(7)
    lengths = [1, 2, 5, 17, 3, 40, 9]
    ts = rng.normal(size=(len(lengths), 40, 2))
    ns = rng.normal(size=(len(lengths), 40, 5))
    ts[0, 1:] = np.nan  # rows past a sentence's end are never read
    batch = hx.constrained_decode_batch(ts, ns, lengths, max_depth=6)
    for b, n in enumerate(lengths):
        assert batch[b] == hx.constrained_decode(ts[b, :n], ns[b, :n], max_depth=6)
    with pytest.raises(ValueError, match="lengths"):
        hx.constrained_decode_batch(ts, ns, [0] * len(lengths))
    with pytest.raises(ValueError, match="scores"):
        hx.constrained_decode_batch(ts[:, :, :1], ns, lengths)


# ---------------------------------------------------------------------------------------------
# TaggedSentence


def test_tagged_sentence_json_round_trip() -> None:
    s = TaggedSentence.from_heads(["she", "watches", "funny", "videos"], [2, 0, 4, 2],
                                  ["nsubj", "root", "amod", "obj"], sent_id="s1")
    d = s.to_dict()
    assert d["terminals"] == ["tl", "tr", "tl", "tr"] and d["nonterminals"][-1] == "eos"
    assert d["heads"] == [2, 0, 4, 2] and d["words"][0] == "she"
    back = TaggedSentence.from_json(s.to_json())
    assert back == s
    back.check()
    with pytest.raises(ValueError, match="4 words"):
        TaggedSentence(["a", "b", "c", "d"], [0], [0], [4])
    with pytest.raises(ValueError, match="lacks"):
        TaggedSentence.from_json('{"words": ["a"]}')
