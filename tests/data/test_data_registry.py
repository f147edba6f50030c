"""The registry against the shared data copies, and the build rules that make structpe's layout."""

from __future__ import annotations

import gzip
import io
import json
import re
import zipfile
from pathlib import Path

import pytest

from structpe.data.fetch import content_sha256
from structpe.data.paths import DataNotFoundError, data_root
from structpe.data.registry import parse_registry, registry, select
from structpe.data.transforms import brown_split_of, build_brown, build_gutenberg

OUTPUTS = [(ds.name, o) for ds in registry().values() for o in ds.outputs]


@pytest.mark.data
@pytest.mark.parametrize(("name", "output"), OUTPUTS, ids=[f"{n}/{o.target}" for n, o in OUTPUTS])
def test_registry_hash_matches_the_shared_copy(shared_data: Path, name: str, output) -> None:
    ds = registry()[name]
    if output.sha256 is None:
        assert ds.note and output.download.git_blob, f"{name}/{output.target}: no sha256, git blob or note"
        pytest.skip(f"{name}/{output.target}: no pinned sha256 ({ds.note})")
    assert content_sha256(shared_data / ds.folder / output.target) == output.sha256


def test_registry_covers_the_data_sets_pinned_to_commits() -> None:
    reg = registry()
    assert len(select(["ud"])) == 8
    assert {n for n in reg if n.startswith("glue-")} == {f"glue-{t}" for t in ("cola", "sst2", "mrpc", "rte",
                                                                              "stsb", "qnli")}
    assert sum(o.target.endswith(".jsonl.gz") for o in reg["blimp"].outputs) == 67
    assert sum(o.target.startswith("suites/") for o in reg["syntaxgym"].outputs) == 34
    assert {"brown", "gutenberg", "tinyshakespeare"} <= set(reg)
    for ds in reg.values():
        assert ds.license and ds.used_for
        for dl in ds.all_downloads:
            assert re.match(r"https://raw\.githubusercontent\.com/[^/]+/[^/]+/[0-9a-f]{40}/", dl.url), dl.url
    assert all(ds.pinned for ds in reg.values())  # by sha256, or git blob id for GUM's release train file
    assert [o.target for o in reg["ud-gum"].outputs if o.sha256 is None] == ["en_gum-ud-train.conllu.gz"]


def test_registry_rejects_bad_entries() -> None:
    base = {"folder": "x", "license": "l", "used_for": "u", "source": "s", "base_url": "http://h/"}
    with pytest.raises(ValueError, match="not a sha256"):
        parse_registry({"a": {**base, "files": [["f", "f", "abc"]]}})
    with pytest.raises(ValueError, match="inside its folder"):
        parse_registry({"a": {**base, "files": [["../f", "f", ""]]}})
    with pytest.raises(ValueError, match="unknown data set 'nope'"):
        select(["nope"])


@pytest.mark.data
def test_brown_split_rule_reproduces_the_shipped_split(shared_data: Path) -> None:
    folder = shared_data / "corpus/brown"
    cats = dict(line.split() for line in (folder / "cats.txt").read_text().splitlines() if line.strip())
    manifest = json.loads(gzip.decompress((folder / "manifest.json.gz").read_bytes()))
    assert brown_split_of(cats) == {m["file"]: m["split"] for m in manifest}


def test_brown_build_strips_tags_at_the_last_slash(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("brown/cats.txt", "".join(f"c{i:02d} news\n" for i in range(10)))
        z.writestr("brown/README", "readme\n")
        for i in range(10):
            z.writestr(f"brown/c{i:02d}", f"\n\n\tDoc/np {i}/cd and/or/cc 1/2/cd ./.\n\n\n\tEnd/nn ./.\n")
    zpath = tmp_path / "brown.zip"
    zpath.write_bytes(buf.getvalue())
    out = build_brown([zpath])
    assert out["brown.valid.txt.gz"] == b"Doc 8 and/or 1/2 .\nEnd .\n\n"
    assert out["brown.test.txt.gz"] == b"Doc 9 and/or 1/2 .\nEnd .\n\n"
    assert out["brown.train.txt.gz"].count(b"\n\n") == 8 and out["README.brown.txt"] == b"readme\n"


def test_gutenberg_build_cuts_after_blank_lines(tmp_path: Path) -> None:
    body = "".join(f"line {i}\r\n" if i % 7 else "\r\n" for i in range(1, 101))
    (tmp_path / "b-book.txt").write_bytes(("caf\xe9\r\n" + body + "\r\n\r\n").encode("latin-1"))
    (tmp_path / "a-book.txt").write_bytes(("\n".join(f"a{i}" for i in range(40)) + "\n").encode("ascii"))
    out = build_gutenberg([tmp_path / "a-book.txt", tmp_path / "b-book.txt"])  # the registry's order
    train = out["gutenberg.train.txt.gz"].decode()
    assert train.startswith("a0\na1\n") and "\n\n\ncafé\n" in train and "\r" not in train
    reversed_order = build_gutenberg([tmp_path / "b-book.txt", tmp_path / "a-book.txt"])
    # the order given, not that of the file names (downloads carry a cache prefix)
    assert reversed_order["gutenberg.train.txt.gz"].startswith("café\n".encode())
    # b-book has 101 lines: the 90% cut (index 90) moves to just after the blank line at index 91
    b_valid = out["gutenberg.valid.txt.gz"].decode().split("\n\n\n")[1]
    assert b_valid.startswith("line 92\n") and out["gutenberg.test.txt.gz"].decode().endswith("line 100\n")


def test_lookup_prefers_the_data_root_then_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, cache = tmp_path / "root", tmp_path / "cache"
    (cache / "blimp").mkdir(parents=True)
    monkeypatch.setenv("STRUCTPE_DATA", str(root))
    monkeypatch.setenv("STRUCTPE_CACHE", str(cache))
    assert data_root(sub="blimp") == cache / "blimp"
    (root / "blimp").mkdir(parents=True)
    assert data_root(sub="blimp") == root / "blimp"
    assert data_root(tmp_path / "elsewhere", sub="blimp") == cache / "blimp"
    with pytest.raises(DataNotFoundError, match=r"`structpe data fetch syntaxgym`"):
        data_root(sub="syntaxgym/suites")
