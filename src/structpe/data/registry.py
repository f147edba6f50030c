"""The data sets structpe reads: upstream source pinned to a commit, sha256, license, layout.

The table itself is ``registry.toml`` next to this module (package data); this module turns it into
dataclasses and answers "which data set owns this folder" for error messages.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import PurePosixPath
from typing import Any

GROUPS = {"ud": "ud-", "glue": "glue-"}  # `structpe data fetch ud` = every ud-* data set


@dataclass(frozen=True)
class Download:
    """One upstream file: its URL and the sha256 of its bytes, or else its git blob id (the upstream
    tree records that even for files too large to hash here); with neither, trust on first use."""

    url: str
    sha256: str | None
    git_blob: str | None = None


@dataclass(frozen=True)
class Output:
    """One file of structpe's layout (``target`` under the data set's folder) and where it comes from.

    ``sha256`` is the hash of the file's content, decompressed when ``target`` ends in ``.gz``.
    ``download`` is set for a file copied (or gzip-compressed) from one upstream file; otherwise the
    data set's ``build`` transformation makes it from the data set's ``downloads``.
    """

    target: str
    sha256: str | None
    download: Download | None = None


@dataclass(frozen=True)
class Dataset:
    name: str
    folder: str
    license: str
    used_for: str
    source: str
    outputs: tuple[Output, ...]
    build: str | None = None
    downloads: tuple[Download, ...] = ()
    note: str | None = None

    @property
    def pinned(self) -> bool:
        """True when every download is checked against a sha256 or git blob id (none trusted on first use)."""
        return all(d.sha256 or d.git_blob for d in self.all_downloads)

    @property
    def all_downloads(self) -> tuple[Download, ...]:
        return tuple(o.download for o in self.outputs if o.download) + self.downloads


def _hash(value: str, where: str, kind: str = "sha256", length: int = 64) -> str | None:
    if value == "":
        return None
    if len(value) != length or any(c not in "0123456789abcdef" for c in value):
        raise ValueError(f"registry: {where}: {value!r} is not a {kind} hex digest")
    return value


def _file_row(name: str, base: str, row: list[str]) -> Output:
    """``[target, upstream path, sha256]`` or ``[target, upstream path, "", git blob id]``."""
    target, src, sha, *blob = row
    where = f"{name}/{target}"
    git_blob = _hash(blob[0], where, "git blob", 40) if blob else None
    return Output(target, _hash(sha, where), Download(base + src, _hash(sha, where), git_blob))


def parse_registry(table: dict[str, Any]) -> dict[str, Dataset]:
    """Datasets from the parsed TOML table (see the comment at the top of ``registry.toml``)."""
    out = {}
    for name, spec in table.items():
        base = spec["base_url"]
        outputs = [_file_row(name, base, row) for row in spec.get("files", [])]
        downloads = tuple(
            Download(base + src, _hash(h, f"{name}/{src}")) for src, h in spec.get("downloads", [])
        )
        outputs += [Output(t, _hash(h, f"{name}/{t}")) for t, h in spec.get("outputs", [])]
        if spec.get("outputs") and not spec.get("build"):
            raise ValueError(f"registry: {name} lists outputs but no build transformation")
        for o in outputs:
            if PurePosixPath(o.target).is_absolute() or ".." in PurePosixPath(o.target).parts:
                raise ValueError(f"registry: {name}: target {o.target!r} must stay inside its folder")
        out[name] = Dataset(
            name=name,
            folder=spec["folder"],
            license=spec["license"],
            used_for=spec["used_for"],
            source=spec["source"],
            outputs=tuple(outputs),
            build=spec.get("build"),
            downloads=downloads,
            note=spec.get("note"),
        )
    return out


@cache
def registry() -> dict[str, Dataset]:
    """The package's data sets by name, in the order of ``registry.toml``."""
    text = resources.files("structpe.data").joinpath("registry.toml").read_text(encoding="utf-8")
    return parse_registry(tomllib.loads(text))


def select(names: list[str] | tuple[str, ...], datasets: dict[str, Dataset] | None = None) -> list[Dataset]:
    """Data sets for ``names`` (empty = all; ``ud`` / ``glue`` = the group); unknown names: ValueError."""
    datasets = registry() if datasets is None else datasets
    if not names:
        return list(datasets.values())
    chosen: list[Dataset] = []
    for n in names:
        key = n.lower()
        hits = [d for d in datasets.values() if key in GROUPS and d.name.startswith(GROUPS[key])]
        if key in datasets:
            hits = [datasets[key]]
        if not hits:
            raise ValueError(f"unknown data set {n!r}; known: {', '.join([*datasets, *GROUPS])}")
        chosen += [d for d in hits if d not in chosen]
    return chosen


def owner_of(sub: str, datasets: dict[str, Dataset] | None = None) -> list[str]:
    """Names of the data sets stored in (or under) the data-root folder ``sub``, e.g. ``glue``."""
    datasets = registry() if datasets is None else datasets
    sub = sub.strip("/")
    return [
        d.name
        for d in datasets.values()
        if d.folder == sub or d.folder.startswith(sub + "/") or sub.startswith(d.folder + "/")
    ]
