"""Hexatagged sentences as CoNLL-U, the format every parser and treebank tool reads.

The UD columns come from what a sentence knows: FORM from its words, HEAD from the tree that was
tagged (after projectivisation, if any), DEPREL where a parser or treebank gave one (``_``
otherwise) as a UD label: spaCy's English ClearNLP labels (``ROOT``, ``dobj``, ``pobj``) are mapped
(``structpe.syntax.deprels.ud_labels``) and such a sentence says so (``# labels``); LEMMA, UPOS,
XPOS, FEATS and DEPS are ``_``. structpe's own fields go where UD keeps tool-specific data: the
hexatags per word in MISC (``Hexatag=tl|HexatagNT=nl-R``), and per sentence the ``# sent_id``, the
``# text`` and ``# structpe_lifted_arcs`` comments. Serialised by the ``conllu`` package (the same
one ``structpe.syntax.conllu_io`` reads with), so quoting and column order follow its rules, not ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import conllu

from structpe.syntax.deprels import ud_labels
from structpe.syntax.tagged import TaggedSentence

__all__ = ["MISC_NONTERMINAL", "MISC_TERMINAL", "to_conllu", "to_conllu_sentence"]

MISC_TERMINAL = "Hexatag"
MISC_NONTERMINAL = "HexatagNT"


def _text(sent: TaggedSentence) -> str:
    """The sentence's raw text when a parser kept it (``meta["text"]``), else its words joined."""
    text = sent.meta.get("text") if isinstance(sent.meta, dict) else None
    return " ".join(str(text).split()) if text else " ".join(sent.words)


def to_conllu_sentence(sent: TaggedSentence, sent_id: str) -> str:
    """One sentence block (comments + 10-column word lines + the blank line that ends it)."""
    deprels: list[str | None] = [None] * len(sent)
    mapped = False
    if sent.deprels:
        deprels[:], mapped = ud_labels(sent.deprels, sent.heads, sent.words)
    tokens = [
        conllu.models.Token(
            id=i,
            form=word,
            lemma=None,
            upos=None,
            xpos=None,
            feats=None,
            head=head,
            deprel=deprel if deprel and deprel != "_" else None,
            deps=None,
            misc={MISC_TERMINAL: t, MISC_NONTERMINAL: nt},
        )
        for i, (word, head, deprel, t, nt) in enumerate(
            zip(sent.words, sent.heads, deprels, sent.terminal_names, sent.nonterminal_names, strict=True), 1
        )
    ]
    metadata: dict[str, Any] = {"sent_id": sent.sent_id or sent_id, "text": _text(sent)}
    if mapped:
        metadata["labels"] = "ud, mapped from clearnlp"
    if sent.lifted_arcs:
        metadata["structpe_lifted_arcs"] = str(sent.lifted_arcs)
    return conllu.models.TokenList(tokens, metadata=metadata).serialize()


def to_conllu(sentences: Iterable[TaggedSentence], start: int = 1) -> Iterable[str]:
    """Blocks of ``sentences``; a sentence without ``sent_id`` gets its running number."""
    for i, sent in enumerate(sentences, start):
        yield to_conllu_sentence(sent, str(i))
