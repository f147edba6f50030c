"""The study's test sentences: a fixed, seeded sample stratified by the test split's genres."""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

import pytest

from structpe.data.paths import data_root
from structpe.errors import StructpeError
from structpe.study.data import genres_of_test_documents, read_test_units


def _corpus(tmp_path: Path, docs: list[tuple[str, int]]) -> Path:
    """A 'lines' test file of documents (genre, sentences) and its manifest (train rows ignored)."""
    lines, rows = [], [{"file": "x0", "category": "news", "split": "train"}]
    for d, (genre, n) in enumerate(docs):
        lines += [f"{genre} doc {d} sentence {i} ." for i in range(n)] + [""]
        rows.append({"file": f"t{d}", "category": genre, "split": "test"})
    path = tmp_path / "c.test.txt"
    path.write_text("\n".join(lines) + "\n")
    with gzip.open(tmp_path / "manifest.json.gz", "wt") as fh:
        json.dump(rows, fh)
    return path


def test_the_sample_is_stratified_seeded_and_spread_over_every_prefix(tmp_path: Path) -> None:
    path = _corpus(tmp_path, [("news", 50), ("news", 30), ("fiction", 40), ("learned", 80)])
    sample = read_test_units(path, "lines", 40, seed=0)
    genre = [u.split()[0] for u in sample]
    assert collections.Counter(genre) == {"news": 16, "fiction": 8, "learned": 16}  # 80:40:80 of 200
    assert len(set(sample)) == 40
    assert sample == read_test_units(path, "lines", 40, seed=0)  # fixed
    assert sample != read_test_units(path, "lines", 40, seed=1)  # seeded
    assert set(genre[:5]) == {"news", "fiction", "learned"}  # a leading slice spans the genres
    assert len(read_test_units(path, "lines", 1000)) == 200  # all units when n covers them


def test_a_manifest_that_does_not_match_the_file_is_an_error(tmp_path: Path) -> None:
    path = _corpus(tmp_path, [("news", 3), ("fiction", 3)])
    path.write_text(path.read_text().replace("\n\n", "\n", 1))  # the two documents run together
    with pytest.raises(StructpeError, match="manifest lists 2 test documents, the file holds 1"):
        read_test_units(path, "lines", 2)


def test_without_a_manifest_one_stratum(tmp_path: Path) -> None:
    path = tmp_path / "plain.txt"
    path.write_text("".join(f"sentence {i} .\n" for i in range(30)))
    sample = read_test_units(path, "lines", 10, seed=3)
    assert len(set(sample)) == 10 and genres_of_test_documents(path) is None


def test_brown_test_sample_covers_its_genres() -> None:
    path = data_root(None) / "corpus" / "brown" / "brown.test.txt.gz"
    if not path.is_file():
        pytest.skip("Brown is not in the data folder")
    genres = genres_of_test_documents(path)
    assert genres is not None and len(genres) == 41 and len(set(genres)) == 13
    sample = read_test_units(path, "lines", 500, seed=0)
    assert len(sample) == 500 and len(set(sample)) >= 495  # Brown repeats a few lines ("1 .")
    # not the first 500 lines (press reportage only)
    first = read_test_units(path, "lines", 10**6)[:500]
    assert len(set(sample) & set(first)) < 100
