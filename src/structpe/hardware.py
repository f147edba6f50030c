"""What the machine can do fast: native bf16, and how many CPU threads to use now. Read by every
training loop (SiPE pre-training, the quickstart, the LIS diagnostics) and every long command
(``generate``, ``eval``, ``finetune``, ``tag``), so it lives below all of them."""

from __future__ import annotations

import os

# the help of every long command's --threads (``set_cpu_threads`` applies it)
THREADS_HELP = "torch CPU threads (default: OMP_NUM_THREADS, else the cores idle now, as pretrain picks them)"


def cpu_threads(requested: int = 0) -> int:
    """Intra-op threads for CPU work: ``requested``, else ``OMP_NUM_THREADS``, else the cores
    that are free now. Oversubscribing a busy machine is expensive: every parallel op waits for its
    slowest thread, and a descheduled thread stalls the step (3.7x slower at load ~20 on 2 cores;
    ``generate`` beside one busy process: 218 s with every core, 23 s with one).

    "Free" is the idle share of the CPUs over half a second, measured while this process sleeps,
    not the load average: the load average still counts this process's own work of the last
    minute (e.g. the parser that just prepared the data) and then wrongly halves the threads."""
    if requested > 0:
        return requested
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    import psutil

    cores = os.cpu_count() or 1
    idle = 1.0 - psutil.cpu_percent(interval=0.5) / 100.0
    return max(1, min(cores, round(cores * idle)))


def set_cpu_threads(requested: int | None = None) -> int:
    """Set torch's intra-op threads to :func:`cpu_threads` (``--threads``, checked >= 1 by the
    command, else the idle share)."""
    import torch

    threads = cpu_threads(requested or 0)
    torch.set_num_threads(threads)
    return threads


def native_bf16() -> bool:
    """True when bf16 autocast runs on native hardware: a CUDA GPU with bf16, or a CPU whose oneDNN
    has bf16 kernels (AVX-512 BF16 / AMX). Elsewhere bf16 is emulated and, on this project's AVX2
    development CPU, 5x slower than float32 (docs/pretraining.md), so it is never a good default."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN
        return False


def resolve_bf16(setting: bool | str | None) -> bool:
    """A config's bf16 switch: true / false as given; ``"auto"`` (or None) = ``native_bf16()``."""
    return native_bf16() if setting is None or setting == "auto" else bool(setting)


# The CLIs' `--precision` choices and the bf16 setting each stands for (``resolve_bf16`` reads it)
PRECISIONS: dict[str, bool | None] = {"auto": None, "fp32": False, "bf16": True}
