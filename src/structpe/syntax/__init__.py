"""Syntax front end of SiPE: dependency trees -> hexatags (docs/design.md §1, §6).

* ``hexatags``   -- tag inventory, ``encode`` / ``decode``, ``constrained_decode`` for predictions
* ``trees``      -- tree validation, projectivity, arc-lifting projectivisation
* ``conllu_io``  -- validated CoNLL-U reading (plain or gzipped)
* ``tagged``     -- ``TaggedSentence`` and its JSON-lines form
* ``alignment``  -- the one home of tag alignment: word tags -> first-subword tag ids, by word
  lists (Hugging Face fast tokenizers) or by character offsets (raw text as written)
* ``deprels``    -- the dependency-relation inventory of the DEPREL variants

The parsers that produce trees live one floor up, in ``structpe.parser``. ``structpe.syntax.projectivize``
is a stable interface (docs/design.md §6); everything else is imported from its module.
"""

from structpe.syntax.trees import projectivize

__all__ = ["projectivize"]
