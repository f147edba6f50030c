"""The errors the ``structpe`` command line turns into one line on stderr and exit status 2.

structpe's own input errors subclass :class:`StructpeError` (defined next to the code that raises
them); the libraries' errors of unusable input (a corrupt safetensors file, malformed YAML) are
recognised by their classes, imported only when an error happens so the CLI imports nothing
extra. Library callers see ordinary Python exceptions: every ``StructpeError`` is also a
``ValueError``.
"""

from __future__ import annotations

import contextlib
import difflib
import gzip
import json
import os
import pickle
import zlib
from collections.abc import Iterable, Iterator


class StructpeError(ValueError):
    """Bad input to structpe: a value, file, or option that cannot be used as given."""


class PreparedDataError(StructpeError):
    """A prepared dataset is missing, incomplete or does not match the run (message says what)."""


class RecipeError(StructpeError):
    """A recipe file or override is invalid; the message names the file and the key."""


# Standard-library errors of unreadable inputs: missing files, directories given as files, corrupt
# or truncated gzip, malformed JSON, undecodable text.
INPUT_ERRORS: tuple[type[BaseException], ...] = (
    StructpeError,
    OSError,
    EOFError,
    zlib.error,
    json.JSONDecodeError,
    UnicodeError,
    pickle.UnpicklingError,  # torch.load(weights_only=True) refusing a pickled object
)


def is_input_error(err: BaseException) -> bool:
    """True when ``err`` is bad input (answered with one line), False for a bug (traceback)."""
    if isinstance(err, INPUT_ERRORS):
        return True
    if is_write_failure(err):  # a full or read-only disk met by a writer outside structpe.io
        return True
    import yaml
    from safetensors import SafetensorError

    return isinstance(err, (SafetensorError, yaml.YAMLError))


def is_write_failure(err: BaseException) -> bool:
    """A failed write of ours: an OSError without a file name (``write``, ``fsync``, ``replace`` on a
    full, read-only or forbidden file system; an error naming a file is a caller's, e.g. an input
    that was not found), or the bare ``Exception`` the Rust ``tokenizers`` library raises for I/O
    errors (``... (os error 28)``), or torch's ``PytorchStreamWriter ... file write failed``."""
    if isinstance(err, OSError):
        return err.filename is None
    if isinstance(err, RuntimeError):  # torch.save on a full disk
        return "file write failed" in str(err)
    return type(err) is Exception and "(os error " in str(err)


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
