"""The CPU autocast state the ops read, and the casts they make when it is on.

Like torch's, the state is thread-local. Every op of torch's CPU autocast lists reads one
attribute, ``state.lower`` (the lower-precision dtype while an enabled CPU autocast is active,
else None), so autocast costs a disabled program nothing more. When it is set, the op passes
its tensor arguments through :func:`to_lower` (torch's "lower_precision_fp" list: matmul,
linear, convolutions, attention) or :func:`to_float32` (torch's "fp32" list: the losses, prod).
Either casts only floating tensors other than float64, through ``Tensor.to`` (a differentiable
``ToCopyBackward0``), as torch's ``cached_cast`` does. Float32 leaves that require grad (the
parameters) are cast once per outermost autocast region and reused, as torch's weight cache.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["clear_cache", "state", "to_float32", "to_lower", "without_autocast"]


class _AutocastState(threading.local):
    lower: np.dtype[Any] | None = None  # the fast path: set only while CPU autocast is enabled
    enabled: bool = False
    dtype: np.dtype[Any] | None = None  # None: torch's default, bfloat16 (resolved on demand)
    cache_enabled: bool = True
    nesting: int = 0
    cache: dict[int, tuple[Any, Any]] | None = None


state = _AutocastState()
_FLOAT32 = np.dtype(np.float32)


def _eligible(data: np.ndarray) -> bool:
    kind = data.dtype.kind
    return (kind == "f" and data.dtype.itemsize != 8) or data.dtype.name == "bfloat16"


def _cast(t: Any, dtype: np.dtype[Any]) -> Any:
    data = getattr(t, "_data", None)
    if data is None or data.dtype == dtype or not _eligible(data):
        return t
    if not (state.cache_enabled and t.requires_grad and t.grad_fn is None and dtype != _FLOAT32):
        return t.to(dtype)
    if state.cache is None:
        state.cache = {}
    hit = state.cache.get(id(t))
    if hit is None or hit[0] is not t or hit[1].dtype != dtype:
        hit = state.cache[id(t)] = (t, t.to(dtype))  # keeps t alive: its id stays its own
    return hit[1]


def to_lower(*tensors: Any) -> tuple[Any, ...]:
    """``tensors`` with each floating non-float64 one cast to the autocast dtype."""
    dtype = state.lower
    assert dtype is not None
    return tuple(_cast(t, dtype) for t in tensors)


def to_float32(*tensors: Any) -> tuple[Any, ...]:
    """``tensors`` with each floating non-float64 one cast to float32 (torch's fp32 list)."""
    return tuple(_cast(t, _FLOAT32) for t in tensors)


def without_autocast(op: Any, *args: Any) -> Any:
    """``op(*args)`` with CPU autocast off: for ops torch leaves off its lists that hookgrad
    computes through a listed one (``mv`` and ``dot`` through ``matmul``)."""
    lower = state.lower
    if lower is None:
        return op(*args)
    state.lower = None
    try:
        return op(*args)
    finally:
        state.lower = lower


def clear_cache() -> None:
    """``torch.clear_autocast_cache()``: forget the casted parameters."""
    state.cache = None
