"""Reductions and the normalising functions built on them (softmax, log_softmax, logsumexp)."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from .._dtype import is_floating, opmath, opsum
from ..amp._state import state as _autocast
from ..amp._state import to_float32
from ._base import Node, Tensor, edge, needs_grad, record, wrap
from ._graph import expand_back, kept, linear_grad, only, saved_input, saved_output, sign_of
from .arith import where
from .unary import sgn

__all__ = [
    "amax",
    "amin",
    "argmax",
    "argmin",
    "log_softmax",
    "logsumexp",
    "max",
    "mean",
    "min",
    "norm",
    "prod",
    "softmax",
    "std",
    "sum",
    "var",
]

_max = max
_min = min
_sum = sum

values_indices = namedtuple("values_indices", ["values", "indices"])


def normalize_dims(dim: Any, ndim: int, *, reduce: bool = False) -> tuple[int, ...]:
    """dim=None (or empty) means every dimension; negative dims count from the end.

    A 0-d tensor accepts dim 0 and -1 (as torch); for a reduction (``reduce=True``) that
    means no axis at all, since numpy has none to fold.
    """
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    span = _max(ndim, 1)
    out = []
    for d in dims:
        if not -span <= d < span:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-span}, {span - 1}], but got {d})"
            )
        out.append(d % span if ndim else 0)
    return tuple(out) if ndim or not reduce else ()


def _expand_back(
    g: np.ndarray, shape: tuple[int, ...], dims: tuple[int, ...], keepdim: bool
) -> np.ndarray:
    """Re-insert reduced dims into ``g`` so it broadcasts against the input ``shape``."""
    if not keepdim and len(shape):
        g = np.expand_dims(g, tuple(sorted(dims)))
    return g


class SumBackward1(Node):
    __slots__ = ("_dims", "_keepdim", "_shape")

    _dims: tuple[int, ...]
    _keepdim: bool
    _shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        g = _expand_back(g, self._shape, self._dims, self._keepdim)
        return (np.broadcast_to(g, self._shape),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (expand_back(only(grads), self._shape, self._dims),)


class SumBackward0(SumBackward1):
    """``x.sum()`` with no dim (torch's separate overload)."""

    __slots__ = ()


class MeanBackward1(SumBackward1):
    __slots__ = ("_count",)

    _count: int

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        g = _expand_back(g, self._shape, self._dims, self._keepdim)
        return (np.broadcast_to(g / self._count, self._shape),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (expand_back(only(grads) / self._count, self._shape, self._dims),)


class MeanBackward0(MeanBackward1):
    """``x.mean()`` with no dim."""

    __slots__ = ()


def _reduction(
    x: Tensor, out: np.ndarray, cls: type[SumBackward1], dims: tuple[int, ...], keepdim: bool
) -> Tensor:
    node = cls((edge(x),))
    node._dims = dims
    node._keepdim = keepdim
    node._shape = x._data.shape
    return record(out, node)


def sum(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    d = x._data
    dims = normalize_dims(dim, d.ndim, reduce=True)
    if dtype is None and d.dtype.itemsize == 2:  # float16/bfloat16: accumulated in float32
        out = opsum(d, dims, keepdim)
    else:
        out = np.sum(d, axis=dims, keepdims=keepdim, dtype=dtype)
    if d.dtype.kind in "biu" and dtype is None:
        out = out.astype(np.int64)
    out = np.asarray(out)
    if needs_grad(x):
        cls = SumBackward0 if dim is None and not keepdim else SumBackward1
        return _reduction(x, out, cls, dims, keepdim)
    return wrap(out)


def mean(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    d = x._data
    if d.dtype.kind not in "fc" and not is_floating(d.dtype) and dtype is None:
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {d.dtype}"
        )
    dims = normalize_dims(dim, d.ndim, reduce=True)
    if dtype is None and is_floating(d.dtype) and d.dtype.itemsize == 2:
        out = np.mean(d, axis=dims, keepdims=keepdim, dtype=np.float32).astype(d.dtype)
    else:
        out = np.asarray(np.mean(d, axis=dims, keepdims=keepdim, dtype=dtype))
    if needs_grad(x):
        count = int(np.prod([d.shape[i] for i in dims])) if d.ndim else 1
        node = (MeanBackward0 if dim is None and not keepdim else MeanBackward1)((edge(x),))
        node._dims, node._keepdim, node._shape, node._count = dims, keepdim, d.shape, count
        return record(out, node)
    return wrap(out)


def _correction(unbiased: bool | None, correction: Any) -> float:
    if correction is not None:
        return float(correction)
    return 0.0 if unbiased is False else 1.0


class VarBackward0(Node):
    __slots__ = ("_denom", "_dims", "_keepdim", "mean", "x")

    _denom: float
    _dims: tuple[int, ...]
    _keepdim: bool
    mean: np.ndarray
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        g = _expand_back(g, self.x.shape, self._dims, self._keepdim)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (g * 2 * (self.x - self.mean) / self._denom,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        x = saved_input(self, 0, self.x)
        g = expand_back(only(grads), self.x.shape, self._dims)
        mean = x.mean(dim=self._dims, keepdim=True) if self.x.ndim else x
        return (g * 2 * (x - mean) / self._denom,)


class StdBackward0(VarBackward0):
    """d std = d var / (2 std), zero where std is 0 (as torch)."""

    __slots__ = ("out",)

    out: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        shape = self.x.shape
        g = _expand_back(g, shape, self._dims, self._keepdim)
        out = _expand_back(self.out, shape, self._dims, self._keepdim)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(out == 0, 0, g / out)
            grad = scale * (self.x - self.mean) / self._denom
        return (grad.astype(self.x.dtype, copy=False),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        x = saved_input(self, 0, self.x)
        shape, dims = self.x.shape, self._dims
        out = saved_output(self, self.out)
        zero = _expand_back(self.out, shape, dims, self._keepdim) == 0
        scale = where(zero, 0, expand_back(only(grads), shape, dims) / kept(out, shape, dims))
        mean = x.mean(dim=dims, keepdim=True) if self.x.ndim else x
        return (scale * (x - mean) / self._denom,)


def _variance(
    x: Tensor, dim: Any, unbiased: bool | None, keepdim: bool, correction: Any, sqrt: bool
) -> Tensor:
    d = x._data
    dims = normalize_dims(dim, d.ndim, reduce=True)
    count = int(np.prod([d.shape[i] for i in dims])) if d.ndim else 1
    denom = _max(count - _correction(unbiased, correction), 0)
    mu = np.mean(d, axis=dims, keepdims=True)
    centered = d - mu
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.sum(centered * centered, axis=dims, keepdims=keepdim) / np.asarray(denom, d.dtype)
    out = np.asarray(np.sqrt(out) if sqrt else out, dtype=d.dtype)
    if needs_grad(x):
        node = (StdBackward0 if sqrt else VarBackward0)((edge(x),))
        node._dims, node._keepdim, node._denom = dims, keepdim, denom
        node.x, node.mean = d, mu
        if sqrt:
            node.out = out  # type: ignore[attr-defined]
        node._save(x)
        return record(out, node)
    return wrap(out)


def var(
    x: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> Tensor:
    """Variance with Bessel's correction by default (``correction=1``), as torch."""
    return _variance(x, dim, unbiased, keepdim, correction, sqrt=False)


def std(
    x: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> Tensor:
    """Standard deviation, ``sqrt(var)``, with the same correction rules as :func:`var`."""
    return _variance(x, dim, unbiased, keepdim, correction, sqrt=True)


class AmaxBackward0(Node):
    """Gradient shared evenly among the elements equal to the extreme value (as torch)."""

    __slots__ = ("_dims", "_keepdim", "out", "x")

    _dims: tuple[int, ...]
    _keepdim: bool
    out: np.ndarray
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        shape = self.x.shape
        out = _expand_back(self.out, shape, self._dims, self._keepdim)
        g = _expand_back(g, shape, self._dims, self._keepdim)
        mask = (self.x == out).astype(g.dtype)
        count = mask.sum(axis=self._dims, keepdims=True)
        return (g * mask / count,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        shape = self.x.shape
        out = _expand_back(self.out, shape, self._dims, self._keepdim)
        mask = (self.x == out).astype(self.x.dtype)
        share = mask / mask.sum(axis=self._dims, keepdims=True)
        return (expand_back(only(grads), shape, self._dims) * wrap(share),)


class AminBackward0(AmaxBackward0):
    __slots__ = ()


def evenly_distribute(g: np.ndarray, x: np.ndarray, value: np.ndarray) -> np.ndarray:
    """torch's evenly_distribute_backward: ``g`` shared among the entries of ``x`` equal to
    ``value`` (the NaN entries when ``value`` is NaN), written into zeros, so the other
    entries get an exact 0 even when ``g`` is NaN or inf."""
    mask = np.isnan(x) if np.isnan(value) else x == value
    grad = np.zeros(x.shape, dtype=g.dtype)
    grad[mask] = g / g.dtype.type(np.count_nonzero(mask))
    return grad


class MaxBackward1(AmaxBackward0):
    """``x.max()`` over all elements: selected, not multiplied by a mask (unlike amax)."""

    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (evenly_distribute(g, self.x, self.out),)


class MinBackward1(MaxBackward1):
    """``x.min()`` over all elements."""

    __slots__ = ()


def _extreme(
    x: Tensor, dim: Any, keepdim: bool, fn: Any, cls: type[AmaxBackward0] = AmaxBackward0
) -> Tensor:
    d = x._data
    dims = normalize_dims(dim, d.ndim, reduce=True)
    if d.size == 0:
        name = "max" if fn is np.max else "min"
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0."
        )
    out = np.asarray(fn(d, axis=dims, keepdims=keepdim))
    if needs_grad(x):
        node = cls((edge(x),))
        node._dims, node._keepdim, node.x, node.out = dims, keepdim, d, out
        node._save(x)
        return record(out, node)
    return wrap(out)


def amax(x: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    return _extreme(x, dim, keepdim, np.max)


def amin(x: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    return _extreme(x, dim, keepdim, np.min, AminBackward0)


class MaxBackward0(Node):
    """max/min along a dim: the gradient goes to the selected index only."""

    __slots__ = ("_dim", "_index", "_keepdim", "_shape")

    # None for a 0-d input.
    _dim: int | None
    _index: np.ndarray
    _keepdim: bool
    _shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        if self._dim is None:  # a 0-d input
            return (g,)
        idx = self._index
        if not self._keepdim:
            g = np.expand_dims(g, self._dim)
            idx = np.expand_dims(idx, self._dim)
        grad = np.zeros(self._shape, dtype=g.dtype)
        np.put_along_axis(grad, idx, g, axis=self._dim)
        return (grad,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        if self._dim is None:
            return (g,)
        dim, idx = self._dim, self._index
        if not self._keepdim:
            idx = np.expand_dims(idx, dim)
        full: list[Any] = list(np.indices(idx.shape, sparse=True))
        full[dim] = idx
        index = tuple(full)
        keepdim = self._keepdim

        def pick(gg: Tensor) -> Tensor:
            picked = gg[index]
            return picked if keepdim else picked.squeeze(dim)

        return (linear_grad(self, g, self.backward(g._data)[0], pick),)  # type: ignore[arg-type]


class MinBackward0(MaxBackward0):
    __slots__ = ()


def _extreme_along(x: Tensor, dim: int, keepdim: bool, arg: Any) -> Any:
    d = x._data
    (axis,) = normalize_dims(dim, d.ndim)
    if d.ndim == 0:  # one element: it is the extreme, at index 0
        values, index = d.copy(), np.zeros((), dtype=np.int64)
        if needs_grad(x):
            node = (MaxBackward0 if arg is np.argmax else MinBackward0)((edge(x),))
            node._dim, node._keepdim, node._shape, node._index = None, True, (), index
            return values_indices(record(values, node), wrap(index))
        return values_indices(wrap(values), wrap(index))
    if d.shape[axis] == 0:
        raise IndexError(
            f"{'max' if arg is np.argmax else 'min'}(): Expected reduction dim {axis} to have "
            "non-zero size."
        )
    index = arg(d, axis=axis, keepdims=True)
    values = np.take_along_axis(d, index, axis=axis)
    if not keepdim:
        values = np.squeeze(values, axis)
        index = np.squeeze(index, axis)
    indices = wrap(index.astype(np.int64))
    if needs_grad(x):
        node = (MaxBackward0 if arg is np.argmax else MinBackward0)((edge(x),))
        node._dim, node._keepdim, node._shape, node._index = axis, keepdim, d.shape, index
        return values_indices(record(values, node), indices)
    return values_indices(wrap(values), indices)


def max(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """Without dim: the largest element. With dim: ``(values, indices)`` along it."""
    if isinstance(dim, Tensor):
        from .arith import maximum

        return maximum(x, dim)
    if dim is None:
        return _extreme(x, None, False, np.max, MaxBackward1)
    return _extreme_along(x, dim, keepdim, np.argmax)


def min(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """Without dim: the smallest element. With dim: ``(values, indices)`` along it."""
    if isinstance(dim, Tensor):
        from .arith import minimum

        return minimum(x, dim)
    if dim is None:
        return _extreme(x, None, False, np.min, MinBackward1)
    return _extreme_along(x, dim, keepdim, np.argmin)


def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    d = x._data
    if dim is None:
        return wrap(np.asarray(np.argmax(d), dtype=np.int64))
    return wrap(np.argmax(d, axis=dim, keepdims=keepdim).astype(np.int64))


def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    d = x._data
    if dim is None:
        return wrap(np.asarray(np.argmin(d), dtype=np.int64))
    return wrap(np.argmin(d, axis=dim, keepdims=keepdim).astype(np.int64))


class LinalgVectorNormBackward0(Node):
    """Vector p-norm; torch 2.x routes ``Tensor.norm`` through ``linalg.vector_norm``."""

    __slots__ = ("_dims", "_keepdim", "_p", "out", "x")

    _dims: tuple[int, ...]
    _keepdim: bool
    _p: float
    out: np.ndarray
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x = self.x
        out = _expand_back(self.out, x.shape, self._dims, self._keepdim)
        g = _expand_back(g, x.shape, self._dims, self._keepdim)
        p = self._p
        if p == 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                grad = np.where(out == 0, 0, x / out)
        elif p == 1:
            grad = sgn(x)
        elif p == np.inf:
            # torch: amax(abs(x))'s derivative counting NaN entries as selected too
            mask = ((np.abs(x) == out) | np.isnan(x)).astype(x.dtype)
            grad = sgn(x) * mask / mask.sum(axis=self._dims, keepdims=True)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                grad = np.where(out == 0, 0, sgn(x) * np.abs(x) ** (p - 1) / out ** (p - 1))
        return ((g * grad).astype(x.dtype, copy=False),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        shape, dims, p = self.x.shape, self._dims, self._p
        x = saved_input(self, 0, self.x)
        g = expand_back(only(grads), shape, dims)
        out = kept(saved_output(self, self.out), shape, dims)
        zero = _expand_back(self.out, shape, dims, self._keepdim) == 0
        if p == 1:
            return (g * sign_of(x),)
        if p == np.inf:
            return tuple(super().backward_graph(grads))
        if p == 2:
            return (where(zero, 0, g * x / out),)
        sign = wrap(np.sign(self.x))
        return (where(zero, 0, g * sign * x.abs() ** (p - 1) / out ** (p - 1)),)


def norm(x: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False) -> Tensor:
    """Vector p-norm over ``dim`` (all elements by default); 'fro' is the 2-norm."""
    d = x._data
    order = 2 if p in ("fro", None) else float(p)
    dims = normalize_dims(dim, d.ndim, reduce=True)
    a = np.abs(d)
    if order == np.inf:
        out = np.max(a, axis=dims, keepdims=keepdim)
    elif order == 2:
        out = np.sqrt(np.sum(d * d, axis=dims, keepdims=keepdim))
    elif order == 1:
        out = np.sum(a, axis=dims, keepdims=keepdim)
    elif order == 0:
        out = np.sum(a != 0, axis=dims, keepdims=keepdim).astype(d.dtype)
    else:
        out = np.sum(a**order, axis=dims, keepdims=keepdim) ** (1.0 / order)
    out = np.asarray(out, dtype=d.dtype)
    if needs_grad(x) and order != 0:
        node = LinalgVectorNormBackward0((edge(x),))
        node._dims, node._keepdim, node._p, node.x, node.out = dims, keepdim, order, d, out
        node._save(x)
        return record(out, node)
    return wrap(out)


class ProdBackward0(Node):
    __slots__ = ("_dims", "_keepdim", "x")

    _dims: tuple[int, ...]
    _keepdim: bool
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x = self.x
        (axis,) = self._dims if len(self._dims) == 1 else (None,)
        g = _expand_back(g, x.shape, self._dims, self._keepdim)
        flat = axis is None
        xs = x.reshape(-1) if flat else x
        ax = 0 if flat else axis
        # Product of all other elements, exact with zeros: exclusive cumprods from both sides.
        ones = np.ones_like(np.take(xs, [0], axis=ax))
        left = np.cumprod(np.concatenate([ones, np.delete(xs, -1, axis=ax)], axis=ax), axis=ax)
        rev = np.flip(xs, axis=ax)
        right = np.flip(
            np.cumprod(np.concatenate([ones, np.delete(rev, -1, axis=ax)], axis=ax), axis=ax),
            axis=ax,
        )
        others = (left * right).reshape(x.shape)
        return (g * others,)


class ProdBackward1(ProdBackward0):
    """prod along one dim."""

    __slots__ = ()


def prod(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    if _autocast.lower is not None:  # torch's CPU autocast: in float32
        (x,) = to_float32(x)
    d = x._data
    dims = normalize_dims(dim, d.ndim, reduce=True)
    out = np.asarray(
        np.prod(
            d, axis=None if dim is None else dims, keepdims=keepdim if dim is not None else False
        )
    )
    if needs_grad(x):
        node = (ProdBackward0 if dim is None else ProdBackward1)((edge(x),))
        node._dims = dims if dim is not None else tuple(range(d.ndim))
        node._keepdim = keepdim if dim is not None else False
        node.x = d
        node._save(x)
        return record(out, node)
    return wrap(out)


class LogsumexpBackward0(Node):
    __slots__ = ("_dims", "_keepdim", "out", "x")

    _dims: tuple[int, ...]
    _keepdim: bool
    out: np.ndarray
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        out = _expand_back(self.out, self.x.shape, self._dims, self._keepdim)
        g = _expand_back(g, self.x.shape, self._dims, self._keepdim)
        return (g * np.exp(self.x - out),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        shape, dims = self.x.shape, self._dims
        x = saved_input(self, 0, self.x)
        out = kept(saved_output(self, self.out), shape, dims)
        return (expand_back(only(grads), shape, dims) * (x - out).exp(),)


def logsumexp(x: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` along ``dim``, computed stably."""
    d = x._data
    dims = normalize_dims(dim, d.ndim, reduce=True)
    m = np.max(d, axis=dims, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(d - m), axis=dims, keepdims=True)) + m
    if not keepdim:
        out = np.squeeze(out, axis=dims)
    out = np.asarray(out, dtype=d.dtype)
    if needs_grad(x):
        node = LogsumexpBackward0((edge(x),))
        node._dims, node._keepdim, node.x, node.out = dims, keepdim, d, out
        node._save(x)
        return record(out, node)
    return wrap(out)


class SoftmaxBackward0(Node):
    __slots__ = ("_dim", "out")

    _dim: int
    out: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        y, gw = opmath(self.out), opmath(g)
        gx = y * (gw - np.sum(gw * y, axis=self._dim, keepdims=True))
        return (gx.astype(g.dtype, copy=False),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        y = saved_output(self, self.out)
        return (y * (g - (g * y).sum(dim=self._dim, keepdim=True)),)


class LogSoftmaxBackward0(Node):
    __slots__ = ("_dim", "out")

    _dim: int
    out: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        gw = opmath(g)
        gx = gw - np.exp(opmath(self.out)) * np.sum(gw, axis=self._dim, keepdims=True)
        return (gx.astype(g.dtype, copy=False),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        out = saved_output(self, self.out)
        return (g - out.exp() * g.sum(dim=self._dim, keepdim=True),)


def _shifted(d: np.ndarray, axis: int) -> np.ndarray:
    """``d`` minus its max along ``axis``, as torch shifts: a row whose max is inf or nan
    becomes nan (softmax and log_softmax of it are nan), without numpy's warning."""
    m = np.max(d, axis=axis, keepdims=True)
    if np.isfinite(m).all():
        return d - m
    with np.errstate(invalid="ignore"):
        return d - m


def softmax(x: Tensor, dim: int) -> Tensor:
    d = x._data
    (axis,) = normalize_dims(dim, d.ndim)
    e = np.exp(_shifted(opmath(d), axis))  # float16/bfloat16: in float32, rounded once
    out = (e / np.sum(e, axis=axis, keepdims=True)).astype(d.dtype, copy=False)
    if needs_grad(x):
        node = SoftmaxBackward0((edge(x),))
        node._dim, node.out = axis, out
        return record(out, node)
    return wrap(out)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    d = x._data
    (axis,) = normalize_dims(dim, d.ndim)
    z = _shifted(opmath(d), axis)  # float16/bfloat16: in float32, rounded once
    out = (z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))).astype(d.dtype, copy=False)
    if needs_grad(x):
        node = LogSoftmaxBackward0((edge(x),))
        node._dim, node.out = axis, out
        return record(out, node)
    return wrap(out)
