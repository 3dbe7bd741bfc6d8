"""``torch.broadcast_tensors``, ``broadcast_shapes`` and ``broadcast_to``: expands to the
common shape (views, differentiable through ``expand``), with torch's errors."""

from __future__ import annotations

from typing import Any

from .._size import Size, as_size
from .._tensor import Tensor

__all__ = ["broadcast_shapes", "broadcast_tensors", "broadcast_to"]


def _common(shapes: list[tuple[int, ...]], mismatch: Any) -> Size:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for index, shape in enumerate(shapes):
        for i, size in enumerate(shape, start=ndim - len(shape)):
            if size == out[i] or size == 1:
                continue
            if out[i] != 1:
                raise mismatch(index, i - ndim, shape, out[i], size)
            out[i] = size
    return as_size(tuple(out))


def broadcast_shapes(*shapes: Any) -> Size:
    """The shape tensors of these shapes broadcast to (ints count as one-dim shapes)."""
    given = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]

    def mismatch(index: int, dim: int, shape: tuple[int, ...], have: int, size: int) -> Any:
        expected = list(_common(given[:index], None)) if index else []
        return RuntimeError(
            f"Attempting to broadcast a dimension of length {size} at {dim}! Mismatching "
            f"argument at index {index} had {shape}; but expected shape should be "
            f"broadcastable to {expected}"
        )

    return _common(given, mismatch)


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Each tensor expanded (a view) to the common broadcast shape; one already of that shape
    is returned as it is, as torch does."""
    shapes = [tuple(t.shape) for t in tensors]

    def mismatch(index: int, dim: int, shape: tuple[int, ...], have: int, size: int) -> Any:
        return RuntimeError(
            f"The size of tensor a ({have}) must match the size of tensor b ({size}) at "
            f"non-singleton dimension {dim + max(len(s) for s in shapes)}"
        )

    shape = _common(shapes, mismatch)
    return tuple(t if tuple(t.shape) == shape else t.expand(shape) for t in tensors)


def broadcast_to(input: Tensor, shape: Any) -> Tensor:
    """``input.expand(shape)``."""
    return input.expand(shape)
