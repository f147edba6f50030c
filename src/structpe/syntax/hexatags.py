"""Hexatags: the canonical tag inventory, encode, decode and the constrained decoder (docs/design.md §1).

A projective dependency tree over n words becomes a binary head tree (BHT; Amini, Liu & Cotterell,
ACL 2023, "Hexatagging", §2): every head first combines with its left dependents, nearest first
(the new node's head is its right child), then with its right dependents, nearest first (head in the
left child). Read in order, the BHT gives 2n-1 symbols; SiPE pairs them per word:

    word i -> (tau_i, nu_i),  tau in T = {tl, tr},  nu in N = {nl-L, nl-R, nr-L, nr-R, eos}

tl/tr: the word's leaf is the left/right child of its parent; nl/nr: the internal node after word i
in the in-order walk is a left/right child (the BHT root counts as left); -L/-R: its head is in its
left/right child; the last word takes eos. Canonical ids: tl=0, tr=1; nl-L=0, nl-R=1, nr-L=2,
nr-R=3, eos=4 (so a non-terminal id is 2 * side + head_side).

Encoding here does not build the BHT. Each arc (h, d) *is* one internal node, sitting right after
the last word of the left child: after ``hi(d)`` for a left dependent, after ``lo(d) - 1`` for a right
one. The node's side follows from the next node on h's chain (or from how h itself attaches), so a
sentence is tagged in a few O(n) list passes; decoding is the stack machine of docs/design.md §1 with one
open slot per stack item, also O(n).
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any

from structpe.errors import StructpeError
from structpe.syntax.trees import NonProjectiveError, subtree_extents

TERMINALS: tuple[str, ...] = ("tl", "tr")
NONTERMINALS: tuple[str, ...] = ("nl-L", "nl-R", "nr-L", "nr-R", "eos")
N_TERMINALS = len(TERMINALS)
N_NONTERMINALS = len(NONTERMINALS)
TERMINAL_TO_ID = {name: i for i, name in enumerate(TERMINALS)}
NONTERMINAL_TO_ID = {name: i for i, name in enumerate(NONTERMINALS)}
IGNORE_INDEX = -100  # positions without a tag (continuation subwords, special tokens, padding)

TL, TR = 0, 1
NL_L, NL_R, NR_L, NR_R, EOS = 0, 1, 2, 3, 4

# The constrained decoder's stack-depth cap. Gold trees of all stored UD English treebanks need at
# most 7 (GUM test; measured by benchmarks/hexatags.py and checked by the treebank test; the
# Hexatagger paper uses 10 at evaluation), so 16 never cuts off a plausible tree while keeping
# Viterbi at O(n * 16).
DEFAULT_MAX_DEPTH = 16


class InvalidTagsError(StructpeError):
    """A tag sequence is not a well-formed hexatag sequence (wrong ids, lengths or stack depth)."""


def terminal_names(ids: Iterable[int]) -> list[str]:
    """Canonical ids -> names, e.g. [0, 1] -> ["tl", "tr"]."""
    return [TERMINALS[_to_id(i, TERMINAL_TO_ID, "terminal")] for i in ids]


def nonterminal_names(ids: Iterable[int]) -> list[str]:
    """Canonical ids -> names, e.g. [1, 4] -> ["nl-R", "eos"]."""
    return [NONTERMINALS[_to_id(i, NONTERMINAL_TO_ID, "non-terminal")] for i in ids]


def terminal_ids(tags: Iterable[int | str]) -> list[int]:
    """Names (or ids, passed through after a range check) -> canonical terminal ids."""
    return [_to_id(t, TERMINAL_TO_ID, "terminal") for t in tags]


def nonterminal_ids(tags: Iterable[int | str]) -> list[int]:
    """Names (or ids, passed through after a range check) -> canonical non-terminal ids."""
    return [_to_id(t, NONTERMINAL_TO_ID, "non-terminal") for t in tags]


def _to_id(tag: int | str, table: dict[str, int], what: str) -> int:
    if isinstance(tag, str):
        try:
            return table[tag]
        except KeyError:
            raise InvalidTagsError(f"unknown {what} tag {tag!r}; expected one of {list(table)}") from None
    try:  # ints (numpy / torch scalars too); 1.5, "1" or True are not tag ids
        i = operator.index(tag) if not isinstance(tag, bool) else None
    except TypeError:
        i = None
    if i is None:
        raise InvalidTagsError(f"{what} tag {tag!r} is neither a name nor an integer id")
    if not 0 <= i < len(table):
        raise InvalidTagsError(f"{what} id {tag!r} out of range 0..{len(table) - 1}")
    return i


def _nonprojective(heads: Sequence[int]) -> None:
    raise NonProjectiveError(
        f"non-projective tree (heads {list(heads)}): projectivize() it or skip the sentence"
    )


def encode(heads: Sequence[int]) -> tuple[list[int], list[int]]:
    """Hexatag a projective tree: (terminals, non-terminals), canonical ids, one pair per word.

    Raises InvalidTreeError (a ValueError) when ``heads`` is not a tree and NonProjectiveError
    (a ValueError) when it is not projective. O(n).
    """
    # leftmost / rightmost word under each head
    children, lo, hi, _ = subtree_extents(heads)
    n = len(heads)
    # Projectivity is checked on the way: the children's spans and h must tile [lo(h), hi(h)]
    # (adjacent, in order); by induction from the leaves that is "every subtree is contiguous".
    terms = [0] * n
    nts = [EOS] * n  # every boundary 1..n-1 is written exactly once below; the last word keeps eos
    for h in range(1, n + 1):
        g = heads[h - 1]
        side = 1 if 0 < g < h else 0  # h's subtree is the right child of its attachment node
        ch = children[h]
        if not ch:
            terms[h - 1] = side
            continue
        k = bisect_left(ch, h)  # number of left dependents
        m = len(ch) - k
        if k:
            terms[h - 1] = TR  # innermost node (nearest left dependent, h): h is the right child
            prev = ch[0]
            # the farthest left dependent's node: left child of the first right node, else outermost
            nts[hi[prev] - 1] = NL_R if m else 2 * side + 1
            # nodes of the nearer left dependents are right children of the next outer left node
            for j in range(1, k):
                c = ch[j]
                if hi[prev] + 1 != lo[c]:
                    _nonprojective(heads)
                nts[hi[c] - 1] = NR_R
                prev = c
            if hi[prev] + 1 != h:
                _nonprojective(heads)
            if not m:
                continue
        else:
            terms[h - 1] = TL  # h is the left child of its nearest right dependent's node
        if lo[ch[k]] != h + 1:
            _nonprojective(heads)
        last = len(ch) - 1
        for j in range(k, last):
            c = ch[j]
            if hi[c] + 1 != lo[ch[j + 1]]:
                _nonprojective(heads)
            nts[lo[c] - 2] = NL_L
        nts[lo[ch[last]] - 2] = 2 * side  # outermost node of h's chain
    return terms, nts


def bht_splits(heads: Sequence[int]) -> list[tuple[int, int, int]]:
    """The binary head tree's internal nodes as (lo, hi, k): words lo..hi, left child lo..k (1-based).

    The BHT of the module docstring: head h first takes its left dependents, nearest first (the
    node's left child is the dependent's subtree, split after its last word), then its right ones,
    nearest first (split before the dependent's first word). Node k is the one written right after
    word k, so the n - 1 splits are 1..n-1, each once. Needs a projective tree (as ``encode``).
    """
    children, lo, hi, projective = subtree_extents(heads)
    if not projective:
        _nonprojective(heads)
    nodes = []
    for h in range(1, len(heads) + 1):
        left = [c for c in children[h] if c < h][::-1]  # nearest first
        right = [c for c in children[h] if c > h]
        start, end = h, h
        for c in left:
            nodes.append((lo[c], end, hi[c]))
            start = lo[c]
        for c in right:
            nodes.append((start, hi[c], lo[c] - 1))
            end = hi[c]
    return sorted(nodes, key=operator.itemgetter(2))


def decode(terminals: Sequence[int | str], nonterminals: Sequence[int | str]) -> list[int]:
    """Rebuild the heads (1-based, 0 = root) from a well-formed per-word tag sequence. O(n).

    Stack machine of docs/design.md §1: tl pushes a leaf; tr fills the open right slot of the top;
    nl wraps the top as the left child of a new node; nr does so and plugs the new node into the
    open slot of the item below. Each stack item below the top keeps the chain of its open nodes
    (left child's lexical head, head side); filling the innermost slot resolves the chain into arcs.
    Raises InvalidTagsError on ill-formed input (use ``constrained_decode`` for predictions).
    """
    if hasattr(terminals, "tolist"):  # numpy / torch
        terminals = terminals.tolist()
    if hasattr(nonterminals, "tolist"):
        nonterminals = nonterminals.tolist()
    n = len(terminals)
    if n == 0 or len(nonterminals) != n:
        raise InvalidTagsError(
            f"need one (terminal, non-terminal) pair per word, got {n} and {len(nonterminals)}"
        )
    if terminals and isinstance(terminals[0], str):
        terminals = terminal_ids(terminals)
    if nonterminals and isinstance(nonterminals[0], str):
        nonterminals = nonterminal_ids(nonterminals)
    heads = [0] * n
    stack: list[list[tuple[int, int]]] = []  # incomplete items: outer->inner open nodes
    last = n - 1
    for i in range(n):
        t = terminals[i]
        w = i + 1
        if t == TL:
            cur = w
        elif t == TR:
            if not stack:
                raise InvalidTagsError(f"word {w}: 'tr' with no open slot (stack depth 0)")
            cur = w
            for left, head_right in reversed(stack.pop()):
                if head_right:
                    heads[left - 1] = cur
                else:
                    heads[cur - 1] = left
                    cur = left
        else:
            raise InvalidTagsError(f"word {w}: terminal id {t!r} not in 0..{N_TERMINALS - 1}")
        nt = nonterminals[i]
        if i == last:
            if nt != EOS:
                raise InvalidTagsError(f"last word {w}: non-terminal must be 'eos', got {nt!r}")
            break
        if nt in (NL_L, NL_R):
            stack.append([(cur, nt & 1)])
        elif nt in (NR_L, NR_R):
            if not stack:
                raise InvalidTagsError(f"word {w}: '{NONTERMINALS[nt]}' needs stack depth >= 2")
            stack[-1].append((cur, nt & 1))
        else:
            name = NONTERMINALS[nt] if nt in range(N_NONTERMINALS) else nt
            raise InvalidTagsError(f"word {w}: non-terminal {name!r} is not allowed before the last word")
    if stack:
        raise InvalidTagsError(f"{len(stack)} unfinished subtree(s) at the end: final stack depth must be 1")
    heads[cur - 1] = 0
    return heads


def stack_depths(terminals: Sequence[int], nonterminals: Sequence[int]) -> list[int]:
    """Stack depth after each word's pair (tl +1, nr -1, tr and nl 0); the last is 1 if well formed."""
    depth = 0
    out = []
    for t, nt in zip(terminals, nonterminals, strict=True):
        depth += 1 if t == TL else 0
        depth -= 1 if nt in (NR_L, NR_R) else 0
        out.append(depth)
    return out


def is_well_formed(terminals: Sequence[int], nonterminals: Sequence[int]) -> bool:
    """True iff ``decode`` accepts the sequence (the depth constraints of docs/design.md §1 hold)."""
    try:
        decode(terminals, nonterminals)
    except InvalidTagsError:
        return False
    return True


def _as_2d(scores: Any, width: int, what: str) -> Any:
    import numpy as np

    if hasattr(scores, "detach"):  # torch tensor, without importing torch here
        scores = scores.detach().float().cpu().numpy()
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != width:
        raise ValueError(f"{what} scores must have shape [n, {width}], got {tuple(arr.shape)}")
    return arr


def constrained_decode(
    terminal_scores: Any, nonterminal_scores: Any, max_depth: int = DEFAULT_MAX_DEPTH
) -> tuple[list[int], list[int], list[int]]:
    """Best well-formed tag sequence under per-word scores, and its tree: (terminals, nonterminals, heads).

    ``terminal_scores`` [n, 2] and ``nonterminal_scores`` [n, 5] are log-probabilities or logits
    (numpy, torch or nested lists). Every path picks exactly one terminal and one non-terminal per
    word, so a per-row log-softmax adds the same constant to every path: logits and log-probs give
    the same answer. Viterbi over the stack depth (docs/design.md §1): start at 0; tl +1 (at most
    ``max_depth``), tr needs depth >= 1; after a terminal nl keeps the depth, nr needs >= 2 and
    subtracts 1; eos is forced on the last word, banned elsewhere; the final depth is exactly 1.
    Cost O(n * max_depth). A depth-1 path always exists, so a tree is always returned.
    """
    ts = _as_2d(terminal_scores, N_TERMINALS, "terminal")
    ns = _as_2d(nonterminal_scores, N_NONTERMINALS, "non-terminal")
    n = ts.shape[0]
    if n == 0 or ns.shape[0] != n:
        raise ValueError(f"need scores for the same n >= 1 words, got {n} and {ns.shape[0]}")
    return constrained_decode_batch(ts[None], ns[None], [n], max_depth)[0]


def constrained_decode_batch(
    terminal_scores: Any, nonterminal_scores: Any, lengths: Sequence[int], max_depth: int = DEFAULT_MAX_DEPTH
) -> list[tuple[list[int], list[int], list[int]]]:
    """``constrained_decode`` for a padded batch: scores [B, N, 2] and [B, N, 5] (numpy), sentence
    b using its first ``lengths[b]`` rows. One Viterbi step per word position serves the whole
    batch (vectorised over sentences and depths), which is what makes tagging a corpus cheap."""
    import numpy as np

    ts = np.asarray(terminal_scores, dtype=np.float64)
    ns = np.asarray(nonterminal_scores, dtype=np.float64)
    want_t, want_n = (*ts.shape[:2], N_TERMINALS), (*ts.shape[:2], N_NONTERMINALS)
    if ts.ndim != 3 or ts.shape != want_t or ns.shape != want_n:
        raise ValueError(f"need scores [B, N, 2] and [B, N, 5], got {ts.shape} and {ns.shape}")
    B, N = ts.shape[:2]
    if len(lengths) != B or any(not 1 <= int(k) <= N for k in lengths):
        raise ValueError(f"need {B} lengths in 1..{N}, got {list(lengths)}")
    if max_depth < 1:
        raise ValueError("max_depth must be >= 1")
    # -inf / NaN scores become a large finite penalty so that every path keeps a finite score and
    # the depth-1 path (tl nl, tr nl, ..., tr eos) guarantees an answer; -inf marks illegal moves only
    ts = np.nan_to_num(ts, nan=-1e9, neginf=-1e9, posinf=1e9)
    ns = np.nan_to_num(ns, nan=-1e9, neginf=-1e9, posinf=1e9)
    neg = -math.inf
    size = max_depth + 1
    # best non-terminal of each side per word (the head suffix does not change the depth)
    nl_best = np.where(ns[..., NL_R] > ns[..., NL_L], NL_R, NL_L)
    nr_best = np.where(ns[..., NR_R] > ns[..., NR_L], NR_R, NR_L)
    nl_score = np.maximum(ns[..., NL_L], ns[..., NL_R])[..., None]
    nr_score = np.maximum(ns[..., NR_L], ns[..., NR_R])[..., None]
    v = np.full((B, size), neg)
    v[:, 0] = 0.0
    term_bp = np.zeros((N, B, size), dtype=bool)  # False: tl (came from depth d-1), True: tr (from d)
    nt_bp = np.zeros((N, B, size), dtype=bool)  # False: nl (from d), True: nr (from d+1)
    via_tl = np.full((B, size), neg)
    via_nr = np.full((B, size), neg)
    for i in range(N):
        # terminal: a[d] = max(v[d-1] + tl, v[d] + tr), d >= 1
        via_tl[:, 1:] = v[:, :-1] + ts[:, i, TL, None]
        via_tr = v + ts[:, i, TR, None]
        via_tr[:, 0] = neg
        use_tr = via_tr > via_tl
        a = np.where(use_tr, via_tr, via_tl)
        # cells that stay -inf are unreachable; the backtrack from a[1] only visits finite ones
        term_bp[i] = use_tr
        if i == N - 1:
            break
        # non-terminal: b[d] = max(a[d] + nl, a[d+1] + nr), d >= 1 (rows past a sentence's end
        # keep being computed; its backtrack never reads them)
        via_nl = a + nl_score[:, i]
        via_nl[:, 0] = neg
        via_nr[:, 1:-1] = a[:, 2:] + nr_score[:, i]
        use_nr = via_nr > via_nl
        v = np.where(use_nr, via_nr, via_nl)
        nt_bp[i] = use_nr
    out = []
    for b, n in enumerate(int(k) for k in lengths):
        terms = [0] * n
        nts = [EOS] * n
        tb, nb = term_bp[:n, b].tolist(), nt_bp[:n, b].tolist()
        nlb, nrb = nl_best[b, :n].tolist(), nr_best[b, :n].tolist()
        d = 1
        for i in range(n - 1, -1, -1):
            if i < n - 1:
                if nb[i][d]:
                    nts[i] = nrb[i]
                    d += 1
                else:
                    nts[i] = nlb[i]
            if tb[i][d]:
                terms[i] = TR
            else:
                terms[i] = TL
                d -= 1
        out.append((terms, nts, decode(terms, nts)))
    return out
