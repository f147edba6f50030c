"""encode -> decode is the identity on every projective sentence of every stored treebank (docs/design.md §1);
non-projective ones are projectivised by lifting and then round-trip too."""

from __future__ import annotations

from pathlib import Path

import pytest

from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.hexatags import DEFAULT_MAX_DEPTH, decode, encode, stack_depths
from structpe.syntax.trees import is_projective, projectivize_with_count


@pytest.mark.data
def test_every_treebank_round_trips(shared_data: Path) -> None:
    files = sorted((shared_data / "ud").glob("*/*.conllu.gz"))
    assert files, f"no treebanks under {shared_data / 'ud'}"
    total = nonproj = 0
    deepest = 0
    for f in files:
        for s in read_conllu(f):
            total += 1
            heads = s.heads
            if not is_projective(heads):
                nonproj += 1
                heads, lifted = projectivize_with_count(heads)
                assert lifted >= 1 and is_projective(heads), (f.name, s.sent_id)
            t, n = encode(heads)
            assert decode(t, n) == heads, (f.name, s.sent_id)
            deepest = max(deepest, max(stack_depths(t, n)))
    assert total > 40_000
    assert 0 < nonproj < 0.05 * total
    assert deepest <= DEFAULT_MAX_DEPTH  # the constrained decoder's cap never cuts a gold tree
