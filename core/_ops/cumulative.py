"""Scans along one dim: cumsum and cumprod, each with torch's dtype rule and backward."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtype import resolve_dtype
from ._base import Node, Tensor, edge, needs_grad, record, wrap
from .reduce import normalize_dims

__all__ = ["cumprod", "cumsum"]


def _scan_dtype(d: np.ndarray, dtype: Any) -> np.dtype[Any]:
    """torch's result dtype: ``dtype`` if given, else integers and bools widen to int64."""
    target = resolve_dtype(dtype)
    if target is not None:
        return target
    return np.dtype(np.int64) if d.dtype.kind in "biu" else d.dtype


def _reverse_cumsum(g: np.ndarray, axis: int) -> np.ndarray:
    """``out[i] = sum(g[i:])`` along ``axis``: what each entry of a cumsum fed."""
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)


class CumsumBackward0(Node):
    __slots__ = ("_axis", "_dtype")

    _axis: int
    _dtype: np.dtype[Any]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        grad = _reverse_cumsum(g, self._axis) if g.ndim else g
        return (grad.astype(self._dtype, copy=False),)


def cumsum(x: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Running sums along ``dim``."""
    d = x._data
    (axis,) = normalize_dims(dim, d.ndim)
    target = _scan_dtype(d, dtype)
    out = np.cumsum(d, axis=axis, dtype=target) if d.ndim else d.astype(target)
    if needs_grad(x):
        node = CumsumBackward0((edge(x),))
        node._axis, node._dtype = axis, d.dtype
        return record(out, node)
    return wrap(out)


class CumprodBackward0(Node):
    """d out_k / d x_i = prod(x_j for j <= k, j != i) for k >= i.

    Without zeros that is ``out_k / x_i``; with zeros each entry's "product of the others" is
    computed directly (one scan per position), so a zero gets its exact gradient as in torch.
    """

    __slots__ = ("_axis", "out", "x")

    _axis: int
    out: np.ndarray
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x, axis = self.x, self._axis
        if x.ndim == 0:
            return (g.astype(x.dtype, copy=False),)
        if not (x == 0).any():
            return ((_reverse_cumsum(g * self.out, axis) / x).astype(x.dtype, copy=False),)
        grad = np.empty_like(x)
        n = x.shape[axis]
        for i in range(n):
            others = x.copy()
            np.moveaxis(others, axis, 0)[i] = 1
            fed = np.moveaxis(g * np.cumprod(others, axis=axis), axis, 0)[i:]
            np.moveaxis(grad, axis, 0)[i] = fed.sum(axis=0)
        return (grad,)


def cumprod(x: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Running products along ``dim``."""
    d = x._data
    (axis,) = normalize_dims(dim, d.ndim)
    target = _scan_dtype(d, dtype)
    out = np.cumprod(d, axis=axis, dtype=target) if d.ndim else d.astype(target)
    if needs_grad(x):
        node = CumprodBackward0((edge(x),))
        node._axis, node.x, node.out = axis, d, out
        node._save(x)
        return record(out, node)
    return wrap(out)
