"""Syntax front end of SiPE: dependency trees -> hexatags (docs/design.md §1, §6).

* ``hexatags``   -- tag inventory, ``encode`` / ``decode``, ``constrained_decode`` for predictions
* ``trees``      -- tree validation, projectivity, arc-lifting projectivisation
* ``conllu_io``  -- validated CoNLL-U reading (plain or gzipped)
* ``tagged``     -- ``TaggedSentence`` and its JSON-lines form
* ``alignment``  -- word tags -> first-subword tag ids for Hugging Face fast tokenizers
* ``parsers``    -- ``Parser`` interface, ``gold`` and ``spacy`` parsers, ``get_parser`` registry
* ``commands``   -- the ``structpe tag`` command

Heavy dependencies (spaCy, transformers) are imported only by the modules that need them.
"""

from structpe.syntax.conllu_io import ConlluError, ConlluSentence, read_conllu
from structpe.syntax.hexatags import (
    NONTERMINALS,
    TERMINALS,
    InvalidTagsError,
    constrained_decode,
    decode,
    encode,
)
from structpe.syntax.tagged import TaggedSentence
from structpe.syntax.trees import (
    InvalidTreeError,
    NonProjectiveError,
    check_tree,
    is_projective,
    projectivize,
    projectivize_with_count,
)

__all__ = [
    "NONTERMINALS",
    "TERMINALS",
    "ConlluError",
    "ConlluSentence",
    "InvalidTagsError",
    "InvalidTreeError",
    "NonProjectiveError",
    "TaggedSentence",
    "check_tree",
    "constrained_decode",
    "decode",
    "encode",
    "is_projective",
    "projectivize",
    "projectivize_with_count",
    "read_conllu",
]
