"""``structpe prepare``'s DEPREL column: word-level dependency labels -> packed ``deprel_ids``.

The parse step keeps each sentence's labels as inventory ids (``structpe.syntax.deprels``: UD
universal relations, spaCy's ClearNLP labels mapped to them). After packing they are put on the
packed rows' tagged positions: packing keeps sentences in order and every word, and only a word's
first subword carries a tag, so the tagged positions of the packed split, read in order, are the
split's words in order. That invariant is checked, so ``deprel_ids`` is aligned exactly like
``terminal_ids`` (-100 at the same positions) or prepare fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structpe.errors import PreparedDataError
from structpe.syntax.deprels import DEPREL_INVENTORY, UD_RELATIONS, deprel_ids, spread_word_labels

IGNORE_INDEX = -100
WORD_COLUMNS = ("deprel_word_ids", "deprel_unknown")


def word_deprel_columns(deprels: list[str] | None) -> tuple[list[int], int]:
    """A sentence's label ids and unknown-label count; ``[]`` when the parser gave no labels."""
    return deprel_ids(deprels) if deprels is not None else ([], 0)


def inventory_metadata() -> dict[str, Any]:
    """What ``structpe_prepare.json`` records about the label inventory (ids are list positions)."""
    return {"name": DEPREL_INVENTORY, "labels": list(UD_RELATIONS)}


def _spread_batch(batch: dict[str, list], indices: list[int], flat: list[int], offsets: list[int]) -> dict:
    return {"deprel_ids": [spread_word_labels(t, flat, offsets[i]) for t, i in zip(
        batch["terminal_ids"], indices, strict=True)]}


def attach_deprel_ids(
    sents: Any, packed: Any, cache_file: Path | None = None, tagged_words: list[list[bool]] | None = None
) -> tuple[Any, dict[str, Any]]:
    """Add ``deprel_ids`` to the packed split; also the per-split counts for the metadata.

    ``tagged_words`` (per sentence, per word) marks the words whose tags reached a token: in the
    raw text form a word that shares its first token with the previous one (the ``"`` of ``."``)
    carries no tag, and then no label either. When the parser gave no labels for some sentence (a
    hexatagger trained without its label head) the column is left out and the stats say so: a
    DEPREL model then refuses the dataset by name instead of training on made-up labels.
    """
    rows = sents["deprel_word_ids"]
    unlabeled = sum(1 for r, n in zip(rows, sents["words"], strict=True) if len(r) != len(n))
    if unlabeled:
        return packed, {"deprel_ids": False, "deprel_unlabeled_sentences": unlabeled}
    if tagged_words is None:
        flat = [x for r in rows for x in r]
    else:
        pairs = zip(rows, tagged_words, strict=True)
        flat = [x for r, keep in pairs for x, k in zip(r, keep, strict=True) if k]
    offsets, total = [], 0
    for t in packed["terminal_ids"]:
        offsets.append(total)
        total += sum(1 for x in t if x != IGNORE_INDEX)
    if total != len(flat):
        raise ValueError(f"prepare: {total} tagged positions after packing but {len(flat)} labelled words")
    out = packed.map(
        _spread_batch,
        batched=True,
        with_indices=True,
        fn_kwargs={"flat": flat, "offsets": offsets},
        cache_file_name=str(cache_file) if cache_file is not None else None,
        new_fingerprint=f"deprel-{cache_file.stem if cache_file else len(flat)}",
        desc="deprel ids",
    )
    return out, {"deprel_ids": True, "deprel_unknown_labels": int(sum(sents["deprel_unknown"]))}


def check_deprel_data(n_deprels: int, dataset: Any, dd: Any) -> None:
    """A model with a DEPREL table (``n_deprels > 0``) needs ``deprel_ids`` from this inventory."""
    if not n_deprels:
        return
    for split in dd:
        if "deprel_ids" not in dd[split].column_names:
            raise PreparedDataError(
                f"{dataset}: split {split!r} has no deprel_ids, which model.n_deprels={n_deprels} needs; "
                "re-run `structpe prepare` (with a parser that gives labels: gold, spacy, or a hexatagger "
                "trained with its label head)"
            )
    if n_deprels != len(UD_RELATIONS):
        raise PreparedDataError(
            f"model.n_deprels={n_deprels} but the prepared DEPREL ids use the {len(UD_RELATIONS)} labels of "
            f"{DEPREL_INVENTORY}; set model.n_deprels={len(UD_RELATIONS)}"
        )
