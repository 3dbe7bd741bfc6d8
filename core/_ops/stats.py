"""var_mean and std_mean: both statistics from one pass, one node with two outputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._base import Node, Tensor, edge, needs_grad, record, wrap
from .reduce import _correction, _expand_back, normalize_dims

__all__ = ["std_mean", "var_mean"]


class VarMeanBackward0(Node):
    """Outputs (var, mean); a missing output gradient counts as zero."""

    __slots__ = ("_count", "_denom", "_dims", "_keepdim", "_n_out", "mean", "out", "x")

    _count: int
    _denom: float
    _dims: tuple[int, ...]
    _keepdim: bool
    _n_out: int
    mean: np.ndarray
    out: np.ndarray
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return self.backward_multi([g, None])

    def _spread(self, g: np.ndarray) -> np.ndarray:
        return _expand_back(g, self.x.shape, self._dims, self._keepdim)

    def _stat_grad(self, g: np.ndarray) -> np.ndarray:
        """The gradient through the variance."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._spread(g) * 2 * (self.x - self.mean) / self._denom

    def backward_multi(self, grads: list[np.ndarray | None]) -> tuple[np.ndarray | None, ...]:
        g_stat, g_mean = grads
        grad = np.zeros(self.x.shape, dtype=self.x.dtype)
        if g_stat is not None:
            grad = grad + self._stat_grad(g_stat)
        if g_mean is not None:
            grad = grad + self._spread(g_mean) / self._count
        return (grad.astype(self.x.dtype, copy=False),)


class StdMeanBackward0(VarMeanBackward0):
    """Outputs (std, mean); d std = d var / (2 std), zero where std is 0 (as torch)."""

    __slots__ = ()

    def _stat_grad(self, g: np.ndarray) -> np.ndarray:
        out = self._spread(self.out)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(out == 0, 0, self._spread(g) / out)
            return scale * (self.x - self.mean) / self._denom


def _stat_mean(
    x: Tensor, dim: Any, unbiased: Any, keepdim: bool, correction: Any, sqrt: bool
) -> tuple[Tensor, Tensor]:
    if isinstance(dim, bool):  # var_mean(x, False): the old ``unbiased`` positional form
        dim, unbiased = None, dim
    d = x._data
    dims = normalize_dims(dim, d.ndim, reduce=True)
    count = int(np.prod([d.shape[i] for i in dims])) if d.ndim else 1
    denom = max(count - _correction(unbiased, correction), 0)
    mu = np.mean(d, axis=dims, keepdims=True)
    centered = d - mu
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.sum(centered * centered, axis=dims, keepdims=keepdim) / np.asarray(denom, d.dtype)
    stat = np.asarray(np.sqrt(stat) if sqrt else stat, dtype=d.dtype)
    mean = np.asarray(mu if keepdim else np.mean(d, axis=dims), dtype=d.dtype)
    if not needs_grad(x):
        return wrap(stat), wrap(mean)
    node = (StdMeanBackward0 if sqrt else VarMeanBackward0)((edge(x),))
    node._n_out = 2
    node._dims, node._keepdim, node._denom, node._count = dims, keepdim, denom, count
    node.x, node.mean = d, mu
    if sqrt:  # only std's backward reads its output (torch's VarMeanBackward0 saves only
        node.out = stat  # self): a kept ``var`` would make var.mul_() break the backward
    node._save(x)
    first, second = record(stat, node), record(mean, node)
    second._output_nr = 1
    return first, second


def var_mean(
    x: Tensor,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` over ``dim``, Bessel-corrected by default (``correction=1``)."""
    return _stat_mean(x, dim, unbiased, keepdim, correction, sqrt=False)


def std_mean(
    x: Tensor,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> tuple[Tensor, Tensor]:
    """``(std, mean)`` over ``dim``, with the same correction rules as :func:`var_mean`."""
    return _stat_mean(x, dim, unbiased, keepdim, correction, sqrt=True)
