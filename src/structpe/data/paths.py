"""Where the local datasets live.

Every loader takes an explicit directory; when none is given it falls back to ``$STRUCTPE_DATA``
and then to a ``shared/data`` folder next to the working directory or the repository checkout,
which is the layout the project's CI uses (``../shared/data``).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "STRUCTPE_DATA"


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


def data_root(path: str | os.PathLike | None = None, *, sub: str | None = None) -> Path:
    """Resolve the data root (or ``root/sub``), raising a clear error if it does not exist.

    Order: the explicit ``path``; ``$STRUCTPE_DATA``; ``shared/data`` found by walking up from the
    working directory and from this package.
    """
    if path is not None:
        root = Path(path).expanduser()
        tried = [root]
    elif os.environ.get(ENV_VAR):
        root = Path(os.environ[ENV_VAR]).expanduser()
        tried = [root]
    else:
        tried = _candidates()
        root = next((p for p in tried if p.is_dir()), tried[0])
    target = root / sub if sub else root
    if not target.exists():
        where = ", ".join(str(t / sub if sub else t) for t in tried[:4])
        raise DataNotFoundError(
            f"data folder not found (looked at: {where}). Pass a directory explicitly or set "
            f"${ENV_VAR} to the folder that holds ud/, corpus/, blimp/, syntaxgym/, glue/, tinyshakespeare/."
        )
    return target
