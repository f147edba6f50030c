"""Dependency-tree checks: well-formedness, projectivity and projectivisation by arc lifting.

Hexatags encode projective trees only (docs/design.md §1; Amini et al. 2023 §2): a non-projective tree
must be projectivised (and counted) or refused, never tagged as if it were another tree.
Heads follow CoNLL-U: ``heads[i]`` is the 1-based head of word ``i + 1``; 0 marks the root.

Hand-written rather than taken from a library: the checks run on every sentence the encoder sees,
so they are plain O(n) list passes (no recursion, no per-node objects).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence

from structpe.errors import StructpeError

__all__ = [
    "InvalidTreeError",
    "NonProjectiveError",
    "check_tree",
    "is_projective",
    "projectivize",
    "projectivize_with_count",
    "tree_distances",
]


class InvalidTreeError(StructpeError):
    """The heads do not form a tree: wrong type, out of range, no root, several roots or a cycle.

    ``word`` is the 1-based index of a word to blame (None when the sentence is empty), so readers
    can point at the offending input line.
    """

    def __init__(self, message: str, word: int | None = None):
        super().__init__(message)
        self.word = word


class NonProjectiveError(StructpeError):
    """The tree has crossing arcs, so it has no hexatag encoding (projectivise it first)."""


def children_order(heads: Sequence[int]) -> tuple[list[list[int]], list[int]]:
    """Children lists (ascending) and a breadth-first order from the artificial root 0.

    Validates the heads as it goes: ints in [0, n], exactly one root, no cycle.
    """
    n = len(heads)
    if n == 0:
        raise InvalidTreeError("empty sentence: a tree needs at least one word")
    if set(map(type, heads)) != {int}:  # bool and float are refused too
        i, h = next((i, h) for i, h in enumerate(heads) if type(h) is not int)
        raise InvalidTreeError(f"word {i + 1}: head must be an int, got {h!r} ({type(h).__name__})", i + 1)
    if min(heads) < 0 or max(heads) > n:
        bad = next(i for i, h in enumerate(heads) if not 0 <= h <= n)
        raise InvalidTreeError(f"word {bad + 1} has head {heads[bad]}, outside 0..{n}", bad + 1)
    roots = heads.count(0) if isinstance(heads, list) else list(heads).count(0)
    if roots != 1:
        where = [i + 1 for i, h in enumerate(heads) if h == 0]
        if not roots:
            raise InvalidTreeError("no root (no word has head 0)", 1)
        raise InvalidTreeError(f"{roots} roots (words {where} have head 0)", where[1])
    children: list[list[int]] = [[] for _ in range(n + 1)]
    for d, h in enumerate(heads, 1):
        children[h].append(d)
    order = [0]
    for x in order:  # BFS; the list grows while we walk it
        order.extend(children[x])
    if len(order) != n + 1:
        seen = set(order)
        cyc = [d for d in range(1, n + 1) if d not in seen]
        raise InvalidTreeError(f"cycle: words {cyc} are not reachable from the root", cyc[0])
    return children, order


def tree_distances(heads: Sequence[int]) -> list[list[int]]:
    """Arcs between every two words on the tree path (0 on the diagonal), [n][n], 0-based words.

    Through the depth of each word and of the pair's lowest common ancestor: d(i, j) = depth(i) +
    depth(j) - 2 depth(lca); O(n^2 + n * depth), fine for sentences.
    """
    _, order = children_order(heads)
    n = len(heads)
    depth = [0] * (n + 1)
    for w in order[1:]:
        depth[w] = depth[heads[w - 1]] + 1
    ancestors = []
    for w in range(1, n + 1):  # each word's ancestors (itself first), up to the root word
        chain, x = [], w
        while x:
            chain.append(x)
            x = heads[x - 1]
        ancestors.append(chain)
    out = [[0] * n for _ in range(n)]
    for i in range(n):
        up = set(ancestors[i])
        for j in range(i + 1, n):
            lca = next(a for a in ancestors[j] if a in up)
            out[i][j] = out[j][i] = depth[i + 1] + depth[j + 1] - 2 * depth[lca]
    return out


def check_tree(heads: Sequence[int]) -> None:
    """Raise InvalidTreeError unless ``heads`` is a single-rooted tree with heads in range."""
    children_order(heads)


def subtree_extents(heads: Sequence[int]) -> tuple[list[list[int]], list[int], list[int], bool]:
    """Children, leftmost and rightmost descendant of every word (index 0 = root), projectivity.

    A tree is projective iff every subtree's yield is contiguous: hi - lo + 1 == size.
    """
    children, order = children_order(heads)
    n = len(heads)
    lo = list(range(n + 1))
    hi = list(range(n + 1))
    size = [1] * (n + 1)
    projective = True
    for h in reversed(order):  # children before parents
        ch = children[h]
        if ch:
            c = ch[0]
            if c < h:
                lo[h] = lo[c]
            c = ch[-1]
            if c > h:
                hi[h] = hi[c]
            s = 1
            for c in ch:
                s += size[c]
            size[h] = s
            if hi[h] - lo[h] + 1 != s:
                projective = False
    return children, lo, hi, projective


def is_projective(heads: Sequence[int]) -> bool:
    """True iff no two arcs cross (every subtree covers a contiguous span). Validates the tree."""
    return subtree_extents(heads)[3]


def _nonprojective_arcs(heads: list[int]) -> list[int]:
    """Dependents d whose arc (heads[d], d) is non-projective, i.e. some word strictly between
    head and dependent is not dominated by the head. O(n log n).

    With a preorder numbering ``pre`` of the tree, h dominates k iff pre[h] <= pre[k] < pre[h] +
    size[h]; so the arc is projective iff the minimum and maximum of ``pre`` over the words between
    h and d lie in that range -- two range queries, answered by sparse tables.
    """
    children, _ = children_order(heads)
    n = len(heads)
    pre = [0] * (n + 1)
    size = [1] * (n + 1)
    order: list[int] = []
    stack = [0]
    while stack:  # preorder, children left to right
        x = stack.pop()
        pre[x] = len(order)
        order.append(x)
        stack.extend(reversed(children[x]))
    for x in reversed(order):
        if x:
            size[heads[x - 1]] += size[x]
    lows, highs = [pre], [pre]  # level j covers words k .. k + 2**j - 1
    span = 1
    while 2 * span <= n + 1:
        lo_prev, hi_prev = lows[-1], highs[-1]
        lows.append([min(lo_prev[k], lo_prev[k + span]) for k in range(n + 2 - 2 * span)])
        highs.append([max(hi_prev[k], hi_prev[k + span]) for k in range(n + 2 - 2 * span)])
        span *= 2
    out = []
    for d in range(1, n + 1):
        h = heads[d - 1]
        a, b = (h, d) if h < d else (d, h)
        if h == 0 or b - a < 2:
            continue
        lo, hi = a + 1, b - 1  # inclusive range of the words between
        j = (hi - lo + 1).bit_length() - 1
        right = hi - (1 << j) + 1  # two overlapping blocks of 2**j words cover lo..hi
        mn = min(lows[j][lo], lows[j][right])
        mx = max(highs[j][lo], highs[j][right])
        if mn < pre[h] or mx >= pre[h] + size[h]:
            out.append(d)
    return out


def _dominates_between(heads: list[int], h: int, d: int) -> bool:
    """True iff ``h`` dominates every word strictly between ``h`` and ``d`` (the arc is projective).

    Walks up from each word, remembering the answer for every word passed, so each word is
    visited once: O(b - a + nodes on the paths)."""
    a, b = (h, d) if h < d else (d, h)
    known: dict[int, bool] = {h: True, 0: False}
    for k in range(a + 1, b):
        path = []
        x = k
        while x not in known:
            path.append(x)
            x = heads[x - 1]
        ok = known[x]
        for y in path:
            known[y] = ok
        if not ok:
            return False
    return True


def projectivize_with_count(heads: Sequence[int]) -> tuple[list[int], int]:
    """Projectivise by arc lifting and return (new heads, number of lifts).

    Nivre & Nilsson (2005) lifting: while the tree is non-projective, take the shortest
    non-projective arc (leftmost on ties) and reattach its dependent to its grandparent. Arcs from
    the root word are never non-projective (it dominates every word), so lifting never creates a
    second root. Projective input comes back unchanged (a copy) with count 0.

    Incremental, so long sentences stay fast: the non-projective arcs wait in a heap keyed by
    (length, dependent), one entry per arc. Lifting d from h to g = head(h) only shrinks h's
    subtree (by d's), so an arc stays non-projective until it is lifted, and the only arcs that can
    turn non-projective are h's other arcs -- exactly those with a word of d's subtree strictly
    between their ends -- and the new arc (g, d). After an O(n log n) start, each lift costs
    O(|subtree(d)| log n + children(h) log n + |g - d|).
    """
    out = list(heads)
    if is_projective(out):
        return out, 0
    n = len(out)
    children: list[list[int]] = [[] for _ in range(n + 1)]
    for dep, head in enumerate(out, 1):
        children[head].append(dep)
    heap = [(abs(out[d - 1] - d), d, out[d - 1]) for d in _nonprojective_arcs(out)]
    heapq.heapify(heap)
    queued = [False] * (n + 1)  # d's current arc is in the heap (so: known non-projective)
    for _, d, _ in heap:
        queued[d] = True
    lifts = 0
    while heap:
        _, d, h = heapq.heappop(heap)
        g = out[h - 1]
        out[d - 1] = g
        children[h].remove(d)
        children[g].append(d)
        lifts += 1
        moved = [d]
        for x in moved:  # d's subtree, which h no longer dominates
            moved.extend(children[x])
        moved.sort()
        for c in children[h]:
            if queued[c]:
                continue
            a, b = (h, c) if h < c else (c, h)
            i = bisect.bisect_right(moved, a)
            if i < len(moved) and moved[i] < b:
                heapq.heappush(heap, (b - a, c, h))
                queued[c] = True
        queued[d] = bool(g) and not _dominates_between(out, g, d)
        if queued[d]:
            heapq.heappush(heap, (abs(g - d), d, g))
    return out, lifts


def projectivize(heads: Sequence[int]) -> list[int]:
    """Projective heads by arc lifting (see ``projectivize_with_count`` for the lift count)."""
    return projectivize_with_count(heads)[0]
