"""The arcs a hexatag prefix determines (structpe.syntax.hexatag_prefix), checked against every
projective tree: what the reader returns after word i is exactly what all completions share."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict

from structpe.syntax.hexatag_prefix import determined_arcs
from structpe.syntax.hexatags import encode, stack_depths
from structpe.syntax.trees import InvalidTreeError, NonProjectiveError

MAX_WORDS = 6


def projective_trees(max_words: int):
    """(heads, terminals, non-terminals) of every projective tree of 1..max_words words."""
    for n in range(1, max_words + 1):
        for heads in itertools.product(range(n + 1), repeat=n):
            if heads.count(0) != 1:
                continue
            try:
                t, nt = encode(list(heads))
            except (NonProjectiveError, InvalidTreeError):
                continue
            yield list(heads), t, nt


def test_worked_example():
    # "I saw dogs with hats", heads [2, 0, 2, 5, 3]: I=(tl, nl-R) saw=(tr, nl-L) dogs=(tl, nr-L)
    # with=(tl, nr-R) hats=(tr, eos) (docs/design.md §1)
    t, nt = encode([2, 0, 2, 5, 3])
    assert determined_arcs(t, nt) == [[], [(2, 1)], [(2, 3)], [], [(3, 5), (5, 4), (0, 2)]]


def test_every_arc_once_and_a_prefix_determines_what_all_completions_share():
    by_prefix: dict[tuple, list[tuple[set, set]]] = defaultdict(list)
    for heads, t, nt in projective_trees(MAX_WORDS):
        per_word = determined_arcs(t, nt)
        flat = [a for arcs in per_word for a in arcs]
        tree = {(h, d) for d, h in enumerate(heads, 1)}
        assert len(flat) == len(set(flat)) and set(flat) == tree  # every arc once, root arc included
        for i in range(1, len(heads) + 1):
            known = {a for arcs in per_word[:i] for a in arcs}
            assert all(max(a) <= i for a in known)  # only words already read
            by_prefix[(tuple(t[:i]), tuple(nt[:i]))].append((tree, known))
    compared = 0
    for (pt, pn), seen in by_prefix.items():
        shared = set.intersection(*(tree for tree, _ in seen))
        (known,) = {frozenset(k) for _, k in seen}  # the same prefix, the same answer
        assert known <= shared  # sound: every completion has these arcs
        # complete: every other arc differs between two completions. Closing a stack of depth s
        # takes s more words, so only prefixes with room for their completions are decisive here.
        if len(pt) + stack_depths(pt, pn)[-1] + 1 <= MAX_WORDS:
            assert known == shared, (pt, pn)
            compared += 1
    assert compared == 254


def test_ill_formed_tags_never_raise():
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randrange(1, 12)
        t = [rng.randrange(2) for _ in range(n)]
        nt = [rng.randrange(5) for _ in range(n)]
        for arcs in determined_arcs(t, nt):
            assert all(h != d for h, d in arcs)


def test_when_left_and_right_dependents_are_determined():
    """A left dependent's arc is known when its head is read; a right dependent's when the dependent
    is read, unless it has two or more right dependents of its own (docs/lis.md)."""
    for heads, t, nt in projective_trees(MAX_WORDS):
        when = {a: i for i, arcs in enumerate(determined_arcs(t, nt), 1) for a in arcs}
        for d, h in enumerate(heads, 1):
            if 0 < d < h:
                assert when[(h, d)] == h
            elif h:
                own_right = sum(1 for x, g in enumerate(heads, 1) if g == d and x > d)
                assert (when[(h, d)] == d) == (own_right < 2)
