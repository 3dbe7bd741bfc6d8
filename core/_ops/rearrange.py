"""Ops that move, mask or repeat entries without arithmetic: tril/triu, flip, narrow,
index_select and repeat_interleave. Each backward routes the gradient to where the entry came
from."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._base import Node, Tensor, edge, needs_grad, not_a_tensor, record, wrap
from .reduce import normalize_dims

__all__ = ["flip", "index_select", "narrow", "repeat_interleave", "tril", "triu"]


class TrilBackward0(Node):
    __slots__ = ("_diagonal",)

    _diagonal: int

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (np.tril(g, self._diagonal),)


class TriuBackward0(TrilBackward0):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (np.triu(g, self._diagonal),)


def _triangle(x: Tensor, diagonal: int, name: str, cls: type[TrilBackward0]) -> Tensor:
    d = x._data
    if d.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    out = np.tril(d, diagonal) if cls is TrilBackward0 else np.triu(d, diagonal)
    if needs_grad(x):
        node = cls((edge(x),))
        node._diagonal = diagonal
        return record(out, node)
    return wrap(out)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (entries above ``diagonal`` zeroed)."""
    return _triangle(x, diagonal, "tril", TrilBackward0)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (entries below ``diagonal`` zeroed)."""
    return _triangle(x, diagonal, "triu", TriuBackward0)


class FlipBackward0(Node):
    __slots__ = ("_dims",)

    _dims: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (np.flip(g, self._dims).copy(),)


def flip(x: Tensor, *dims: Any) -> Tensor:
    """Reverse the order of entries along ``dims`` (a copy, as in torch)."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    d = x._data
    axes = normalize_dims(dims, d.ndim, reduce=True) if dims else ()
    for i, axis in enumerate(axes):
        if axis in axes[:i]:
            raise RuntimeError(f"dim {axis} appears multiple times in the list of dims")
    out = np.flip(d, axes).copy() if axes else d.copy()
    if needs_grad(x):
        node = FlipBackward0((edge(x),))
        node._dims = axes
        return record(out, node)
    return wrap(out)


def narrow(x: Tensor, dim: int, start: Any, length: int) -> Tensor:
    """The view of ``length`` entries from ``start`` along ``dim`` (``SliceBackward0``)."""
    d = x._data
    (axis,) = normalize_dims(dim, d.ndim)
    size = d.shape[axis]
    start = int(start)
    if not -size <= start <= size:
        raise IndexError(
            f"start out of range (expected to be in range of [{-size}, {size}], but got {start})"
        )
    if start < 0:
        start += size
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    from .index import getitem

    return getitem(x, (slice(None),) * axis + (slice(start, start + length),))


class IndexSelectBackward0(Node):
    """The rows picked along ``_axis`` add their gradients back (an index may repeat)."""

    __slots__ = ("_axis", "_index", "_shape")

    _axis: int
    _index: np.ndarray
    _shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        grad = np.zeros(self._shape, dtype=g.dtype)
        # moveaxis gives a view: adding into it adds into grad
        np.add.at(np.moveaxis(grad, self._axis, 0), self._index, np.moveaxis(g, self._axis, 0))
        return (grad,)


def _select(x: Tensor, axis: int, index: np.ndarray) -> Tensor:
    out = np.take(x._data, index, axis=axis)
    if needs_grad(x):
        node = IndexSelectBackward0((edge(x),))
        node._axis, node._index, node._shape = axis, index, x._data.shape
        return record(out, node)
    return wrap(out)


def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries at ``index`` (a 1-D integer tensor) along ``dim``."""
    if not isinstance(index, Tensor):
        raise not_a_tensor("index_select", "index", index, 3)
    idx = index._data
    if idx.dtype.kind not in "iu":
        raise RuntimeError("index_select(): Expected dtype int32/int64 for index")
    if idx.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    (axis,) = normalize_dims(dim, x._data.ndim)
    size = x._data.shape[axis] if x._data.ndim else 1
    bad = idx[(idx < -size) | (idx >= size)] if idx.size else idx
    if bad.size:
        raise IndexError("index out of range in self")
    return _select(x if x._data.ndim else x.reshape(1), axis, idx.reshape(-1).astype(np.intp))


class ViewBackward0(Node):
    """repeat_interleave with one repeat count: torch expands a new dim and views it away, so
    the gradient sums each run of ``_repeats`` copies."""

    __slots__ = ("_axis", "_repeats", "_shape")

    _axis: int
    _repeats: int
    _shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        axis, shape = self._axis, self._shape
        runs = g.reshape(*shape[:axis], shape[axis], self._repeats, *shape[axis + 1 :])
        return (runs.sum(axis=axis + 1),)


def repeat_interleave(
    x: Tensor, repeats: Any = None, dim: int | None = None, *, output_size: int | None = None
) -> Tensor:
    """Repeat each entry (along ``dim``, or of the flattened tensor) ``repeats`` times.

    ``repeat_interleave(counts)`` with one integer tensor repeats its indices instead.
    """
    if repeats is None:
        counts = x._data
        return wrap(np.repeat(np.arange(counts.size, dtype=np.int64), counts))
    if dim is None:
        x = x.reshape(-1)
        axis = 0
    else:
        (axis,) = normalize_dims(dim, x._data.ndim)
    size = x._data.shape[axis]
    if isinstance(repeats, Tensor) and repeats._data.ndim == 1 and repeats._data.size != 1:
        counts = repeats._data
        if counts.size != size:
            raise RuntimeError(
                "repeats must have the same size as input along dim, but got "
                f"repeats.size(0) = {counts.size} and input.size({axis}) = {size}"
            )
        if (counts < 0).any():
            raise RuntimeError("repeats can not be negative")
        return _select(x, axis, np.repeat(np.arange(size), counts))
    count = int(repeats.item() if isinstance(repeats, Tensor) else repeats)
    if count < 0:
        raise RuntimeError("repeats can not be negative")
    out = np.repeat(x._data, count, axis=axis)
    if needs_grad(x):
        node = ViewBackward0((edge(x),))
        node._axis, node._repeats, node._shape = axis, count, x._data.shape
        return record(out, node)
    return wrap(out)
