"""Indexing: basic slicing gives views, advanced indexing copies and scatters back with add."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._base import Node, Tensor, edge, needs_grad, record, sum_to, wrap

__all__ = ["gather", "getitem", "index_put", "masked_fill", "normalize_index"]

_BASIC = (int, slice, type(None), type(Ellipsis))


def normalize_index(index: Any) -> tuple[Any, bool]:
    """Turn Tensors inside an index into arrays; report whether numpy will copy (advanced)."""
    items = index if isinstance(index, tuple) else (index,)
    converted = []
    advanced = False
    for item in items:
        if isinstance(item, Tensor):
            item = item._data
            if item.ndim == 0 and item.dtype.kind in "iu":
                item = int(item)
        elif isinstance(item, (list, np.ndarray, bool, np.bool_)):
            item = np.asarray(item)
        elif isinstance(item, np.integer):
            item = int(item)
        if not isinstance(item, _BASIC):
            advanced = True
        converted.append(item)
    return tuple(converted), advanced


def _index_error(d: np.ndarray, error: IndexError) -> IndexError:
    return IndexError(f"{error} (indexing a tensor of shape {list(d.shape)})")


class SliceBackward0(Node):
    __slots__ = ("_index", "_shape")

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        grad = np.zeros(self._shape, dtype=g.dtype)
        grad[self._index] = g
        return (grad,)


class IndexBackward0(SliceBackward0):
    """Advanced indexing: repeated indices must add up, hence ``np.add.at``."""

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        grad = np.zeros(self._shape, dtype=g.dtype)
        np.add.at(grad, self._index, g)
        return (grad,)


def getitem(x: Tensor, index: Any) -> Tensor:
    d = x._data
    idx, advanced = normalize_index(index)
    try:
        out = d[idx]
    except IndexError as error:
        raise _index_error(d, error) from None
    out = np.asarray(out) if not isinstance(out, np.ndarray) else out
    node = None
    if needs_grad(x):
        node = (IndexBackward0 if advanced else SliceBackward0)((edge(x),))
        node._index = idx
        node._shape = d.shape
    if advanced:
        return record(out, node) if node is not None else wrap(out)
    result = record(out, node) if node is not None else wrap(out)
    result._base = x if x._base is None else x._base
    result._vbox = x._vbox
    return result


class IndexPutBackward0(Node):
    __slots__ = ("_index", "_value_shape")

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        e_self, e_value = self._next
        grad_self = grad_value = None
        if e_self is not None:
            grad_self = g.copy()
            grad_self[self._index] = 0
        if e_value is not None:
            grad_value = sum_to(np.asarray(g[self._index]), self._value_shape)
        return (grad_self, grad_value)


def index_put(x: Tensor, index: Any, value: Any) -> Tensor:
    """Out-of-place ``x[index] = value``: the kernel behind ``__setitem__``."""
    idx, _ = normalize_index(index)
    tv = value if isinstance(value, Tensor) else wrap(np.asarray(value, dtype=x._data.dtype))
    out = x._data.copy()
    try:
        out[idx] = tv._data
    except (ValueError, IndexError) as error:
        raise RuntimeError(
            f"cannot assign a value of shape {list(tv._data.shape)} to index {index!r} of a tensor "
            f"of shape {list(x._data.shape)}: {error}"
        ) from None
    if needs_grad(x, tv):
        node = IndexPutBackward0((edge(x), edge(tv)))
        node._index = idx
        node._value_shape = tv._data.shape
        return record(out, node)
    return wrap(out)


def setitem(x: Tensor, index: Any, value: Any) -> None:
    from .inplace import apply_inplace

    def kernel(src: Tensor) -> Tensor:
        return index_put(src, index, value)

    apply_inplace(x, kernel, value if isinstance(value, Tensor) else None)


def masked_fill(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    """Replace entries where ``mask`` is True; those entries get no gradient."""
    from .arith import where

    fill = value if isinstance(value, Tensor) else wrap(np.asarray(value, dtype=x._data.dtype))
    return where(mask, fill, x)


class GatherBackward0(Node):
    __slots__ = ("_dim", "_index", "_shape")

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        grad = np.zeros(self._shape, dtype=g.dtype)
        idx = np.indices(self._index.shape, sparse=True)
        full = list(idx)
        full[self._dim] = self._index
        np.add.at(grad, tuple(full), g)
        return (grad,)


def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """Pick values along ``dim`` at ``index`` (same rank as ``x``)."""
    d = x._data
    idx = index._data.astype(np.intp, copy=False)
    axis = dim % max(d.ndim, 1)
    out = np.take_along_axis(d, idx, axis=axis)
    if needs_grad(x):
        node = GatherBackward0((edge(x),))
        node._dim, node._index, node._shape = axis, idx, d.shape
        return record(out, node)
    return wrap(out)
