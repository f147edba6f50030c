"""The hexatagger that ships inside the package: its folder and its model card.

``get_parser("hexatagger")`` without ``model=`` loads :func:`default_model_dir` (``structpe tag
--parser hexatagger``, ``prepare --parser hexatagger`` ... with no ``--model``), so the parser works
on a fresh install with no training. The card (``card.json``, written by
``structpe.parser.export``) holds the sha256 of every file, which :func:`verify` checks.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

from structpe.errors import StructpeError
from structpe.io import read_json, sha256_file

CARD_NAME = "card.json"


def default_model_dir() -> Path:
    """The packaged hexatagger folder (``structpe/resources/hexatagger``)."""
    return Path(str(resources.files("structpe") / "resources" / "hexatagger"))


def read_card(directory: str | os.PathLike) -> dict[str, Any]:
    path = Path(directory) / CARD_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: is {directory} an exported hexatagger (parser export)?")
    return read_json(path)


def verify(directory: str | os.PathLike) -> None:
    """StructpeError naming the first file whose sha256 differs from the card's."""
    d = Path(directory)
    for name, want in read_card(d)["sha256"].items():
        if not (d / name).is_file() or sha256_file(d / name) != want:
            raise StructpeError(f"{d / name}: missing or its sha256 differs from {d / CARD_NAME}")
