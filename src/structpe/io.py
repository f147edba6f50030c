"""Files in and out: every file structpe writes appears whole or not at all; text reads gunzip by content.

A write goes to a temporary file in the destination's folder (same file system), is flushed and
fsynced, and only then renamed over the destination with ``os.replace`` (atomic on POSIX and
Windows). A crash, an exception or Ctrl-C half-way leaves any earlier file untouched. Folders
(``save_pretrained`` output) are staged in a temporary folder and moved in file by file.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from structpe.errors import StructpeError, is_write_failure

GZIP_MAGIC = b"\x1f\x8b"


# Text input is strict UTF-8 (an undecodable byte is an error naming the file, never replaced or
# carried through); a byte-order mark at the very start is the encoding's signature, not text, and
# is dropped ("utf-8-sig"). A BOM anywhere else stays (it is a character of the text).
TEXT_ENCODING = "utf-8-sig"


def open_text(path: str | os.PathLike, what: str = "file") -> IO[str]:
    """Open a UTF-8 text file for reading (see ``TEXT_ENCODING``), gunzipping when the content is gzip
    (by its magic bytes, whatever the file name says). A missing file raises FileNotFoundError naming
    ``what`` and the path."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{what} not found: {p}")
    with p.open("rb") as fh:
        magic = fh.read(2)
    if magic == GZIP_MAGIC:
        return gzip.open(p, "rt", encoding=TEXT_ENCODING)
    return p.open("r", encoding=TEXT_ENCODING)


def read_stdin_text() -> str:
    """All of stdin decoded like a file (``TEXT_ENCODING``, strict). ``sys.stdin`` itself would
    smuggle undecodable bytes through as surrogates under Python's UTF-8 mode."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode(TEXT_ENCODING)
    except UnicodeDecodeError as err:
        raise StructpeError(f"<stdin>: not UTF-8 text (byte {err.start}: {err.reason})") from None


def stable_hash(obj: Any) -> str:
    """sha256 of a JSON-able object with sorted keys (config hashes, cache keys)."""
    import json

    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks (model cards, the prepare cache, data checks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_parent(path: Path) -> None:
    if path.is_dir():
        raise StructpeError(f"{path}: is a directory, expected a file path to write")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise StructpeError(f"{path}: parent {parent} is not a directory")


def is_special_file(path: Path) -> bool:
    """True when ``path`` (links followed) exists and is neither a regular file nor a folder: a
    device (``/dev/null``, ``/dev/full``, a terminal), a FIFO, a socket, or ``/proc/self/fd/1``
    naming a pipe. Such a file is written in place: renaming a temporary file over it would
    replace the device or pipe with a regular file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def write_target(path: str | os.PathLike) -> Path:
    """The file a write to ``path`` must replace: ``path`` itself, or, through any symbolic links,
    their final target (also a dangling link's), so the link stays a link and its target gets the
    new content. ``/proc/self/fd/N`` links are special files (:func:`is_special_file`), never
    resolved here."""
    p = Path(path)
    if not p.is_symlink():
        return p
    try:
        return Path(os.path.realpath(p, strict=False))
    except OSError as err:  # a link loop
        raise StructpeError(f"{p}: cannot follow the symbolic link ({_reason(err)})") from None


@contextlib.contextmanager
def _write_in_place(path: Path, mode: str, encoding: str | None) -> Iterator[IO[Any]]:
    """A special file opened and written as it is (see :func:`is_special_file`); a full device
    (``/dev/full``) or a failed write is one line. A closed pipe stays a ``BrokenPipeError``: the
    command line ends quietly on it."""
    try:
        with open(path, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
    except BrokenPipeError:
        raise
    except OSError as err:
        if err.filename is not None and err.filename != str(path):
            raise
        raise StructpeError(f"{path}: cannot write ({_reason(err)})") from None


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"
) -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; on success it replaces ``path``.

    The one place every structpe writer goes through: a special file (device, FIFO, a link to
    ``/proc/self/fd/1``) is written in place; a symbolic link is written through, atomically, to
    its target (the temporary file beside the target, then renamed over it), so the link is kept."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode 'w' or 'wb', not {mode!r}")
    if is_special_file(Path(path)):
        with _write_in_place(Path(path), mode, encoding) as fh:
            yield fh
        return
    path = write_target(path)
    _check_parent(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise StructpeError(f"{path}: cannot write there ({err.strerror})") from None
    try:
        os.chmod(tmp, _file_mode(path))  # mkstemp makes 0600 files; others may need to read ours
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if is_write_failure(err):
            raise StructpeError(f"{path}: cannot write ({_reason(err)}); earlier files are kept") from err
        raise


@contextlib.contextmanager
def open_output(path: str | os.PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """A command's output file: ``-`` is stdout (not closed afterwards), anything else goes
    through :func:`atomic_open`. Every ``-o``/``--output`` that names one file uses this."""
    if str(path) == "-":
        out = sys.stdout.buffer if "b" in mode else sys.stdout
        yield out
        out.flush()
        return
    with atomic_open(path, mode) as fh:
        yield fh


def read_json(path: str | os.PathLike, *, finite: bool = False) -> Any:
    """The JSON in ``path``; a missing, truncated, edited or undecodable file is an error naming it
    (``json`` reports only line and column). ``finite`` also refuses ``NaN`` / ``Infinity`` (scores:
    a result that is not a number is an error, not a number)."""
    import json

    def _refuse(literal: str) -> Any:
        raise StructpeError(f"{path}: holds {literal}, not a finite number (a broken or edited result)")

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise StructpeError(f"{p}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    try:
        return json.loads(text, parse_constant=_refuse if finite else None)
    except json.JSONDecodeError as err:
        raise StructpeError(f"{p}: not valid JSON ({err.msg} at line {err.lineno} column {err.colno}; "
                            "truncated or edited?)") from None


def read_json_object(path: str | os.PathLike) -> dict[str, Any]:
    """:func:`read_json` of a file that must hold one JSON object (a ``config.json``, a metadata file);
    a list or a number there is an error naming the file, not an ``AttributeError`` later."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise StructpeError(f"{path}: expected a JSON object, got a {type(data).__name__}")
    return data


def _reason(err: BaseException) -> str:
    return (err.strerror if isinstance(err, OSError) and err.strerror else None) or " ".join(str(err).split())


def _file_mode(path: Path) -> int:
    """The replaced file's permission bits, else what ``open`` would give a new file (0666 & ~umask).
    The umask can only be read by setting it; this is restored at once (a race only with threads
    that create files at the same instant)."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_open(path, "w") as fh:
        fh.write(text)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """JSON (indented, non-JSON values as str) through the atomic writer, creating the folder."""
    import json

    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)


@contextlib.contextmanager
def atomic_files(folder: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder inside ``folder``; on success each file written there is
    renamed into ``folder`` (for writers such as ``save_pretrained`` that take a folder).

    Every file appears whole or not at all, and other files already in ``folder`` are kept: the
    folder may be one the user also keeps other things in.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise StructpeError(f"{folder}: exists and is not a directory")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".staging.", suffix=".tmp", dir=folder))
    except OSError as err:
        raise StructpeError(f"{folder}: cannot write there ({_reason(err)})") from None
    try:
        with writing(folder, tmp):
            yield tmp
            for src in sorted(tmp.rglob("*")):
                if src.is_file():
                    dest = folder / src.relative_to(tmp)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    with open(src, "rb") as fh:
                        os.fsync(fh.fileno())
                    os.replace(src, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def writing(folder: str | os.PathLike, inside: str | os.PathLike | None = None) -> Iterator[None]:
    """Name ``folder`` in a failed write met while building it with a library that writes on its
    own (``datasets``: ``[Errno 28] No space left on device``, without a file name): one line, and
    the earlier output is kept (the build is staged beside it). An error naming a file under
    ``inside`` (the staging folder) is a failed write too."""
    try:
        yield
    except Exception as err:
        staged = inside is not None and isinstance(err, OSError) and str(inside) in str(err.filename)
        if is_write_failure(err) or staged:
            raise StructpeError(f"{folder}: cannot write ({_reason(err)}); earlier files are kept") from err
        raise


def replace_folder(staged: str | os.PathLike, out: str | os.PathLike) -> None:
    """Move the finished folder ``staged`` (built beside ``out``, on its file system) to ``out``.

    An earlier ``out`` is renamed aside first and removed only after the new folder is in place,
    so a signal at any moment leaves a loadable folder: the earlier one (at ``out``, or, between
    the two renames, at ``.<name>.old-*`` beside it) or the new one. Removing a large folder takes
    seconds; renames take microseconds."""
    staged, out = Path(staged), Path(out)
    old = None
    if out.exists() or out.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, old / out.name)
    os.replace(staged, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def output_folder(path: str | os.PathLike, option: str) -> Path:
    """An output folder a command rebuilds: a symbolic link to a folder is followed (the link stays,
    its target is rebuilt); ``-`` (stdout) or an existing file is refused in one line."""
    if str(path) == "-":
        raise StructpeError(f"{option} -: this output is a folder, not a stream; name a folder")
    p = Path(path)
    if p.is_symlink():
        p = write_target(p)
    if p.exists() and not p.is_dir():
        raise StructpeError(f"{option} {path}: exists and is not a folder")
    return p


MODEL_CONFIG_NAME = "config.json"
MODEL_WEIGHTS_NAME = "model.safetensors"


def save_module(module: Any, directory: str | os.PathLike, config: dict[str, Any], model_type: str) -> Path:
    """Save a plain ``nn.Module`` (the LISformer, the hexatagger: models outside Hugging Face's
    ``PreTrainedModel``) as one ``save_pretrained``-style folder: ``config.json`` + ``model.safetensors``
    (``model_type`` in its metadata), each file atomic. Never pickle."""
    import json

    from safetensors.torch import save

    out = Path(directory)
    state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
    blob = save(state, metadata={"format": "pt", "model_type": model_type})
    atomic_write_text(out / MODEL_CONFIG_NAME, json.dumps(config, indent=2) + "\n")
    atomic_write_bytes(out / MODEL_WEIGHTS_NAME, blob)
    return out


def load_module(directory: str | os.PathLike, build: Any, what: str, device: str = "cpu") -> Any:
    """The module ``build(config)`` with the weights of a :func:`save_module` folder loaded strictly.

    A missing file raises FileNotFoundError, a corrupt or foreign folder a StructpeError; both
    name the folder in one line (bad input, never a traceback).
    """

    from safetensors import SafetensorError
    from safetensors.torch import load_file

    d = Path(directory)
    for name in (MODEL_CONFIG_NAME, MODEL_WEIGHTS_NAME):
        if not (d / name).is_file():
            raise FileNotFoundError(f"{d / name} not found: is {d} a {what} folder (save_pretrained)?")
    try:
        module = build(read_json(d / MODEL_CONFIG_NAME))
        module.load_state_dict(load_file(str(d / MODEL_WEIGHTS_NAME), device=str(device)))
    except (ValueError, TypeError, KeyError, RuntimeError, SafetensorError) as err:
        msg = " ".join(str(err).split())[:500]
        raise StructpeError(f"{d}: not a loadable {what} folder ({type(err).__name__}: {msg})") from err
    return module.to(device)


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


def atomic_savefig(fig: Any, path: str | os.PathLike, **kwargs: Any) -> None:
    """``fig.savefig`` through a temporary sibling (the format comes from ``path``'s suffix)."""
    fmt = Path(path).suffix.lstrip(".") or "png"
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format=fmt, **kwargs)


def save_figure(fig: Any, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Lay a matplotlib figure out, write it atomically (its folder created) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_savefig(fig, path, dpi=dpi)
    plt.close(fig)
    return path


def earlier_results(
    path: str | os.PathLike,
    config: dict[str, Any],
    ignore: tuple[str, ...] = (),
) -> dict:
    """The ``models`` entries of an earlier ``results.json`` at ``path``, to keep beside new ones.

    Results are merged, never dropped: a run (or a merge) that writes into a folder holding
    results of other models keeps them. Results of another configuration (any key of ``config``
    other than ``models`` and ``ignore`` differs) are not comparable, so that is an error rather
    than a silent overwrite or a mixed table.
    """

    path = Path(path)
    if not path.is_file():
        return {}
    try:
        prev = read_json(path)
        models, prev_config = dict(prev["models"]), prev.get("config") or {}
    except (ValueError, KeyError, TypeError) as err:
        raise StructpeError(f"{path}: unreadable earlier results ({err}); move it away first") from err
    differ = config_differences(config, prev_config, ignore)
    if differ:
        raise StructpeError(
            f"{path} holds results of another configuration (differs in {differ}); "
            "choose another output folder, or move it away to start over"
        )
    return models


def config_differences(
    a: dict[str, Any],
    b: dict[str, Any],
    ignore: tuple[str, ...] = (),
) -> list[str]:
    """The keys (other than ``models`` and ``ignore``) whose values differ between two run configs,
    as JSON holds them (tuples compare as lists)."""
    import json

    a, b = (json.loads(json.dumps(c)) for c in (a, b))
    skip = {"models", *ignore}
    return sorted(k for k in set(a) | set(b) if k not in skip and a.get(k) != b.get(k))


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` split at newlines only. ``str.splitlines`` also splits at U+2028, U+0085,
    form feeds and lone carriage returns inside a line, which would shift every later line id."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]
