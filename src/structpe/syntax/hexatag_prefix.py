"""Which arcs of a dependency tree the hexatags of its first words determine (docs/lis.md).

Hexatags are a left-to-right linearisation (docs/design.md §1), so a causal decoder at word i has
read the tags of words 1..i: the BHT symbols up to the internal node that follows word i. Reading
them with the stack machine of ``hexatags.decode``, the structure built so far never changes
later (a symbol only fills an open right slot or wraps a finished item), so an arc is known as soon
as both of its words are: the arc of an internal node joins the lexical head of its left child
(finished when the node is made) and that of its right child, which is

* word w itself, when ``tr`` fills the node's slot with leaf w, or
* the left child's head of the first node inside the slot whose head is on its left (``-L``):
  every ``-R`` node between passes the head further in, a ``-L`` node fixes it.

So an open node's arc is settled by the next ``-L`` node appended to its chain (``nl-L`` / ``nr-L``
with the node's item on top) or by the ``tr`` that closes the chain, and not before: until then the
right child's head is any word to come. ``determined_arcs`` returns, per word, the arcs settled by
that word's tags; the root arc (0, root) is settled by ``eos``. Every continuation of the tags that
decodes to a tree contains these arcs, and every arc not yet returned differs between two such
continuations (tests/syntax/test_hexatag_prefix.py checks both against all projective trees of up
to seven words).

The reader accepts any tag sequence without raising (a decoder's own predicted prefixes can be
ill-formed): ``tr`` with no open slot acts as ``tl``, ``nr`` with no item below as ``nl``, and
``eos`` ends the sentence wherever it stands (the next word starts a new tree).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from structpe.syntax.hexatags import EOS, NL_L, NL_R, NR_R, TR

__all__ = ["PrefixReader", "determined_arcs"]


@dataclass
class _Item:
    """An unfinished stack item: its open nodes' (left head, head on the right?) whose arcs wait."""

    waiting: list[tuple[int, bool]] = field(default_factory=list)
    head: int | None = None  # the item's lexical head once an outer -L node (or the filler) fixes it


class PrefixReader:
    """Incremental hexatag reader: ``read(word, t, nt)`` returns the arcs (head, dependent) that
    word ``word``'s tags settle, 1-based words, head 0 for the root. One reader per sentence run;
    after ``eos`` it starts the next tree."""

    def __init__(self) -> None:
        self.stack: list[_Item] = []
        self.cur: int | None = None  # head of the finished subtree that the non-terminal wraps

    def read(self, word: int, terminal: int, nonterminal: int) -> list[tuple[int, int]]:
        arcs: list[tuple[int, int]] = []
        if terminal == TR and self.stack:
            item = self.stack.pop()
            self._settle(item, word, arcs)  # leaf `word` fills the innermost slot
            self.cur = item.head if item.head is not None else word  # all -R: the filler heads it
        else:  # tl (or a tr with no open slot)
            self.cur = word
        if nonterminal == EOS:
            if not self.stack:
                arcs.append((0, self.cur))
            self.stack, self.cur = [], None
            return arcs
        head_right = nonterminal in (NL_R, NR_R)
        if nonterminal in (NL_L, NL_R) or not self.stack:
            item = _Item()
            self.stack.append(item)
        else:  # nr: the new node goes into the open slot of the item below
            item = self.stack[-1]
        if not head_right:
            self._settle(item, self.cur, arcs)  # a -L node fixes the right-child head of the nodes outside it
            if item.head is None:  # the nodes outside it all pass the head in (-R)
                item.head = self.cur
        item.waiting.append((self.cur, head_right))
        return arcs

    @staticmethod
    def _settle(item: _Item, right_head: int, arcs: list[tuple[int, int]]) -> None:
        """Every waiting node of ``item`` gets ``right_head`` as its right child's lexical head."""
        for left, head_right in item.waiting:
            arcs.append((right_head, left) if head_right else (left, right_head))
        item.waiting = []


def determined_arcs(terminals: Sequence[int], nonterminals: Sequence[int]) -> list[list[tuple[int, int]]]:
    """Per word i (0-based list index), the arcs (head, dependent) settled by its tags: their union
    over words 1..i is the part of the tree the tags of words 1..i determine."""
    reader = PrefixReader()
    return [reader.read(w, t, nt) for w, (t, nt) in enumerate(zip(terminals, nonterminals, strict=True), 1)]
