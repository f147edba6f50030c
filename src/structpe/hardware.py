"""What the machine can do fast: native bf16. Read by every training loop (SiPE pre-training, the
quickstart, the LIS diagnostics), so it lives below all of them."""

from __future__ import annotations


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
