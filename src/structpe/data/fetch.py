"""Download, build and verify the registry's data sets (``structpe data fetch / list / verify``).

Downloads go through pooch (streamed to a temporary file, sha256-checked, retried, optional
progress bar) into ``<dest>/.downloads/<name>/``, which survives an interrupted run so that the
next run resumes with the files still missing.  The data set is then built in a temporary folder
under ``<dest>``, every output is checked against its sha256, and only then moved into place: a
new folder with one rename, files of an existing folder one ``os.replace`` each.  So a failed,
interrupted or corrupt download never leaves a half-written data set.

Registry entries without a sha256 are trusted on first use: the fetch records the hash it saw in
``<dest>/.structpe-data.json`` and ``verify`` compares against it from then on.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structpe.data.paths import cache_root, lookup_roots
from structpe.data.registry import Dataset, Download, select
from structpe.data.transforms import BUILDERS
from structpe.io import read_json

RECORD_FILE = ".structpe-data.json"
DOWNLOADS = ".downloads"
_CHUNK = 1 << 20


class DataFetchError(ValueError):
    """A download, hash check or write failed; the message names the file and what went wrong."""


def content_sha256(path: Path) -> str:
    """sha256 of a file's content, decompressed when it ends in ``.gz`` (so ``.conllu`` and
    ``.conllu.gz`` hash alike); a truncated or corrupt gzip raises DataFetchError."""
    h = hashlib.sha256()
    try:
        with gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise DataFetchError(f"{path}: corrupt or truncated gzip ({err})") from err
    return h.hexdigest()


# -- what is on disk ----------------------------------------------------------------------------


def read_records(root: Path) -> dict[str, Any]:
    """Hashes recorded on first use under ``root`` (``{relative path: {"sha256", "url"}}``)."""
    path = root / RECORD_FILE
    if not path.is_file():
        return {}
    try:
        return read_json(path)["files"]
    except (ValueError, KeyError, TypeError) as err:
        raise DataFetchError(f"{path}: not a structpe data record ({err})") from err


def _write_records(root: Path, files: dict[str, Any]) -> None:
    tmp = root / f"{RECORD_FILE}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps({"files": files}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, root / RECORD_FILE)


def _present(ds: Dataset, root: Path) -> bool:
    return all((root / ds.folder / o.target).is_file() for o in ds.outputs)


def locate(ds: Dataset, roots: list[Path]) -> Path | None:
    """The first root holding every file of ``ds`` (lookup order: data root, then the fetch cache)."""
    return next((r for r in roots if _present(ds, r)), None)


@dataclass
class FileCheck:
    path: Path
    expected: str | None  # registry hash, else the one recorded on first use, else None
    actual: str | None
    problem: str | None = None  # "missing", "corrupt: ...", "sha256 mismatch"

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass
class DatasetCheck:
    dataset: Dataset
    root: Path | None
    files: list[FileCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.root is not None and all(f.ok for f in self.files)

    @property
    def unverified(self) -> list[FileCheck]:
        return [f for f in self.files if f.ok and f.expected is None]


def check(ds: Dataset, root: Path) -> DatasetCheck:
    """Hash every file of ``ds`` under ``root`` against the registry (or the hash recorded there)."""
    records = read_records(root)
    out = DatasetCheck(ds, root)
    for o in ds.outputs:
        rel = f"{ds.folder}/{o.target}"
        path = root / rel
        expected = o.sha256 or records.get(rel, {}).get("sha256")
        if not path.is_file():
            out.files.append(FileCheck(path, expected, None, "missing"))
            continue
        try:
            actual = content_sha256(path)
        except DataFetchError as err:
            out.files.append(FileCheck(path, expected, None, f"corrupt: {err}"))
            continue
        bad = expected is not None and actual != expected
        out.files.append(FileCheck(path, expected, actual, "sha256 mismatch" if bad else None))
    return out


def verify(names: list[str], path: str | os.PathLike | None = None) -> list[DatasetCheck]:
    """Check the data sets ``names`` (all when empty) where the lookup finds them."""
    roots = lookup_roots(path)
    out = []
    for ds in select(names):
        root = locate(ds, roots)
        if root is None:
            partial = next((r for r in roots if (r / ds.folder).is_dir()), None)
            out.append(check(ds, partial) if partial else DatasetCheck(ds, None))
        else:
            out.append(check(ds, root))
    return out


# -- fetching -------------------------------------------------------------------------------------


@dataclass
class FetchResult:
    dataset: Dataset
    root: Path
    fetched: bool  # False: already complete there, nothing written
    recorded: dict[str, str] = field(default_factory=dict)  # hashes trusted on first use


def _mismatch(err: ValueError, url: str, target: str, expected: str | None) -> DataFetchError:
    m = re.search(r"expected (\S+) but got ([0-9a-f]+)", str(err))
    if m is None:
        return DataFetchError(f"{url} (for {target}): {err}")
    exp = expected or m.group(1).removeprefix("sha256:")
    return DataFetchError(f"sha256 mismatch for {target} from {url}: expected {exp}, got {m.group(2)}")


def _download(dl: Download, dl_dir: Path, target: str, retries: int, progress: bool, timeout: float) -> Path:
    """One upstream file into ``dl_dir`` (pooch: temp file, hash check, ``retries`` more attempts)."""
    import pooch
    import requests

    fname = hashlib.sha256(dl.url.encode()).hexdigest()[:12] + "-" + dl.url.rsplit("/", 1)[-1]
    fetcher = pooch.create(
        path=dl_dir,
        base_url="",
        registry={fname: f"sha256:{dl.sha256}" if dl.sha256 else None},
        urls={fname: dl.url},
        retry_if_failed=retries,
    )
    pooch.get_logger().setLevel("WARNING")  # our own log names each download
    downloader = pooch.HTTPDownloader(progressbar=progress, timeout=timeout)
    try:
        path = Path(fetcher.fetch(fname, downloader=downloader))
    except requests.exceptions.RequestException as err:
        raise DataFetchError(f"download of {dl.url} (for {target}) failed: {err}") from err
    except ValueError as err:
        raise _mismatch(err, dl.url, target, dl.sha256) from err
    if dl.git_blob and (blob := git_blob_id(path)) != dl.git_blob:
        path.unlink()
        raise DataFetchError(
            f"git blob id mismatch for {target} from {dl.url}: expected {dl.git_blob}, got {blob}"
        )
    return path


def git_blob_id(path: Path) -> str:
    """The id git gives the file's bytes (sha1 of ``blob <size>\\0`` + bytes), as in a tree listing."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _write_output(content_src: Path | bytes, dst: Path) -> None:
    """Copy (or gzip, for a ``.gz`` target: level 9, no name or timestamp) into ``dst``."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.name.endswith(".gz") and not (isinstance(content_src, Path) and content_src.name.endswith(".gz")):
        with open(dst, "wb") as raw, gzip.GzipFile("", "wb", compresslevel=9, fileobj=raw, mtime=0) as gz:
            if isinstance(content_src, bytes):
                gz.write(content_src)
            else:
                with content_src.open("rb") as f:
                    shutil.copyfileobj(f, gz, _CHUNK)
    elif isinstance(content_src, bytes):
        dst.write_bytes(content_src)
    else:
        shutil.copyfile(content_src, dst)


def _read_only(path: Path) -> bool:
    """True for a folder without write permission *or* without any write bit: a folder marked
    read-only (like the shared data, ``r-xr-xr-x``) is left alone even by root, who may write anyway."""
    return not os.access(path, os.W_OK | os.X_OK) or not path.stat().st_mode & 0o222


def _check_writable(dest: Path, folder: str) -> None:
    """Fail before writing anything when ``dest`` (or the data set's folder in it) is read-only."""
    existing = dest
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    for p in (existing, dest / folder):
        if p.is_dir() and _read_only(p):
            raise DataFetchError(
                f"{p} is read-only; nothing was written (pass --data DIR or set $STRUCTPE_CACHE to "
                "fetch elsewhere)"
            )
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataFetchError(f"cannot create the data folder {dest}: {err.strerror}") from err


def _build(ds: Dataset, work: Path, dl_dir: Path, retries: int, progress: bool, timeout: float,
           log: Callable[[str], None]) -> dict[str, str]:
    """Download and write every output of ``ds`` under ``work/<folder>``; returns hashes seen for
    outputs the registry does not pin.  Every written output is read back and hash-checked."""
    folder = work / ds.folder
    seen: dict[str, str] = {}
    for o in ds.outputs:
        if o.download is not None:
            log(f"  {o.download.url}")
            src = _download(o.download, dl_dir, f"{ds.folder}/{o.target}", retries, progress, timeout)
            _write_output(src, folder / o.target)
    built = [o for o in ds.outputs if o.download is None]
    if built:
        paths = []
        for dl in ds.downloads:
            log(f"  {dl.url}")
            paths.append(_download(dl, dl_dir, ds.folder, retries, progress, timeout))
        assert ds.build is not None  # the registry parser guarantees it
        contents = BUILDERS[ds.build](paths)
        missing = {o.target for o in built} - set(contents)
        if missing:
            raise DataFetchError(f"{ds.name}: the {ds.build} build did not produce {sorted(missing)}")
        for o in built:
            _write_output(contents[o.target], folder / o.target)
    for o in ds.outputs:
        actual = content_sha256(folder / o.target)
        if o.sha256 is None:
            seen[f"{ds.folder}/{o.target}"] = actual
        elif actual != o.sha256:
            raise DataFetchError(
                f"sha256 mismatch for {ds.folder}/{o.target} (built by {ds.name}): "
                f"expected {o.sha256}, got {actual}"
            )
    return seen


def _move_into_place(ds: Dataset, work: Path, dest: Path) -> None:
    src = work / ds.folder
    dst = dest / ds.folder
    if not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.rename(src, dst)  # the whole data set appears at once
        return
    for o in ds.outputs:
        (dst / o.target).parent.mkdir(parents=True, exist_ok=True)
        os.replace(src / o.target, dst / o.target)


def fetch_one(ds: Dataset, dest: Path, *, retries: int = 3, progress: bool = False, timeout: float = 60.0,
              log: Callable[[str], None] = lambda _m: None) -> FetchResult:
    """Fetch ``ds`` into ``dest`` unless it is complete and verified there already."""
    if _present(ds, dest) and check(ds, dest).ok:
        return FetchResult(ds, dest, fetched=False)
    _check_writable(dest, ds.folder)
    dl_dir = dest / DOWNLOADS / ds.name
    work = Path(tempfile.mkdtemp(prefix=f".fetch-{ds.name}-", dir=dest))
    try:
        seen = _build(ds, work, dl_dir, retries, progress, timeout, log)
        _move_into_place(ds, work, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for d in (dl_dir, dl_dir.parent):  # keep finished downloads for the next run, not empty folders
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
    if seen:
        records = read_records(dest)
        for o in ds.outputs:
            rel = f"{ds.folder}/{o.target}"
            if rel in seen:
                records[rel] = {"sha256": seen[rel], "url": o.download.url if o.download else ds.source}
        _write_records(dest, records)
    shutil.rmtree(dl_dir, ignore_errors=True)
    if dl_dir.parent.is_dir() and not any(dl_dir.parent.iterdir()):
        dl_dir.parent.rmdir()
    return FetchResult(ds, dest, fetched=True, recorded=seen)


def fetch(names: list[str], dest: str | os.PathLike | None = None, *, retries: int = 3,
          progress: bool | None = None, timeout: float = 60.0,
          log: Callable[[str], None] = lambda _m: None) -> list[FetchResult]:
    """Make the data sets ``names`` (all when empty) available; returns what was done for each.

    A data set already complete and verified anywhere on the lookup path (``dest`` or, without one,
    ``$STRUCTPE_DATA`` / ``shared/data``, then the cache) is left alone; otherwise it is fetched into
    ``dest`` (default: the fetch cache).
    """
    target = Path(dest).expanduser() if dest is not None else cache_root()
    roots = [target] if dest is not None else lookup_roots(None)
    if progress is None:
        progress = sys.stderr.isatty()
    out = []
    for ds in select(names):
        root = next((r for r in roots if _present(ds, r) and check(ds, r).ok), None)
        if root is not None:
            out.append(FetchResult(ds, root, fetched=False))
            log(f"{ds.name}: complete in {root}")
            continue
        log(f"{ds.name}: fetching into {target / ds.folder}")
        res = fetch_one(ds, target, retries=retries, progress=progress, timeout=timeout, log=log)
        for rel, sha in res.recorded.items():
            log(f"  {rel}: no pinned sha256; recorded {sha} (trust on first use)")
        out.append(res)
    return out
