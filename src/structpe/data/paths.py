"""Where the local datasets live.

Every loader takes an explicit directory; when none is given it falls back to ``$STRUCTPE_DATA``
and then to a ``shared/data`` folder next to the working directory or the repository checkout,
which is the layout the project's CI uses (``../shared/data``).  After those comes the cache that
``structpe data fetch`` fills (``$STRUCTPE_CACHE``, default the user cache folder).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "STRUCTPE_DATA"
CACHE_ENV_VAR = "STRUCTPE_CACHE"


class DataNotFoundError(FileNotFoundError):
    """A dataset folder or file is missing; the message says where we looked."""


def _candidates() -> list[Path]:
    here = Path(__file__).resolve()
    roots = [Path.cwd(), *Path.cwd().parents[:2], *here.parents[:6]]
    out: list[Path] = []
    for r in roots:
        for rel in ("shared/data", "../shared/data"):
            p = (r / rel).resolve()
            if p not in out:
                out.append(p)
    return out


def cache_root() -> Path:
    """Where ``structpe data fetch`` puts data sets by default: ``$STRUCTPE_CACHE`` or the user cache."""
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR]).expanduser()
    import pooch

    return Path(pooch.os_cache("structpe")) / "data"


def lookup_roots(path: str | os.PathLike | None = None) -> list[Path]:
    """Data roots in lookup order: ``path`` (else ``$STRUCTPE_DATA``, else the ``shared/data``
    folders next to the working directory and the checkout), then the fetch cache."""
    if path is not None:
        roots = [Path(path).expanduser()]
    elif os.environ.get(ENV_VAR):
        roots = [Path(os.environ[ENV_VAR]).expanduser()]
    else:
        roots = _candidates()
    cache = cache_root()
    return [*roots, cache] if cache not in roots else roots


def fetch_hint(sub: str | None) -> str:
    """The ``structpe data fetch ...`` command that provides ``sub`` (a folder under the data root)."""
    from structpe.data.registry import owner_of

    names = owner_of(sub) if sub else []
    return "structpe data fetch" + "".join(f" {n}" for n in names)


def data_root(path: str | os.PathLike | None = None, *, sub: str | None = None) -> Path:
    """Resolve the data root (or ``root/sub``), raising a clear error if it does not exist.

    Order: the explicit ``path``; ``$STRUCTPE_DATA``; ``shared/data`` found by walking up from the
    working directory and from this package; then the fetch cache (``cache_root``).
    """
    tried = lookup_roots(path)
    for root in tried:
        target = root / sub if sub else root
        if target.exists():
            return target
    shown = tried if len(tried) <= 4 else [*tried[:3], tried[-1]]
    where = ", ".join(str(t / sub if sub else t) for t in shown)
    raise DataNotFoundError(
        f"data folder not found (looked at: {where}). Run `{fetch_hint(sub)}` to download it, pass a "
        f"directory explicitly or set ${ENV_VAR} to the folder that holds ud/, corpus/, blimp/, "
        "syntaxgym/, glue/, tinyshakespeare/."
    )
