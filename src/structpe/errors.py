"""The errors the ``structpe`` command line turns into one line on stderr and exit status 2.

structpe's own input errors subclass :class:`StructpeError` or, for the older ones that predate it,
are listed by dotted name in :data:`KNOWN_ERRORS` (resolved only when an error happens, so the CLI
imports nothing extra). Library callers see ordinary Python exceptions: every ``StructpeError`` is
also a ``ValueError``.
"""

from __future__ import annotations

import contextlib
import difflib
import gzip
import importlib
import json
import os
import zlib
from collections.abc import Iterable, Iterator


class StructpeError(ValueError):
    """Bad input to structpe: a value, file, or option that cannot be used as given."""


class PreparedDataError(ValueError):
    """A prepared dataset is missing, incomplete or does not match the run (message says what)."""


class RecipeError(ValueError):
    """A recipe file or override is invalid; the message names the file and the key."""


# Errors from structpe modules and libraries that mean "this input is unusable", not "a bug".
KNOWN_ERRORS = (
    "structpe.syntax.trees.InvalidTreeError",
    "structpe.syntax.trees.NonProjectiveError",
    "structpe.syntax.hexatags.InvalidTagsError",
    "structpe.syntax.conllu_io.ConlluError",
    "structpe.syntax.parsers.ParserInputError",
    "structpe.syntax.alignment.AlignmentError",
    "structpe.modules.prior.TagIdError",
    "structpe.train.trainer.VocabularyMismatchError",
    "structpe.eval.syntaxgym.FormulaError",
    "safetensors.SafetensorError",
    "yaml.YAMLError",
    "pickle.UnpicklingError",  # torch.load(weights_only=True) refusing a pickled object
)

# Standard-library errors of unreadable inputs: missing files, directories given as files, corrupt
# or truncated gzip, malformed JSON, undecodable text.
INPUT_ERRORS: tuple[type[BaseException], ...] = (
    StructpeError,
    PreparedDataError,
    RecipeError,
    OSError,
    EOFError,
    zlib.error,
    json.JSONDecodeError,
    UnicodeError,
)


def is_input_error(err: BaseException) -> bool:
    """True when ``err`` is bad input (answered with one line), False for a bug (traceback)."""
    if isinstance(err, INPUT_ERRORS):
        return True
    from structpe.io import is_write_failure  # lazily: structpe.io imports this module

    if is_write_failure(err):  # a full or read-only disk met by a writer outside structpe.io
        return True
    for dotted in KNOWN_ERRORS:
        module, _, name = dotted.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if isinstance(err, cls):
            return True
    return False


def closest(name: str, valid: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest valid name, or an empty string (difflib)."""
    match = difflib.get_close_matches(name, list(valid), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def check_choice(option: str, value: str, valid: Iterable[str]) -> str:
    """``value`` if it is one of ``valid``, else a StructpeError naming the option and the choices."""
    valid = list(valid)
    if value not in valid:
        raise StructpeError(f"{option}: unknown value {value!r}{closest(value, valid)}; choose from {valid}")
    return value


def check_positive(option: str, value: int | float | None, *, allow_none: bool = True) -> None:
    """Refuse ``value < 1`` for counts, sizes and limits (``--limit 0`` is not "no limit")."""
    if value is None:
        if not allow_none:
            raise StructpeError(f"{option} is required")
        return
    if value < 1:
        raise StructpeError(f"{option} must be >= 1, got {value}")


@contextlib.contextmanager
def reading(path: str | os.PathLike) -> Iterator[None]:
    """Name ``path`` in errors of corrupt input met while reading it (truncated or bad gzip,
    undecodable bytes), which the standard library reports without the file name."""
    try:
        yield
    except (EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError) as err:
        raise StructpeError(f"{path}: unreadable ({type(err).__name__}: {err})") from err


def check_device(device: str, option: str = "--device") -> None:
    """Refuse a device string torch cannot parse, or CUDA on a machine without it ("auto" passes)."""
    if device == "auto":
        return
    import torch

    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise StructpeError(f"{option}: {device!r} is not a torch device ({err})") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise StructpeError(f"{option} {device}: CUDA is not available on this machine (use cpu)")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise StructpeError(f"{option} {device}: MPS is not available on this machine (use cpu)")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise StructpeError(f"{option} {device}: structpe runs on cpu, cuda or mps, not {dev.type!r}")
