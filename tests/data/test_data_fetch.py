"""`structpe data fetch / list / verify` against a fixture mirror on 127.0.0.1 (no network).

The mirror serves a few real files of the shared data under upstream-like paths; a small registry
(same format as the package's, with the package's hashes where they exist) points at it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from structpe.cli import main
from structpe.data import registry as registry_mod
from structpe.data import transforms
from structpe.data.fetch import DOWNLOADS, RECORD_FILE, DataFetchError, fetch, verify
from structpe.data.paths import DataNotFoundError, data_root
from structpe.data.registry import parse_registry
from structpe.syntax.conllu_io import read_conllu

pytestmark = pytest.mark.data

UD_DEV = "en_eslspok-ud-dev.conllu"


def content(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.fixture
def mirror_env(mirror, shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Mirror files + a registry pointing at them; the cache and $STRUCTPE_DATA are empty tmp dirs."""
    real = registry_mod.registry()
    ud = shared_data / "ud/UD_English-ESLSpok"
    mirror.files["ud/" + UD_DEV] = content(ud / (UD_DEV + ".gz"))
    mirror.files["ud/LICENSE.txt"] = (ud / "LICENSE.txt").read_bytes()
    dev = (shared_data / "glue/CoLA/dev.tsv").read_bytes().split(b"\n")
    mirror.files["cola/in_domain_dev.tsv"] = b"\n".join(dev[:527]) + b"\n"
    mirror.files["cola/out_of_domain_dev.tsv"] = b"\n".join(dev[527:])
    mirror.files["cola/in_domain_train.tsv"] = (shared_data / "glue/CoLA/train.tsv").read_bytes()
    mirror.files["sg/number_src.json"] = (shared_data / "syntaxgym/suites/number_src.json").read_bytes()
    ud_hashes = {o.target: o.sha256 for o in real["ud-eslspok"].outputs}
    cola = {o.target: o.sha256 for o in real["glue-cola"].outputs}
    table = {
        "t-ud": {"folder": "ud/UD_English-ESLSpok", "license": "CC BY-SA 4.0", "used_for": "tests",
                 "source": "mirror", "base_url": mirror.base_url + "ud/",
                 "files": [[UD_DEV + ".gz", UD_DEV, ud_hashes[UD_DEV + ".gz"]],
                           ["LICENSE.txt", "LICENSE.txt", ud_hashes["LICENSE.txt"]]]},
        "t-cola": {"folder": "glue/CoLA", "license": "research", "used_for": "tests", "source": "mirror",
                   "base_url": mirror.base_url + "cola/",
                   "files": [["train.tsv", "in_domain_train.tsv", cola["train.tsv"]]],
                   "build": "concat",
                   "downloads": [["in_domain_dev.tsv", sha(mirror.files["cola/in_domain_dev.tsv"])],
                                 ["out_of_domain_dev.tsv", sha(mirror.files["cola/out_of_domain_dev.tsv"])]],
                   "outputs": [["dev.tsv", cola["dev.tsv"]]]},
        "t-tofu": {"folder": "syntaxgym", "license": "MIT", "used_for": "tests", "source": "mirror",
                   "base_url": mirror.base_url + "sg/",
                   "files": [["suites/number_src.json", "number_src.json", ""]]},
    }
    reg = parse_registry(table)
    monkeypatch.setattr(registry_mod, "registry", lambda: reg)
    monkeypatch.setenv("STRUCTPE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("STRUCTPE_DATA", str(tmp_path / "empty"))
    return mirror, shared_data, tmp_path


def tree(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}


def test_fetch_end_to_end_then_noop(mirror_env, capsys):
    mirror, shared, tmp = mirror_env
    assert main(["data", "fetch", "--retries", "0"]) == 0
    cache = tmp / "cache"
    ud = cache / "ud/UD_English-ESLSpok"
    # gzip-compressed on the way in, same content as the shared copy
    assert content(ud / (UD_DEV + ".gz")) == content(shared / "ud/UD_English-ESLSpok" / (UD_DEV + ".gz"))
    assert (cache / "glue/CoLA/dev.tsv").read_bytes() == (shared / "glue/CoLA/dev.tsv").read_bytes()
    assert not (cache / DOWNLOADS).exists() and not list(cache.glob(".fetch-*"))
    assert all(c.ok for c in verify([]))
    # data lookup now finds the cache (after the empty $STRUCTPE_DATA)
    assert data_root(sub="glue/CoLA") == cache / "glue/CoLA"
    # a second run downloads and writes nothing
    before, n_requests = tree(cache), sum(mirror.requests.values())
    assert main(["data", "fetch"]) == 0
    assert tree(cache) == before and sum(mirror.requests.values()) == n_requests
    assert "0 data set(s) fetched, 3 already complete" in capsys.readouterr().out


def test_noop_where_the_data_root_is_complete(mirror_env, monkeypatch):
    mirror, shared, tmp = mirror_env
    monkeypatch.setenv("STRUCTPE_DATA", str(shared))
    results = fetch(["t-ud", "t-cola"])
    assert [r.fetched for r in results] == [False, False] and all(r.root == shared for r in results)
    assert not (tmp / "cache").exists() and not mirror.requests


def test_retry_after_a_connection_dropped_mid_file(mirror_env):
    mirror, shared, tmp = mirror_env
    mirror.drop_once.add("ud/" + UD_DEV)
    (res,) = fetch(["t-ud"], tmp / "dest", retries=1)
    assert res.fetched and mirror.requests["ud/" + UD_DEV] == 2
    assert content(tmp / "dest/ud/UD_English-ESLSpok" / (UD_DEV + ".gz")) == mirror.files["ud/" + UD_DEV]


def test_interrupted_fetch_leaves_no_data_set_and_resumes(mirror_env):
    mirror, shared, tmp = mirror_env
    dest = tmp / "dest"
    mirror.drop_always.add("cola/out_of_domain_dev.tsv")
    with pytest.raises(DataFetchError, match="out_of_domain_dev.tsv"):
        fetch(["t-cola"], dest, retries=0)
    assert not (dest / "glue").exists() and not list(dest.glob(".fetch-*"))  # nothing half-written
    mirror.drop_always.clear()
    fetch(["t-cola"], dest, retries=0)
    # the files downloaded before the interruption are not downloaded again
    assert mirror.requests["cola/in_domain_dev.tsv"] == 1 and mirror.requests["cola/in_domain_train.tsv"] == 1
    assert mirror.requests["cola/out_of_domain_dev.tsv"] == 2
    assert (dest / "glue/CoLA/dev.tsv").read_bytes() == (shared / "glue/CoLA/dev.tsv").read_bytes()


def test_interrupt_during_the_build_leaves_nothing_behind(mirror_env, monkeypatch):
    mirror, shared, tmp = mirror_env
    dest = tmp / "dest"

    def interrupted(paths):
        raise KeyboardInterrupt

    monkeypatch.setitem(transforms.BUILDERS, "concat", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fetch(["t-cola"], dest, retries=0)
    assert not (dest / "glue").exists() and not list(dest.glob(".fetch-*"))


def test_hash_mismatch_is_one_clear_line_and_writes_no_data_set(mirror_env, capsys):
    mirror, shared, tmp = mirror_env
    mirror.altered["ud/LICENSE.txt"] = mirror.files["ud/LICENSE.txt"] + b"tampered\n"
    dest = tmp / "dest"
    assert main(["data", "fetch", "--data", str(dest), "--retries", "0", "t-ud"]) == 2
    err = capsys.readouterr().err.strip()
    expected = registry_mod.registry()["t-ud"].outputs[1].sha256
    assert len(err.splitlines()) == 1
    assert "ud/UD_English-ESLSpok/LICENSE.txt" in err and expected in err
    assert sha(mirror.altered["ud/LICENSE.txt"]) in err
    # no data set and no temporary folder; only the verified download is kept for the next run
    assert os.listdir(dest) == [DOWNLOADS]
    assert [p.name.split("-", 1)[1] for p in (dest / DOWNLOADS / "t-ud").iterdir()] == [UD_DEV]


def test_truncated_gzip_is_caught_by_verify_and_repaired_by_fetch(mirror_env, capsys):
    mirror, shared, tmp = mirror_env
    dest = tmp / "dest"
    fetch(["t-ud"], dest)
    gz = dest / "ud/UD_English-ESLSpok" / (UD_DEV + ".gz")
    gz.write_bytes(gz.read_bytes()[: gz.stat().st_size // 2])
    assert main(["data", "verify", "--data", str(dest), "t-ud"]) == 2
    assert f"{gz}: corrupt: " in capsys.readouterr().out
    (res,) = fetch(["t-ud"], dest)
    assert res.fetched and content(gz) == mirror.files["ud/" + UD_DEV]


def test_read_only_target_writes_nothing(mirror_env, capsys):
    mirror, shared, tmp = mirror_env
    dest = tmp / "ro"
    dest.mkdir()
    dest.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    try:
        assert main(["data", "fetch", "--data", str(dest), "t-ud"]) == 2
        assert "read-only" in capsys.readouterr().err and not os.listdir(dest)
        assert not mirror.requests
    finally:
        dest.chmod(0o755)


def test_verify_catches_a_modified_file(mirror_env, capsys):
    mirror, shared, tmp = mirror_env
    dest = tmp / "dest"
    fetch(["t-cola"], dest)
    assert main(["data", "verify", "--data", str(dest), "t-cola"]) == 0
    dev = dest / "glue/CoLA/dev.tsv"
    dev.write_bytes(dev.read_bytes().replace(b"\t1\t", b"\t0\t", 1))
    assert main(["data", "verify", "--data", str(dest), "t-cola"]) == 2
    out = capsys.readouterr().out
    assert f"{dev}: sha256 mismatch: expected {registry_mod.registry()['t-cola'].outputs[1].sha256}" in out


def test_unpinned_entry_is_trusted_on_first_use(mirror_env, capsys):
    mirror, shared, tmp = mirror_env
    dest = tmp / "dest"
    assert main(["data", "list", "--data", str(dest), "t-tofu"]) == 0
    assert "UNVERIFIED" in capsys.readouterr().out
    (res,) = fetch(["t-tofu"], dest)
    rel = "syntaxgym/suites/number_src.json"
    assert res.recorded == {rel: sha(mirror.files["sg/number_src.json"])}
    assert json.loads((dest / RECORD_FILE).read_text())["files"][rel]["sha256"] == res.recorded[rel]
    assert main(["data", "list", "--data", str(dest), "t-tofu"]) == 0
    assert "recorded on first fetch" in capsys.readouterr().out
    (dest / rel).write_text("{}")
    (check,) = verify(["t-tofu"], dest)
    assert not check.ok and check.files[0].problem == "sha256 mismatch"


def test_git_blob_id_checks_a_download_without_sha256(mirror_env, capsys, monkeypatch):
    mirror, shared, tmp = mirror_env
    data = mirror.files["sg/number_src.json"]
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    base = {"folder": "syntaxgym", "license": "MIT", "used_for": "tests", "source": "mirror",
            "base_url": mirror.base_url + "sg/"}
    reg = parse_registry({"t-blob": {**base, "files": [["suites/number_src.json", "number_src.json", "",
                                                         blob]]}})
    monkeypatch.setattr(registry_mod, "registry", lambda: reg)
    mirror.altered["sg/number_src.json"] = data.replace(b"1", b"2", 1)
    assert main(["data", "fetch", "--data", str(tmp / "dest"), "--retries", "0", "t-blob"]) == 2
    assert "git blob id mismatch for syntaxgym/suites/number_src.json" in capsys.readouterr().err
    assert not (tmp / "dest/syntaxgym").exists()
    del mirror.altered["sg/number_src.json"]
    (res,) = fetch(["t-blob"], tmp / "dest")
    assert res.recorded == {"syntaxgym/suites/number_src.json": sha(data)}
    assert main(["data", "list", "--data", str(tmp / "dest"), "t-blob"]) == 0
    assert "pinned + recorded on first fetch" in capsys.readouterr().out


def test_missing_data_names_the_fetch_command(mirror_env):
    with pytest.raises(DataNotFoundError, match="structpe data fetch t-cola"):
        data_root(sub="glue/CoLA")


def test_official_and_shipped_conllu_forms_read_identically(shared_data, tmp_path):
    """A rebuilt treebank file (GUM's train) differs from the release only in the order of comment
    lines and in MISC; plain and gzip files are both read: structpe must see the same trees."""
    src = shared_data / "ud/UD_English-GUM/en_gum-ud-dev.conllu.gz"
    release = gzip.decompress(src.read_bytes()).decode("utf-8")
    rebuilt = []
    for block in release.strip("\n").split("\n\n")[:200]:
        lines = block.split("\n")
        comments = [ln for ln in lines if ln.startswith("#")][::-1]
        tokens = [ln.rsplit("\t", 1)[0] + "\t_" for ln in lines if not ln.startswith("#")]
        rebuilt.append("\n".join(comments + tokens))
    plain = tmp_path / "rebuilt.conllu"
    plain.write_text("\n\n".join(rebuilt) + "\n\n", encoding="utf-8")
    n = len(rebuilt)

    def trees(path):
        return [(s.sent_id, s.text, s.words, s.heads, s.deprels) for s in read_conllu(path)][:n]

    expected = trees(src)
    assert trees(plain) == expected and len(expected) == 200

