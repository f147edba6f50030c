"""Atomic outputs: every file structpe writes appears whole or not at all.

A write goes to a temporary file in the destination's folder (same file system), is flushed and
fsynced, and only then renamed over the destination with ``os.replace`` (atomic on POSIX and
Windows). A crash, an exception or Ctrl-C half-way leaves any earlier file untouched. Folders
(tokenizers, prepared datasets) are built under a temporary name and swapped in the same way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from structpe.errors import StructpeError


def _check_parent(path: Path) -> None:
    if path.is_dir():
        raise StructpeError(f"{path}: is a directory, expected a file path to write")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise StructpeError(f"{path}: parent {parent} is not a directory")


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"
) -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; on success it replaces ``path``."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    _check_parent(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_open(path, "w") as fh:
        fh.write(text)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder next to ``path``; on success it takes ``path``'s place.

    An existing ``path`` is moved aside first and deleted only after the new folder is in place,
    so a failure at any point leaves the old folder (or no folder) -- never a half-written one.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise StructpeError(f"{path}: exists and is not a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        old = None
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, old / path.name)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def refuse_overwrite_input(output: str | os.PathLike, inputs: list[str | os.PathLike], option: str) -> None:
    """StructpeError when ``output`` names the same file as one of ``inputs`` (would destroy it)."""
    out = Path(output)
    for src in inputs:
        if str(src) == "-" or str(output) == "-":
            continue
        same = out.resolve() == Path(src).resolve()
        if not same and out.exists() and Path(src).exists():
            same = os.path.samefile(out, src)
        if same:
            raise StructpeError(f"{option} {output}: is also an input; choose another output path")
