"""Dependency-tree addresses in the LIS form, read causally from hexatags (docs/lis.md, "Dependency trees").

The LIS structure of a dependency tree: each arc (h, d) is an instance e with two endpoints, h in
role HEAD_l and d in role DEP_l, l the arc's relation label (LIS §4.1, item 3 with labelled roles).
Rotary factors (Prop. 4.7) give an endpoint the address A = R_s R_e. A decoder token is a word, and
a word takes part in several instances (its own arc and its dependents' arcs), so its endpoints
must share the one rotation of its query and key. Requiring that (our gluing choice) and the
journey form P(j->i) = A(i)^-1 A(j) (Thm. 4.4) fixes the instance factor of arc (h, d) to
R_e = R_HEAD_l^-1 A(h), hence

    A(d) = A(h) R_HEAD_l^-1 R_DEP_l = A(h) R_l,      theta(d) = theta(h) + delta_l   (angles add)

and the journey between two words is the product of delta_l along the tree path between them
(up-arcs inverted). Only delta_l = rho_DEP_l - rho_HEAD_l is identifiable: one learned angle per
frequency pair, head and label (``TreeAddress``, one table per layer, near zero at init).

Causality. Word w's address is fixed when w is read, from the arcs that the tags of words 1..w
determine (``structpe.syntax.hexatag_prefix``), so a key's rotation never changes later and the
rotated keys can be cached. Of those arcs it uses one, its *anchor*:

* its own arc, when its head h < w is already determined:      theta(w) = theta(h) + delta_l(w)
* else its nearest left dependent c (always determined at w):   theta(w) = theta(c) - delta_l(c)
* else nothing (no arc to an earlier word is known):            theta(w) = 0.

The anchor arcs form a forest in the tree, and along it every journey is the exact tree path;
between words the forest does not connect (an arc settled after both were read, e.g. a left
dependent's own arc to a head that is not its nearest), the journey is not a tree path. Labels are
2 + the dependent's DEPREL id where one is given, else the arc's direction (0: the dependent is
left of its head, 1: right), so ``n_labels`` = 2 + the DEPREL table's size. Positions without
tags (continuation subwords, BOS, padding) keep the address of the last word before them (0
before the first); ``eos`` ends a sentence, so packed rows restart their trees.

``tree_paths`` returns theta's coefficients: per position the signed count of each label on its
anchor chain, [B, L, n_labels]; ``TreeAddress`` turns them into angles per head.

Joined components (``lis_tree2``, ``joined_tree_paths``). A word's address may also use arcs that
become known later, provided every score between positions i <= j uses only arcs the tags of
words 1..j determine. The arcs determined so far form a forest inside the tree (they are never
withdrawn, ``structpe.syntax.hexatag_prefix``). Within a component, addresses relative to the
component's top word make every journey the exact labelled tree path; when an arc joins two
components, the smaller one is re-addressed relative to the other (theta(d) = theta(h) + delta_l
across the new arc). Differences inside a component never change afterwards, so the addresses at
the last position, taken for every pair that is *joined* at its query's time (same component
when the query's tags are read), give the same journeys as the addresses of that time: the score
is the LISformer's two-term score, the tree term for joined pairs and the plain content term
(no rotation) for the rest. Every arc is joined once both of its words are read, unless it waits
for a later ``-L`` node or ``tr`` (docs/lis.md measures the share).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from structpe.modules.init_rules import apply_init_rule, set_init
from structpe.syntax.hexatag_prefix import PrefixReader
from structpe.syntax.hexatags import EOS, IGNORE_INDEX

__all__ = ["TreeAddress", "joined_tree_paths", "tree_paths"]


def _row_paths(terms: list[int], nts: list[int], deprels: list[int] | None, n_labels: int) -> list[list[int]]:
    """One row's signed label counts per position (module docstring)."""
    out: list[list[int]] = []
    zero = [0] * n_labels
    last = zero
    reader = PrefixReader()
    pos_of: dict[int, int] = {}  # word (1-based, this sentence) -> its position in the row
    word = 0
    for p, (t, nt) in enumerate(zip(terms, nts, strict=True)):
        if t == IGNORE_INDEX:
            out.append(last)
            continue
        word += 1
        pos_of[word] = p
        arcs = reader.read(word, t, nt)
        head = next((h for h, d in arcs if d == word and 0 < h < word), None)  # own arc, head earlier
        deps = [d for h, d in arcs if h == word and d < word]  # left dependents
        if head is not None:
            anchor, arc, sign = head, (head, word), +1
        elif deps:
            anchor, arc, sign = max(deps), (word, max(deps)), -1
        else:
            anchor = None
        if anchor is None:
            last = zero
        else:  # the anchor arc's label: 2 + its dependent's DEPREL id, else its direction
            dr = deprels[pos_of[arc[1]]] if deprels is not None else IGNORE_INDEX
            last = list(out[pos_of[anchor]])
            last[2 + dr if dr >= 0 else int(arc[1] > arc[0])] += sign
        out.append(last)
        if nt == EOS:  # eos: the next word starts a new tree
            word, pos_of = 0, {}
    return out


def tree_paths(
    terminal_ids: torch.Tensor,
    nonterminal_ids: torch.Tensor,
    deprel_ids: torch.Tensor | None,
    n_labels: int,
) -> torch.Tensor:
    """Signed label counts of each position's anchor chain, float [B, L, n_labels] (tags [B, L],
    -100 where a position has none). Position p's row depends on the tags at positions <= p only."""
    terms, nts = terminal_ids.tolist(), nonterminal_ids.tolist()
    deps = deprel_ids.tolist() if deprel_ids is not None else [None] * len(terms)
    rows = [_row_paths(t, n, d, n_labels) for t, n, d in zip(terms, nts, deps, strict=True)]
    return torch.tensor(rows, dtype=torch.float32, device=terminal_ids.device).reshape(
        *terminal_ids.shape, n_labels
    )


def _row_joined(
    terms: list[int], nts: list[int], deprels: list[int] | None, n_labels: int, n_new: int
) -> tuple[np.ndarray, np.ndarray]:
    """One row of ``joined_tree_paths``: label counts [K, n_labels] relative to each component's
    top word after the last position, and joined [n_new, K] for the last ``n_new`` queries.

    Words are numbered across the row; arcs never cross a sentence, so whether words v <= w are
    joined at w's time is recorded per sentence, one row of ``same`` per word (Python lists: a
    sentence is short, and NumPy calls per word cost more than the work)."""
    k = len(terms)
    counts: list[list[float]] = []  # per word, relative to its component's top word
    comp: list[int] = []  # per word, its component (the id of one of its words)
    word_pos: list[int] = []  # per word, its position in the row
    members: dict[int, list[int]] = {}
    same: list[tuple[int, list[bool]]] = []  # per word w: its sentence's first word, who is joined with w
    owner = np.full(k, -1, dtype=np.int64)  # the word a position belongs to (untagged: the last word)
    reader = PrefixReader()
    pos_of: dict[int, int] = {}  # word in this sentence (1-based) -> its word number in the row
    word, first = 0, 0
    for p, (t, nt) in enumerate(zip(terms, nts, strict=True)):
        if t != IGNORE_INDEX:
            word += 1
            w = len(comp)
            pos_of[word] = w
            comp.append(w)
            word_pos.append(p)
            members[w] = [w]
            counts.append([0.0] * n_labels)
            for h, d in reader.read(word, t, nt):
                if h == 0:  # the root arc joins nothing
                    continue
                hw, dw = pos_of[h], pos_of[d]
                a, b = comp[hw], comp[dw]
                if a == b:  # only ill-formed tags (a decoder's own) can join a component twice
                    continue
                dr = deprels[word_pos[dw]] if deprels is not None else IGNORE_INDEX
                label = 2 + dr if dr >= 0 else int(d > h)  # the dependent's DEPREL, else the direction
                # theta(d) = theta(h) + delta_l: re-address the smaller side relative to the other
                if len(members[a]) >= len(members[b]):
                    moved, into, sign, base, other = b, a, 1.0, counts[hw], counts[dw]
                else:
                    moved, into, sign, base, other = a, b, -1.0, counts[dw], counts[hw]
                shift = [x - y for x, y in zip(base, other, strict=True)]
                shift[label] += sign
                for m in members[moved]:
                    counts[m] = [c + s for c, s in zip(counts[m], shift, strict=True)]
                    comp[m] = into
                members[into] += members.pop(moved)
            same.append((first, [comp[v] == comp[w] for v in range(first, w + 1)]))
            if nt == EOS:  # eos: the next word starts a new tree
                word, pos_of, first = 0, {}, w + 1
        owner[p] = len(comp) - 1
    n_words = len(comp)
    joined_words = np.zeros((max(n_words, 1), max(n_words, 1)), dtype=bool)
    for w, (start, row) in enumerate(same):
        joined_words[w, start : w + 1] = row
    table = np.zeros((max(n_words, 1), n_labels))
    if counts:
        table[:n_words] = counts
    paths = np.where(owner[:, None] >= 0, table[np.maximum(owner, 0)], 0.0)
    queries = owner[k - n_new :]
    pair = joined_words[np.maximum(queries, 0)][:, np.maximum(owner, 0)]  # [n_new, K]
    causal = np.arange(k)[None, :] <= np.arange(k - n_new, k)[:, None]
    return paths, pair & (queries[:, None] >= 0) & (owner[None, :] >= 0) & causal


def joined_tree_paths(
    terminal_ids: torch.Tensor,
    nonterminal_ids: torch.Tensor,
    deprel_ids: torch.Tensor | None,
    n_labels: int,
    n_new: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``lis_tree2`` (module docstring): label counts of every position relative to its component's
    top word once all K positions are read, float [B, K, n_labels], and which keys each of the last
    ``n_new`` queries reaches through arcs determined by its own time, bool [B, n_new, K]. For a
    joined pair the difference of the two rows is the exact tree path; whether a pair is joined
    depends on the tags up to its query only."""
    terms, nts = terminal_ids.tolist(), nonterminal_ids.tolist()
    deps = deprel_ids.tolist() if deprel_ids is not None else [None] * len(terms)
    # each distinct row once: the particle estimator's rows repeat (resampled particles share their
    # prefix; 24% of the rows were distinct in a BLiMP run), and a row's cost is a Python loop
    # over its whole prefix
    done: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    rows = []
    for t, n, d in zip(terms, nts, deps, strict=True):
        key = (tuple(t), tuple(n), None if d is None else tuple(d))
        if key not in done:
            done[key] = _row_joined(t, n, d, n_labels, n_new)
        rows.append(done[key])
    dev = terminal_ids.device
    paths = torch.from_numpy(np.stack([r[0] for r in rows])).to(dev, torch.float32)
    joined = torch.from_numpy(np.stack([r[1] for r in rows])).to(dev)
    return paths.reshape(*terminal_ids.shape, n_labels), joined.reshape(terminal_ids.shape[0], n_new, -1)


class TreeAddress(nn.Module):
    """delta_l per layer: theta = paths @ delta, [B, L, n_labels] -> angles [B, H, L, d_head/2].

    One bias-free Linear per layer in ``layers`` (from the entry layer on), N(0, ``init_std``) by
    its init rule, so a model starts as if every address were zero (plain relative attention).
    """

    def __init__(self, n_labels: int, n_heads: int, d_head: int, layers: list[int], init_std: float):
        super().__init__()
        if d_head % 2:
            raise ValueError(f"tree addresses rotate frequency pairs: d_head must be even, got {d_head}")
        self.n_heads, self.n_pairs = n_heads, d_head // 2
        width = n_heads * self.n_pairs
        self.delta = nn.ModuleDict({str(i): nn.Linear(n_labels, width, bias=False) for i in layers})
        for lin in self.delta.values():
            set_init(lin, "normal", init_std)
            apply_init_rule(lin)

    def has_layer(self, layer: int) -> bool:
        return str(layer) in self.delta

    def forward(self, paths: torch.Tensor, layer: int) -> torch.Tensor:
        B, L, _ = paths.shape
        w = self.delta[str(layer)].weight
        # float32 angles whatever the autocast dtype (float64 for a float64 model), as apply_rotary
        wide = torch.float64 if w.dtype == torch.float64 else torch.float32
        with torch.autocast(paths.device.type, enabled=False):
            theta = paths.to(wide) @ w.to(wide).t()
        return theta.view(B, L, self.n_heads, self.n_pairs).transpose(1, 2)
