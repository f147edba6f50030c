"""User strings that become parts of paths (study names, recipe labels, profile names) are checked
here, once: a safe character set, no separators, no ``..``. A name such as ``x/../../escaped``
would otherwise write outside the output folder (``cells/<label>/seed-1``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from structpe.errors import StructpeError

# letters, digits and . _ + = - ; starting with a letter or digit (no hidden files, no "-x" options)
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,99}")


def check_name(what: str, value: object, error: type[Exception] = StructpeError) -> str:
    """``value`` as a string when it is a safe path component, else ``error`` naming ``what``."""
    name = str(value)
    if not SAFE_NAME.fullmatch(name) or ".." in name:
        raise error(
            f"{what} {name!r}: names that become folder names use letters, digits and . _ + = - "
            "(at most 100, starting with a letter or digit; no '/', no '..')"
        )
    return name


def check_inside(path: str | os.PathLike, root: str | os.PathLike) -> Path:
    """``path`` when it stays inside ``root`` once ``..`` is resolved, else a StructpeError. Lexical
    (symlinks are not followed): a folder the user links elsewhere on purpose stays usable."""
    p, r = (Path(os.path.normpath(os.path.abspath(x))) for x in (path, root))
    if not p.is_relative_to(r):
        raise StructpeError(f"{path}: resolves to {p}, outside its output folder {r}")
    return Path(path)
