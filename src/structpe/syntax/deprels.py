"""The DEPREL label inventory of the SiPE DEPREL priors (SiPE App. E, table 12) and its alignment.

One fixed inventory for every parser: the 37 universal relations of Universal Dependencies v2
(``UD_RELATIONS``; id = position in that tuple). Why one inventory and why UD:

* a model's E_D table then has one size (``n_deprels = 37``, what the roberta DEPREL recipes set)
  and one meaning whichever parser prepared its data, so recipes need no per-parser variants and
  GLUE features, built with the pre-training parser, use the same ids;
* the gold trees (UD EWT) and the trained hexatagger (learned on them) already speak UD; their
  subtypes (``nmod:poss``, ``obl:tmod``, ``aux:pass``) are folded into the universal relation,
  which is also the granularity the paper quotes ("40 labels such as nsubj and dobj").

spaCy's English models use ClearNLP labels (45 of them). ``CLEARNLP_TO_UD`` maps each to the UD
relation of the same grammatical function, following UD's own English conversion (dobj -> obj,
nsubjpass -> nsubj (nsubj:pass), poss -> nmod (nmod:poss), prt -> compound (compound:prt), relcl ->
acl (acl:relcl), neg -> advmod, npadvmod -> obl (obl:unmarked), ...). The mapping is per label: the arc
stays the one spaCy built, so where ClearNLP and UD choose different heads (copulas, prepositional
phrases) the label names the word's function, not an arc UD would draw: a preposition (``prep``)
becomes ``case``, its object (``pobj``) ``obl``, a predicate nominal or adjective of a copula
(``attr``, ``acomp``, ``oprd``) ``xcomp``. That loses a few ClearNLP distinctions (dobj / dative /
attr) in exchange for one table; a label outside both inventories maps to ``dep`` (UD's
"unspecified dependency") and is counted, never dropped.

Alignment: a word's DEPREL id goes on its first subword, exactly where its hexatags go, and -100
everywhere else -- so a row of ``deprel_ids`` has -100 at the same positions as ``terminal_ids``.
"""

from __future__ import annotations

from collections.abc import Sequence

from structpe.syntax.hexatags import IGNORE_INDEX

__all__ = [
    "CLEARNLP_TO_UD",
    "DEPREL_INVENTORY",
    "N_DEPRELS",
    "UD_RELATIONS",
    "deprel_ids",
    "spread_word_labels",
    "ud_labels",
    "universal_relation",
]

DEPREL_INVENTORY = "ud2-universal"
# Universal Dependencies v2 universal relations (https://universaldependencies.org/u/dep/), in
# alphabetical order; the order is the id and is part of a trained model: never reorder
UD_RELATIONS: tuple[str, ...] = (
    "acl", "advcl", "advmod", "amod", "appos", "aux", "case", "cc", "ccomp", "clf", "compound",
    "conj", "cop", "csubj", "dep", "det", "discourse", "dislocated", "expl", "fixed", "flat",
    "goeswith", "iobj", "list", "mark", "nmod", "nsubj", "nummod", "obj", "obl", "orphan",
    "parataxis", "punct", "reparandum", "root", "vocative", "xcomp",
)
N_DEPRELS = len(UD_RELATIONS)
_ID = {name: i for i, name in enumerate(UD_RELATIONS)}

# spaCy's English (ClearNLP) labels whose name is not already a UD relation (module docstring), as
# the UD label with its English subtype where UD's English treebanks use one (``nsubj:pass``);
# ``universal_relation`` folds the subtype away
CLEARNLP_TO_UD: dict[str, str] = {
    "ROOT": "root",
    "acomp": "xcomp",
    "agent": "obl:agent",
    "attr": "xcomp",
    "auxpass": "aux:pass",
    "csubjpass": "csubj:pass",
    "dative": "iobj",
    "dobj": "obj",
    "intj": "discourse",
    "meta": "dep",
    "neg": "advmod",
    "nn": "compound",
    "npadvmod": "obl:unmarked",  # UD's current name of obl:npmod (what EWT dev uses)
    "nsubjpass": "nsubj:pass",
    "oprd": "xcomp",
    "pcomp": "advcl",
    "pobj": "obl",  # nmod where the preposition modifies a noun (ud_labels)
    "poss": "nmod:poss",
    "preconj": "cc:preconj",
    "predet": "det:predet",
    "prep": "case",
    "prt": "compound:prt",
    "quantmod": "advmod",
    "relcl": "acl:relcl",
}
# ClearNLP labels of nominal words: a preposition attached to one of them starts a noun modifier
# (UD ``nmod``), elsewhere an oblique (``obl``)
_CLEARNLP_NOMINALS = frozenset(
    {"nsubj", "nsubjpass", "dobj", "pobj", "attr", "appos", "dative", "oprd", "poss", "compound", "nn",
     "npadvmod", "nmod"}
)


def ud_labels(
    deprels: Sequence[str], heads: Sequence[int], words: Sequence[str]
) -> tuple[list[str], bool]:
    """The UD labels (with English subtypes) of a sentence's labels, for CoNLL-U; and whether any
    label was a ClearNLP one (spaCy's English models). UD labels pass unchanged; the object of a
    preposition (``pobj``) is ``nmod`` when the preposition hangs on a nominal, else ``obl``; the
    infinitive's "to" (ClearNLP ``aux``) is UD's ``mark``. On 101 sentences of UD English EWT dev
    (spaCy's parse of the gold words) every label is then a UD label and 92% of the arcs with the
    gold head carry the gold label (66% before mapping): tests/syntax/test_conllu_labels.py."""
    out, mapped = [], any(label in CLEARNLP_TO_UD for label in deprels)
    for i, label in enumerate(deprels):
        ud = CLEARNLP_TO_UD.get(label)
        if ud is None:
            out.append("mark" if mapped and label == "aux" and words[i].lower() == "to" else label)
            continue
        if label == "pobj" and 0 < heads[i] <= len(heads):
            prep = heads[i] - 1
            above = heads[prep] - 1
            if 0 <= above < len(deprels) and deprels[above] in _CLEARNLP_NOMINALS:
                ud = "nmod"
        out.append(ud)
    return out, mapped


def universal_relation(label: str) -> str | None:
    """The UD universal relation of a UD (``nmod:poss``) or ClearNLP (``dobj``) label; None if unknown."""
    base = CLEARNLP_TO_UD.get(label, label).split(":", 1)[0].lower()
    return base if base in _ID else None


def deprel_ids(labels: Sequence[str]) -> tuple[list[int], int]:
    """Word labels -> inventory ids, and how many were unknown (those get ``dep``)."""
    out, unknown = [], 0
    for label in labels:
        rel = universal_relation(label)
        if rel is None:
            unknown += 1
            rel = "dep"
        out.append(_ID[rel])
    return out, unknown


def spread_word_labels(tag_row: Sequence[int], word_labels: Sequence[int], start: int = 0) -> list[int]:
    """Put ``word_labels[start:]``, in order, on the positions of ``tag_row`` that carry a tag.

    ``tag_row`` is an aligned hexatag row (``terminal_ids``): its non -100 positions are the words'
    first subwords in word order, so the result is aligned exactly like the tags. Raises
    ValueError when there are fewer labels left than tagged positions.
    """
    out = [IGNORE_INDEX] * len(tag_row)
    k = start
    for j, tag in enumerate(tag_row):
        if tag != IGNORE_INDEX:
            if k >= len(word_labels):
                have = len(word_labels) - start
                raise ValueError(f"{k - start + 1} tagged positions but only {have} labels")
            out[j] = word_labels[k]
            k += 1
    return out
