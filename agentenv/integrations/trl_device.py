"""The ``GRPOConfig`` fields the machine's hardware supports, so one recipe runs anywhere.

TRL's ``GRPOConfig`` turns ``bf16`` on by default, and ``TrainingArguments`` then refuses a
machine without a GPU ("Your setup doesn't support bf16/gpu"). :func:`device_args` says what
this machine can do: a GPU with bf16 (Ampere and later) trains in bf16, any other GPU in full
precision, and a machine without a GPU on the CPU (``use_cpu``) in full precision. torch is
imported only when the function is called.
"""

from __future__ import annotations

from typing import Any

__all__ = ["device_args"]


def device_args() -> dict[str, Any]:
    """``{"bf16": True}`` on a GPU that supports bf16, ``{"bf16": False}`` on another GPU,
    ``{"use_cpu": True, "bf16": False}`` without one; spread it into ``GRPOConfig`` before any
    overrides of your own."""
    import torch

    if torch.cuda.is_available():
        return {"bf16": bool(torch.cuda.is_bf16_supported())}
    return {"use_cpu": True, "bf16": False}
