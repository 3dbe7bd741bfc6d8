"""Tensor repr in PyTorch's style: ``tensor([1.0000, 2.5000], requires_grad=True)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ._tensor import Tensor

_DEFAULT_DTYPES = {np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_)}


def _float_formatter(data: np.ndarray) -> dict[str, object]:
    finite = data[np.isfinite(data)]
    if finite.size == 0 or (np.all(finite == np.round(finite)) and np.max(np.abs(finite)) < 1e8):
        return {"float_kind": lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)}
    big, small = (
        np.max(np.abs(finite)),
        np.min(np.abs(finite[finite != 0])) if np.any(finite) else 1.0,
    )
    if big >= 1e8 or small < 1e-4:
        return {"float_kind": lambda v: f"{v:.4e}"}
    return {"float_kind": lambda v: f"{v:.4f}"}


def tensor_repr(t: Tensor) -> str:
    data = t._data
    formatter = _float_formatter(data) if data.dtype.kind == "f" and data.size else None
    body = np.array2string(
        data,
        separator=", ",
        prefix="tensor(",
        formatter=formatter,
        threshold=1000,  # type: ignore[arg-type]
    )
    extras = []
    if data.dtype not in _DEFAULT_DTYPES or data.size == 0:
        extras.append(f"dtype=hookgrad.{data.dtype}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._requires_grad:
        extras.append("requires_grad=True")
    suffix = "".join(f", {e}" for e in extras)
    return f"tensor({body}{suffix})"
