"""One vocabulary of text inputs for ``structpe tag``, ``prepare`` and ``eval ppl`` (docs/data.md).

==================  =====================================================================
``raw-lines``       one raw sentence per line (the parser tokenizes; blank lines are skipped)
``raw-text``        running text: lines are joined into paragraphs at blank lines and the
                    parser splits the sentences (Gutenberg, users' prose)
``tokenized-lines`` one sentence per line, words separated by spaces, kept as they are (Brown)
``conllu``          CoNLL-U (the ``gold`` parser keeps its trees; other parsers re-parse its words)
``jsonl``           JSON lines from ``structpe tag`` (words and their tree)
==================  =====================================================================

Without ``--input-format`` the file name decides (``.gz`` aside): ``.conllu`` / ``.conll`` /
``.conllx`` -> ``conllu``, ``.jsonl`` -> ``jsonl``, anything else (``.txt`` ...) -> ``raw-lines``.

Cheap to import (the CLI's ``--help`` reads the names).
"""

from __future__ import annotations

from pathlib import Path

from structpe.errors import StructpeError

INPUT_FORMATS = ("raw-lines", "raw-text", "tokenized-lines", "conllu", "jsonl")
EXTENSIONS = {".conllu": "conllu", ".conll": "conllu", ".conllx": "conllu", ".jsonl": "jsonl"}
DEFAULT_FORMAT = "raw-lines"

def format_by_extension(path: str | Path) -> str:
    """The documented default for a file name (see the module docstring)."""
    name = Path(str(path)).name.lower().removesuffix(".gz")
    return next((fmt for ext, fmt in EXTENSIONS.items() if name.endswith(ext)), DEFAULT_FORMAT)


def resolve(command: str, value: str | None, path: str | Path | None, supported: tuple[str, ...]) -> str:
    """The input format of ``command``: ``value``, else by ``path``'s extension; one that ``command``
    cannot read is refused in one line."""
    if value in (None, "auto"):
        fmt = format_by_extension(path) if path is not None else DEFAULT_FORMAT
        how = f" (by the extension of {path})"
    else:
        fmt, how = value, ""
    if fmt not in supported:
        raise StructpeError(f"--input-format {fmt}{how}: structpe {command} reads {', '.join(supported)}")
    return fmt
