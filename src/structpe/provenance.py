"""The provenance block every result JSON carries: what produced the number, so it can be traced back.

One helper, :func:`provenance`, used by every writer (``structpe eval``, study cells, the
quickstart, LIS): structpe's version and git revision, the command line, the model folder and its
weights' sha256, the data files with their sha256, the parser's identity, the scoring settings
(likelihood, k, limits, seed), the CPU / GPU and the wall time. It is reporting only: nothing
hashes it, so adding a field never invalidates a cached result.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from structpe.io import sha256_file
from structpe.version import __version__

WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors")




@cache
def git_revision() -> str | None:
    """The commit of the checkout structpe runs from (``+dirty`` with local changes); None outside git."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no", "--", "."],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


@cache
def hardware() -> dict[str, Any]:
    """CPU model (``/proc/cpuinfo``; ``platform.processor()`` is empty on Linux), cores, GPU if any."""
    cpu = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": cpu, "cpu_count": os.cpu_count(), "machine": platform.machine()}
    torch = sys.modules.get("torch")  # only when the run loaded it: never pay for torch here
    if torch is not None:
        # the SIMD level torch's CPU kernels run at (AVX2 / AVX512): the same model differs by it
        info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def model_record(folder: str | Path | None) -> dict[str, Any] | None:
    """The model folder and the sha256 of its weights (None when the folder has none)."""
    if folder is None:
        return None
    folder = Path(folder)
    weights = next((folder / n for n in WEIGHT_FILES if (folder / n).is_file()), None)
    return {
        "path": str(folder.resolve()),
        "weights": weights.name if weights else None,
        "weights_sha256": sha256_file(weights) if weights else None,
    }


def data_records(paths: Iterable[str | Path | None]) -> list[dict[str, Any]]:
    """Each data file with its sha256 (a folder is recorded with its files' hashes)."""
    out = []
    for p in paths:
        if p is None:
            continue
        p = Path(p)
        if p.is_file():
            out.append({"path": str(p.resolve()), "sha256": sha256_file(p)})
        elif p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file())
            out.append(
                {"path": str(p.resolve()), "files": {str(f.relative_to(p)): sha256_file(f) for f in files}}
            )
        else:
            out.append({"path": str(p), "sha256": None})
    return out


_command: list[str] | None = None


def record_command(argv: list[str]) -> None:
    """Set the command line results report (``structpe.cli.main`` calls it: ``main(argv)`` may run
    in-process, where ``sys.argv`` is someone else's)."""
    global _command
    _command = list(argv)


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed: the program's name (not its install path) and its arguments."""
    argv = list(argv if argv is not None else _command if _command is not None else sys.argv)
    if argv:
        argv[0] = Path(argv[0]).name
    return shlex.join(argv)


def provenance(
    *,
    started: float | None = None,
    model: str | Path | None = None,
    data: Iterable[str | Path | None] = (),
    parser: Mapping[str, Any] | None = None,
    likelihood: str | None = None,
    k: int | None = None,
    limits: Mapping[str, Any] | None = None,
    seed: int | None = None,
    argv: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The block a result JSON stores under ``provenance`` (``started``: ``time.time()`` at the start)."""
    return {
        "structpe_version": __version__,
        "git_revision": git_revision(),
        "command": command_line(argv),
        "model": model_record(model),
        "data": data_records(data),
        "parser": dict(parser) if parser is not None else None,
        "likelihood": likelihood,
        "k": k,
        "limits": dict(limits or {}),
        "seed": seed,
        **extra,
        "versions": {
            "python": platform.python_version(),
            **{p: _version(p) for p in ("torch", "transformers", "tokenizers", "datasets")},
        },
        "hardware": hardware(),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_s": round(time.time() - started, 2) if started is not None else None,
    }
