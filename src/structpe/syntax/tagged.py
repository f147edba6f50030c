"""A hexatagged sentence and its JSON-lines form (DESIGN §6: ``structpe tag`` output).

In Python the tags are canonical ids (what the prior and the alignment consume); in JSON they are
the tag names of DESIGN §1 (``"tl"``, ``"nl-R"``, ...), and ``heads`` are those of the tree that
was actually tagged (after projectivisation, if any; ``lifted_arcs`` says how many arcs moved).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from structpe.syntax.hexatags import (
    decode,
    encode,
    nonterminal_ids,
    nonterminal_names,
    terminal_ids,
    terminal_names,
)

__all__ = ["TaggedSentence"]


@dataclass
class TaggedSentence:
    """Words with the (projective) tree that was tagged and its per-word hexatag ids."""

    words: list[str]
    heads: list[int]
    terminals: list[int]
    nonterminals: list[int]
    deprels: list[str] | None = None
    sent_id: str | None = None
    lifted_arcs: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.words)
        lengths = {
            "heads": len(self.heads),
            "terminals": len(self.terminals),
            "nonterminals": len(self.nonterminals),
        }
        if self.deprels is not None:
            lengths["deprels"] = len(self.deprels)
        bad = {k: v for k, v in lengths.items() if v != n}
        if bad:
            raise ValueError(f"sentence {self.sent_id!r}: {n} words but {bad}")
        # accept names (e.g. read back from JSON) and store canonical ids
        self.terminals = terminal_ids(self.terminals)
        self.nonterminals = nonterminal_ids(self.nonterminals)

    @classmethod
    def from_heads(
        cls,
        words: Sequence[str],
        heads: Sequence[int],
        deprels: Sequence[str] | None = None,
        sent_id: str | None = None,
        lifted_arcs: int = 0,
    ) -> TaggedSentence:
        """Tag a projective tree (raises NonProjectiveError otherwise)."""
        t, nt = encode(heads)
        return cls(list(words), list(heads), t, nt, list(deprels) if deprels is not None else None,
                   sent_id, lifted_arcs)

    def __len__(self) -> int:
        return len(self.words)

    @property
    def terminal_names(self) -> list[str]:
        return terminal_names(self.terminals)

    @property
    def nonterminal_names(self) -> list[str]:
        return nonterminal_names(self.nonterminals)

    def check(self) -> None:
        """Raise ValueError unless the tags decode to ``heads`` (the DESIGN §1 round trip)."""
        got = decode(self.terminals, self.nonterminals)
        if got != list(self.heads):
            raise ValueError(f"sentence {self.sent_id!r}: tags decode to {got}, not heads {self.heads}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.sent_id is not None:
            d["sent_id"] = self.sent_id
        d["words"] = list(self.words)
        d["heads"] = list(self.heads)
        d["terminals"] = self.terminal_names
        d["nonterminals"] = self.nonterminal_names
        if self.deprels is not None:
            d["deprels"] = list(self.deprels)
        d["lifted_arcs"] = self.lifted_arcs
        if self.meta:
            d["meta"] = self.meta
        return d

    def to_json(self) -> str:
        """One JSON line with the DESIGN §6 fields; tags as names."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaggedSentence:
        missing = [k for k in ("words", "heads", "terminals", "nonterminals") if k not in d]
        if missing:
            raise ValueError(f"tagged sentence {d.get('sent_id')!r} lacks fields {missing}")
        return cls(
            words=list(d["words"]),
            heads=[int(h) for h in d["heads"]],
            terminals=d["terminals"],
            nonterminals=d["nonterminals"],
            deprels=d.get("deprels"),
            sent_id=d.get("sent_id"),
            lifted_arcs=int(d.get("lifted_arcs", 0)),
            meta=dict(d.get("meta") or {}),
        )

    @classmethod
    def from_json(cls, line: str) -> TaggedSentence:
        """Inverse of ``to_json`` (tags may be names or ids)."""
        return cls.from_dict(json.loads(line))
