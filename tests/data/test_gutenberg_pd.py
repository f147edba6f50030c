"""`structpe data fetch gutenberg-pd-10m`: the pinned books served from 127.0.0.1, cleaned and split.

A few hand-made Project Gutenberg files (fixture books, their expected text written out below, so
the test does not depend on the real hashes) go through the whole fetch; with the 196 real books on
disk (``$STRUCTPE_GUTENBERG_PD_RAW``: a folder laid out like the upstream repository) a ``data`` test
rebuilds the shared corpus from them over the loopback server and checks it byte for byte.
"""

from __future__ import annotations

import hashlib
import os
import urllib.parse
from dataclasses import replace
from pathlib import Path

import pytest

from structpe.cli import main
from structpe.data import registry as registry_mod
from structpe.data.fetch import content_sha256, fetch_one
from structpe.data.registry import Download, parse_registry
from structpe.data.transforms import gutenberg_pd_clean, gutenberg_pd_split

RAW_ENV = "STRUCTPE_GUTENBERG_PD_RAW"


def pg_book(ebook: int, body: str, *, credit: bool = False) -> bytes:
    """A Project Gutenberg file around ``body``: header, START/END markers, licence footer, CRLF."""
    head = (
        f"The Project Gutenberg EBook of Book {ebook}\n\nTitle: Book {ebook}\n\n"
        f"Release Date: 2004 [EBook #{ebook}]\n"
    )
    credit_par = "Produced by Some Volunteers\nand the Online Team\n\n" if credit else ""
    text = (
        f"{head}\n*** START OF THIS PROJECT GUTENBERG EBOOK BOOK {ebook} ***\n\n\n{credit_par}{body}\n\n"
        "End of the Project Gutenberg EBook of Book\n\n*** END OF THIS PROJECT GUTENBERG EBOOK ***\n\n"
        "This file should be named 1.txt; the licence follows.\n"
    )
    return text.replace("\n", "\r\n").encode("utf-8")


# ebook numbers whose split (sha256 of the number mod 20) is train, dev, test
BOOKS = {
    "A%2C%20Author/First.txt": pg_book(
        101,
        "CHAPTER I.   \n\nIt was a dark night.\nThe rain fell.\n\n\n\nillus.jpg (12K)\nShe ran.",
        credit=True,
    ),
    "B%2C%20Author/Second.txt": pg_book(121, "Visit www.gutenberg.org for more.\n\nA dev book."),
    "C%2C%20Author/Third.txt": pg_book(119, "A test book.\n\nIts second paragraph."),
    "A%2C%20Author/Fourth.txt": pg_book(102, "The second train book."),
}
EXPECTED = {
    "gutenberg_pd.train.txt.gz": "CHAPTER I.\n\nIt was a dark night.\nThe rain fell.\n\nShe ran.\n"
    "\nThe second train book.\n",
    "gutenberg_pd.dev.txt.gz": "A dev book.\n",
    "gutenberg_pd.test.txt.gz": "A test book.\n\nIts second paragraph.\n",
}


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def test_split_rule_and_cleaning_of_one_book() -> None:
    assert [gutenberg_pd_split(n) for n in ("101", "121", "119")] == ["train", "dev", "test"]
    body, num = gutenberg_pd_clean(BOOKS["A%2C%20Author/First.txt"].decode(), "first")
    assert num == "101" and body == "CHAPTER I.\n\nIt was a dark night.\nThe rain fell.\n\nShe ran.\n"
    with pytest.raises(ValueError, match="nomark: no Project Gutenberg START/END markers"):
        gutenberg_pd_clean("Title: x\n\nJust text.\n", "nomark")


@pytest.fixture
def fixture_registry(mirror, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The fixture books on the mirror and a registry entry in gutenberg-pd-10m's form pointing there."""
    for path, data in BOOKS.items():
        mirror.files[f"gpd/{path}"] = data
    table = {
        "t-gpd": {
            "folder": "corpus/gutenberg_pd_10m",
            "license": "public domain",
            "used_for": "tests",
            "source": "mirror",
            "base_url": mirror.base_url + "gpd/",
            "build": "gutenberg-pd",
            "downloads": [[p, sha(d)] for p, d in BOOKS.items()],
            "outputs": [[t, sha(text.encode())] for t, text in EXPECTED.items()],
        }
    }
    reg = parse_registry(table)
    monkeypatch.setattr(registry_mod, "registry", lambda: reg)
    monkeypatch.setenv("STRUCTPE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("STRUCTPE_DATA", str(tmp_path / "empty"))
    return mirror, tmp_path


def test_fetch_builds_the_splits_from_the_loopback_books(fixture_registry, capsys) -> None:
    mirror, tmp = fixture_registry
    assert main(["data", "fetch", "t-gpd", "--retries", "0"]) == 0
    folder = tmp / "cache/corpus/gutenberg_pd_10m"
    for target, text in EXPECTED.items():
        assert content_sha256(folder / target) == sha(text.encode()), target
    assert all(n == 1 for n in mirror.requests.values()) and len(mirror.requests) == len(BOOKS)
    capsys.readouterr()
    assert main(["data", "verify", "t-gpd"]) == 0
    assert "t-gpd: ok (3 files" in capsys.readouterr().out
    assert main(["data", "list", "t-gpd"]) == 0
    assert "pinned" in capsys.readouterr().out


def test_altered_upstream_book_is_refused(fixture_registry, capsys) -> None:
    mirror, tmp = fixture_registry
    mirror.altered["gpd/C%2C%20Author/Third.txt"] = BOOKS["C%2C%20Author/Third.txt"].replace(b"test", b"best")
    assert main(["data", "fetch", "t-gpd", "--retries", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("structpe data fetch: error: sha256 mismatch for corpus/gutenberg_pd_10m from ")
    assert "\n" not in err and not (tmp / "cache/corpus/gutenberg_pd_10m").exists()


@pytest.mark.data
def test_registry_pins_the_shared_manifest(shared_data: Path) -> None:
    """The registry's downloads are the manifest's books, in its order, with its upstream sha256."""
    manifest = shared_data / "corpus/gutenberg_pd_10m/manifest.tsv"
    rows = [line.split("\t") for line in manifest.read_text(encoding="utf-8").splitlines()[1:]]
    ds = registry_mod.registry()["gutenberg-pd-10m"]
    assert [(d.url, d.sha256) for d in ds.downloads] == [(r[6], r[4]) for r in rows]
    assert len(rows) == 196


@pytest.mark.data
def test_corpus_name_reads_the_fetched_files(shared_data: Path) -> None:
    """``--corpus gutenberg-pd-10m`` / the study's ``dataset.corpus``: the three built files, as text."""
    from structpe.train.prepare import corpus_splits

    splits, fmt = corpus_splits("gutenberg-pd-10m", shared_data, ("train", "validation", "test"))
    folder = shared_data / registry_mod.registry()["gutenberg-pd-10m"].folder
    assert fmt == "text"
    assert splits == {
        s: [folder / f"gutenberg_pd.{f}.txt.gz"]
        for s, f in (("train", "train"), ("validation", "dev"), ("test", "test"))
    }


@pytest.mark.data
def test_fetch_rebuilds_the_shared_corpus_byte_for_byte(mirror, shared_data: Path, tmp_path: Path) -> None:
    """The 196 real books over 127.0.0.1 -> files with the registry's (= PROVENANCE.md's) sha256."""
    raw = Path(os.environ.get(RAW_ENV, shared_data / "corpus/gutenberg_pd_10m/raw"))
    if not raw.is_dir():
        pytest.skip(
            f"the raw books are not on this machine (set ${RAW_ENV} to a folder laid out like "
            "rcdm-uga/Gutenberg_Text)"
        )
    ds = registry_mod.registry()["gutenberg-pd-10m"]
    base = ds.downloads[0].url.rsplit("/", 2)[0] + "/"
    downloads = []
    for d in ds.downloads:
        rel = d.url.removeprefix(base)
        mirror.files[rel] = (raw / urllib.parse.unquote(rel)).read_bytes()
        downloads.append(Download(mirror.base_url + rel, d.sha256))
    res = fetch_one(replace(ds, downloads=tuple(downloads)), tmp_path / "dest", retries=0)
    assert res.fetched and len(mirror.requests) == 196
    for o in ds.outputs:
        built = content_sha256(res.root / ds.folder / o.target)
        assert built == o.sha256 == content_sha256(shared_data / ds.folder / o.target), o.target
