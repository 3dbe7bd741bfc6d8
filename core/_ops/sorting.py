"""Order statistics: sort, argsort, topk and median, with torch's result tuples.

Sorting is stable (equal values keep their order, descending too) and NaN counts as the
largest value, as on torch's CPU. The gradient of the values goes back to the picked indices.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from ._base import Node, Tensor, edge, needs_grad, record, wrap
from .reduce import evenly_distribute, normalize_dims

__all__ = ["argsort", "median", "sort", "topk"]

# torch.return_types.sort / topk / median: named (values, indices) pairs
sort_result = namedtuple("sort", ["values", "indices"])  # type: ignore[name-match]
topk_result = namedtuple("topk", ["values", "indices"])  # type: ignore[name-match]
median_result = namedtuple("median", ["values", "indices"])  # type: ignore[name-match]


def _order(d: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable sorting indices along ``axis``; descending keeps ties in their first order."""
    if not descending:
        return np.argsort(d, axis=axis, kind="stable")
    n = d.shape[axis]
    reversed_order = np.argsort(np.flip(d, axis), axis=axis, kind="stable")
    return n - 1 - np.flip(reversed_order, axis)


class SortBackward0(Node):
    """Scatter the values' gradient back to the entries they came from."""

    __slots__ = ("_axis", "_index", "_shape")

    _axis: int
    _index: np.ndarray
    _shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        grad = np.zeros(self._shape, dtype=g.dtype)
        if grad.ndim == 0:
            return (g.reshape(()),)
        np.put_along_axis(grad, self._index, g.reshape(self._index.shape), axis=self._axis)
        return (grad,)


class TopkBackward0(SortBackward0):
    __slots__ = ()


def _picked(
    x: Tensor,
    index: np.ndarray,
    axis: int,
    cls: type[SortBackward0],
    result: Any,
    keepdim: bool = True,
) -> Any:
    """``result(values, indices)`` for the entries at ``index`` along ``axis`` (that axis
    squeezed away unless ``keepdim``)."""
    d = x._data
    values = np.take_along_axis(d, index, axis=axis) if d.ndim else d.copy()
    if not keepdim and d.ndim:
        values = np.squeeze(values, axis)
    indices = wrap(index.astype(np.int64).reshape(values.shape))
    if needs_grad(x):
        node = cls((edge(x),))
        node._axis, node._index, node._shape = axis, index, d.shape
        return result(record(values, node), indices)
    return result(wrap(values), indices)


def _axis(d: np.ndarray, dim: int) -> int:
    return normalize_dims(dim, d.ndim)[0]


def sort(x: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Any:
    """``(values, indices)`` sorted along ``dim``."""
    d = x._data
    axis = _axis(d, dim)
    index = _order(d, axis, descending) if d.ndim else np.zeros((), np.int64)
    return _picked(x, index, axis, SortBackward0, sort_result)


def argsort(x: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Tensor:
    """The indices that sort ``x`` along ``dim``."""
    d = x._data
    if d.ndim == 0:
        return wrap(np.zeros((), np.int64))
    return wrap(_order(d, _axis(d, dim), descending).astype(np.int64))


def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
    """The ``k`` largest (or smallest) entries along ``dim`` and their indices."""
    d = x._data
    axis = _axis(d, dim)
    size = d.shape[axis] if d.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    if d.ndim == 0:
        return _picked(x, np.zeros((), np.int64), 0, TopkBackward0, topk_result)
    index = np.take(_order(d, axis, largest), np.arange(k), axis=axis)
    return _picked(x, index, axis, TopkBackward0, topk_result)


class MedianBackward0(Node):
    """``median()`` of all entries: the gradient is shared among the entries equal to it."""

    __slots__ = ("out", "x")

    out: np.ndarray
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (evenly_distribute(g, self.x, self.out),)


class MedianBackward1(SortBackward0):
    """median along a dim."""

    __slots__ = ()


def _median_index(d: np.ndarray, axis: int) -> np.ndarray:
    """Index (keepdims) of the lower median along ``axis``, or of the first NaN if any (torch
    propagates NaN)."""
    n = d.shape[axis]
    order = np.argsort(d, axis=axis, kind="stable")
    lower = np.take(order, [(n - 1) // 2], axis=axis)
    nan = np.isnan(d) if d.dtype.kind == "f" else np.zeros(d.shape, bool)
    first_nan = np.argmax(nan, axis=axis, keepdims=True)
    return np.where(nan.any(axis=axis, keepdims=True), first_nan, lower)


def median(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """The lower median of all entries, or ``(values, indices)`` along ``dim``."""
    d = x._data
    if dim is None:
        if d.size == 0:
            return wrap(np.asarray(np.nan, dtype=d.dtype))
        flat = int(_median_index(d.reshape(-1), 0)[0])
        out = np.asarray(d.reshape(-1)[flat])
        if needs_grad(x):
            node = MedianBackward0((edge(x),))
            node.x, node.out = d, out
            node._save(x)
            return record(out, node)
        return wrap(out)
    axis = _axis(d, dim)
    if d.ndim == 0:
        return _picked(x, np.zeros((), np.int64), 0, MedianBackward1, median_result)
    if d.shape[axis] == 0:
        raise IndexError(f"median(): Expected reduction dim {axis} to have non-zero size.")
    return _picked(x, _median_index(d, axis), axis, MedianBackward1, median_result, keepdim)
