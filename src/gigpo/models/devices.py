"""Device and dtype resolution for model loading ("auto" -> cuda/bfloat16 when present, else cpu/float32)."""

from __future__ import annotations

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"`` -> ``cuda`` if available else ``cpu``; otherwise any string ``torch.device`` accepts.

    Raises ValueError for an unparseable device or a CUDA device when CUDA is not available.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"unknown device {device!r}; use 'auto', 'cpu', 'cuda' or 'cuda:N'") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device {device!r} requested but CUDA is not available here; use device='auto' or 'cpu'"
        )
    return dev


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``"auto"`` -> bfloat16 on CUDA (float16 where bf16 is unsupported), float32 elsewhere.

    Accepted explicit values: ``"float32"``, ``"bfloat16"``, ``"float16"``; anything else raises ValueError.
    """
    if dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {['auto', *DTYPES]}")
    return DTYPES[dtype]
