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
The older names (``tag --input-format text``; ``prepare --input-format lines|text``) are still
accepted, with a one-line notice on stderr naming the new one.

Cheap to import (the CLI's ``--help`` reads the names).
"""

from __future__ import annotations

import sys
from pathlib import Path

from structpe.errors import StructpeError

INPUT_FORMATS = ("raw-lines", "raw-text", "tokenized-lines", "conllu", "jsonl")
EXTENSIONS = {".conllu": "conllu", ".conll": "conllu", ".conllx": "conllu", ".jsonl": "jsonl"}
DEFAULT_FORMAT = "raw-lines"

# older names per command -> today's (the same word meant different things in different commands)
OLD_NAMES = {
    "tag": {"text": "raw-lines"},
    "prepare": {"lines": "tokenized-lines", "text": "raw-text"},
}


def format_by_extension(path: str | Path) -> str:
    """The documented default for a file name (see the module docstring)."""
    name = Path(str(path)).name.lower().removesuffix(".gz")
    return next((fmt for ext, fmt in EXTENSIONS.items() if name.endswith(ext)), DEFAULT_FORMAT)


def choices(command: str) -> list[str]:
    """What ``--input-format`` accepts in ``command``: today's names, then the deprecated ones."""
    return [*INPUT_FORMATS, *OLD_NAMES.get(command, {})]


def resolve(command: str, value: str | None, path: str | Path | None, supported: tuple[str, ...]) -> str:
    """The input format of ``command``: ``value`` (an old name with a notice on stderr), else by
    ``path``'s extension; one that ``command`` cannot read is refused in one line."""
    if value in (None, "auto"):
        fmt = format_by_extension(path) if path is not None else DEFAULT_FORMAT
        how = f" (by the extension of {path})"
    else:
        fmt = OLD_NAMES.get(command, {}).get(value, value)
        if fmt != value:
            print(
                f"structpe {command}: --input-format {value} is deprecated; it means {fmt} (the name "
                "tag, prepare and eval share)",
                file=sys.stderr,
            )
        how = ""
    if fmt not in supported:
        raise StructpeError(f"--input-format {fmt}{how}: structpe {command} reads {', '.join(supported)}")
    return fmt
