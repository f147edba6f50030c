"""A hexatagged sentence and its JSON-lines form (docs/design.md §6: ``structpe tag`` output).

In Python the tags are canonical ids (what the prior and the alignment consume); in JSON they are
the tag names of docs/design.md §1 (``"tl"``, ``"nl-R"``, ...), and ``heads`` are those of the tree that
was actually tagged (after projectivisation, if any; ``lifted_arcs`` says how many arcs moved).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from structpe.syntax.hexatags import (
    InvalidTagsError,
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
            raise InvalidTagsError(f"sentence {self.sent_id!r}: {n} words but {bad}")
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

    def check(self, canonical: bool = False) -> None:
        """Raise InvalidTagsError unless the tags decode to ``heads`` (the docs/design.md §1 round trip);
        with ``canonical``, also unless they are the tags ``encode`` gives that tree."""
        if not self.words:
            raise InvalidTagsError(f"sentence {self.sent_id!r}: no words")
        got = decode(self.terminals, self.nonterminals)
        if got != list(self.heads):
            w = next((i for i, (a, b) in enumerate(zip(got, self.heads, strict=True), 1) if a != b), 1)
            raise InvalidTagsError(
                f"sentence {self.sent_id!r}: the tags decode to head {got[w - 1]} for word {w}, "
                f"but heads say {self.heads[w - 1]!r} (tags decode to {got})"
            )
        if canonical:
            t, nt = encode(got)
            if (t, nt) != (self.terminals, self.nonterminals):
                mine = list(zip(self.terminals, self.nonterminals, strict=True))
                w = next(i for i, pair in enumerate(zip(t, nt, strict=True)) if pair != mine[i])
                raise InvalidTagsError(
                    f"sentence {self.sent_id!r}: word {w + 1}: the tags are well formed but not the "
                    f"canonical ones for their tree (encode gives {terminal_names([t[w]])[0]}/"
                    f"{nonterminal_names([nt[w]])[0]}); re-tag the text with `structpe tag`"
                )

    def to_dict(self, text: bool = False) -> dict[str, Any]:
        """The JSON fields; ``text`` puts ``meta["text"]`` (the raw sentence) first-level as ``text``,
        the form ``structpe tag`` writes (readers take either)."""
        d: dict[str, Any] = {}
        if self.sent_id is not None:
            d["sent_id"] = self.sent_id
        meta = dict(self.meta)
        if text and "text" in meta:
            d["text"] = meta.pop("text")
        d["words"] = list(self.words)
        d["heads"] = list(self.heads)
        d["terminals"] = self.terminal_names
        d["nonterminals"] = self.nonterminal_names
        if self.deprels is not None:
            d["deprels"] = list(self.deprels)
        d["lifted_arcs"] = self.lifted_arcs
        if meta:
            d["meta"] = meta
        return d

    def to_json(self, text: bool = False) -> str:
        """One JSON line with the docs/design.md §6 fields; tags as names (``text``: see ``to_dict``)."""
        return json.dumps(self.to_dict(text), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaggedSentence:
        """A sentence read back from JSON, validated as a tree (see ``check``).

        ``text`` (first-level, or in ``meta``) is the raw sentence; it lands in ``meta["text"]``.
        ``heads`` may be left out (they are decoded from the tags); when present they must be the
        tree the tags decode to. The tags need not be canonical (what ``encode`` emits): ``decode``
        accepts every well-formed sequence, the joint and marginal likelihoods are distributions
        over all of them (docs/likelihoods.md), and a model reads the tags it is given. Callers
        that need canonical tags use ``check(canonical=True)``.
        """
        if not isinstance(d, dict):
            raise InvalidTagsError(f"expected a JSON object per line, got {type(d).__name__}")
        missing = [k for k in ("words", "terminals", "nonterminals") if k not in d]
        if missing:
            raise InvalidTagsError(f"tagged sentence {d.get('sent_id')!r} lacks fields {missing}")
        for key in ("words", "heads", "terminals", "nonterminals", "deprels"):
            if d.get(key) is not None and not isinstance(d[key], list):
                raise InvalidTagsError(f"sentence {d.get('sent_id')!r}: {key!r} must be a list")
        if not isinstance(d["words"], list):
            raise InvalidTagsError(f"sentence {d.get('sent_id')!r}: 'words' must be a list")
        bad = next((i for i, w in enumerate(d["words"], 1) if not isinstance(w, str) or not w.strip()), None)
        if bad is not None:
            raise InvalidTagsError(
                f"sentence {d.get('sent_id')!r}: word {bad} is {d['words'][bad - 1]!r}; "
                "words must be non-empty strings"
            )
        meta = d.get("meta") or {}
        if not isinstance(meta, dict):
            raise InvalidTagsError(f"sentence {d.get('sent_id')!r}: 'meta' must be an object")
        text = d.get("text", meta.get("text"))
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise InvalidTagsError(f"sentence {d.get('sent_id')!r}: 'text' must be a non-empty string")
        decoded = decode(d["terminals"], d["nonterminals"]) if d["terminals"] else None
        sent = cls(
            words=list(d["words"]),
            heads=list(d["heads"]) if d.get("heads") is not None else decoded or [],
            terminals=d["terminals"],
            nonterminals=d["nonterminals"],
            deprels=d.get("deprels"),
            sent_id=d.get("sent_id"),
            lifted_arcs=int(d.get("lifted_arcs", 0)),
            meta=dict(meta, **({"text": text} if text is not None else {})),
        )
        sent.check()
        return sent

    @classmethod
    def from_json(cls, line: str) -> TaggedSentence:
        """Inverse of ``to_json`` (tags may be names or ids)."""
        return cls.from_dict(json.loads(line))
