"""What the scorers feed a model: parses of the texts (one tree per text) and batches.

The tags are put on tokens by ``structpe.syntax.alignment.align_tags_by_offsets``. Shared by both
scorers (``structpe.eval.scoring.scorer``, ``structpe.eval.scoring.masked``) and by GLUE
featurization, so it lives below them.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from typing import Any

from structpe.eval.scoring.types import Parser


def parse_texts(parser: Parser | None, texts: list[str]) -> list[Any] | None:
    """Parse texts (None when no parser is given)."""
    if parser is None:
        return None
    # one tree per text (a text that looks like two sentences is joined into one tree), since the
    # tags are aligned to that text's characters
    if "split_sentences" in inspect.signature(parser.parse_text).parameters:
        parses = parser.parse_text(list(texts), split_sentences=False)
    else:
        parses = parser.parse_text(list(texts))
    if len(parses) != len(texts):
        raise ValueError(
            f"parser returned {len(parses)} parses for {len(texts)} texts (a 'skip' non-projective "
            "policy drops sentences; use 'lift')"
        )
    return parses


def batched(seq: Sequence[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(seq), size):
        yield list(seq[i : i + size])


def progress_bar(iterable: Any, enabled: bool, desc: str, total: int | None = None) -> Any:
    """``iterable`` behind a tqdm bar when ``enabled`` (tqdm imported only then), else as it is."""
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, leave=False)


def padded_batch(rows: Sequence[tuple[list[int], list[int], list[int]]], pad_id: int) -> tuple[Any, ...]:
    """(token ids, terminal ids, non-terminal ids) rows -> input ids, attention mask, terminal and
    non-terminal ids [B, L], right-padded (``pad_id``, mask 0, tags -100): both scorers' batches."""
    import torch

    from structpe.syntax.hexatags import IGNORE_INDEX

    shape = (len(rows), max(len(r[0]) for r in rows))
    input_ids, mask = torch.full(shape, pad_id, dtype=torch.long), torch.zeros(shape, dtype=torch.long)
    term, nonterm = (torch.full(shape, IGNORE_INDEX, dtype=torch.long) for _ in range(2))
    for b, (ids, t, n) in enumerate(rows):
        input_ids[b, : len(ids)] = torch.tensor(ids)
        mask[b, : len(ids)] = 1
        term[b, : len(ids)] = torch.tensor(t)
        nonterm[b, : len(ids)] = torch.tensor(n)
    return input_ids, mask, term, nonterm
