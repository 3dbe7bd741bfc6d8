"""Comparisons and logical tests: boolean results, never part of the graph."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._base import Tensor, wrap
from .arith import broadcast_error

__all__ = [
    "all",
    "any",
    "eq",
    "ge",
    "gt",
    "isfinite",
    "isinf",
    "isnan",
    "le",
    "logical_and",
    "logical_not",
    "logical_or",
    "lt",
    "ne",
]


def _compare(fn: Any, a: Tensor, b: Any) -> Tensor:
    other = b._data if isinstance(b, Tensor) else b
    try:
        return wrap(np.asarray(fn(a._data, other)))
    except ValueError:
        raise broadcast_error(a._data, np.asarray(other)) from None


def eq(a: Tensor, b: Any) -> Tensor:
    return _compare(np.equal, a, b)


def ne(a: Tensor, b: Any) -> Tensor:
    return _compare(np.not_equal, a, b)


def lt(a: Tensor, b: Any) -> Tensor:
    return _compare(np.less, a, b)


def le(a: Tensor, b: Any) -> Tensor:
    return _compare(np.less_equal, a, b)


def gt(a: Tensor, b: Any) -> Tensor:
    return _compare(np.greater, a, b)


def ge(a: Tensor, b: Any) -> Tensor:
    return _compare(np.greater_equal, a, b)


def logical_and(a: Tensor, b: Any) -> Tensor:
    return _compare(np.logical_and, a, b)


def logical_or(a: Tensor, b: Any) -> Tensor:
    return _compare(np.logical_or, a, b)


def logical_not(a: Tensor) -> Tensor:
    return wrap(np.logical_not(a._data))


def isnan(a: Tensor) -> Tensor:
    return wrap(np.isnan(a._data))


def isinf(a: Tensor) -> Tensor:
    return wrap(np.isinf(a._data))


def isfinite(a: Tensor) -> Tensor:
    return wrap(np.isfinite(a._data))


def all(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return wrap(np.asarray(np.all(a._data, axis=dim, keepdims=keepdim)))


def any(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return wrap(np.asarray(np.any(a._data, axis=dim, keepdims=keepdim)))
