"""Elementwise functions of one tensor: forward kernel and derivative side by side."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._dtype import float32, opmath
from ._base import Node, Tensor, edge, needs_grad, record, sum_to, wrap
from ._graph import only as _only
from ._graph import saved_input, saved_output, select_grad, sign_of, sum_to_tensor
from .arith import where

__all__ = [
    "abs",
    "clamp",
    "cos",
    "exp",
    "gelu",
    "leaky_relu",
    "log",
    "log10",
    "log2",
    "reciprocal",
    "relu",
    "sigmoid",
    "sign",
    "sin",
    "sqrt",
    "tanh",
]


class _SavesInput(Node):
    __slots__ = ("x",)

    x: np.ndarray


class _SavesOutput(Node):
    __slots__ = ("out",)

    out: np.ndarray


class ExpBackward0(_SavesOutput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g * self.out,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (_only(grads) * saved_output(self, self.out),)


class LogBackward0(_SavesInput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g / self.x,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (_only(grads) / saved_input(self, 0, self.x),)


class Log10Backward0(_SavesInput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g / (self.x * self.x.dtype.type(math.log(10))),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (_only(grads) / (saved_input(self, 0, self.x) * math.log(10)),)


class Log2Backward0(_SavesInput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g / (self.x * self.x.dtype.type(math.log(2))),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (_only(grads) / (saved_input(self, 0, self.x) * math.log(2)),)


class SqrtBackward0(_SavesOutput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g / (2 * self.out),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (_only(grads) / (2 * saved_output(self, self.out)),)


class AbsBackward0(_SavesInput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g * sgn(self.x),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (_only(grads) * sign_of(saved_input(self, 0, self.x)),)


class ReciprocalBackward0(_SavesOutput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        out = self.out
        return (-g * out * out,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        out = saved_output(self, self.out)
        return (-_only(grads) * out * out,)


class SinBackward0(_SavesInput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g * np.cos(self.x),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (_only(grads) * cos(saved_input(self, 0, self.x)),)


class CosBackward0(_SavesInput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (-g * np.sin(self.x),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (-_only(grads) * sin(saved_input(self, 0, self.x)),)


class TanhBackward0(_SavesOutput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        out = self.out
        return (g * (1 - out * out),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        out = saved_output(self, self.out)
        return (_only(grads) * (1 - out * out),)


class SigmoidBackward0(_SavesOutput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        out = opmath(self.out)
        return ((opmath(g) * out * (1 - out)).astype(g.dtype, copy=False),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        out = saved_output(self, self.out)
        return (_only(grads) * out * (1 - out),)


class ReluBackward0(_SavesOutput):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        # torch's threshold_backward: 0 where out <= 0, else the gradient, selected (a NaN or Inf
        # gradient is dropped where the unit is off) and passed where out is NaN
        return (np.where(self.out <= 0, g.dtype.type(0), g),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        keep = np.logical_not(self.out <= 0)  # a NaN output passes the gradient, as backward
        anchor = saved_output(self, self.out)
        return (select_grad("ThresholdBackwardBackward0", _only(grads), keep, 0, anchor),)


class LeakyReluBackward0(_SavesInput):
    __slots__ = ("_slope",)

    _slope: float

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (np.where(self.x > 0, g, opmath(g) * self._slope).astype(g.dtype, copy=False),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        anchor = saved_input(self, 0, self.x)
        g = _only(grads)
        return (select_grad("LeakyReluBackwardBackward0", g, self.x > 0, self._slope, anchor),)


class GeluBackward0(_SavesInput):
    __slots__ = ("_approximate",)

    _approximate: str

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x = opmath(self.x)
        if self._approximate == "tanh":
            k = math.sqrt(2.0 / math.pi)
            inner = k * (x + 0.044715 * x**3)
            t = np.tanh(inner)
            d_inner = k * (1 + 3 * 0.044715 * x * x)
            slope = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner
        else:
            cdf = 0.5 * (1 + _erf(x / math.sqrt(2.0)))
            slope = cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        return ((opmath(g) * slope).astype(g.dtype, copy=False),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        x = saved_input(self, 0, self.x)
        if self._approximate != "tanh":
            return (_only(grads) * (_normal_cdf(x) + x * _normal_pdf(x)),)
        k = math.sqrt(2.0 / math.pi)
        t = tanh(k * (x + 0.044715 * x**3))
        d_inner = k * (1 + 3 * 0.044715 * x * x)
        return (_only(grads) * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner),)


def _normal_pdf(x: Tensor) -> Tensor:
    return (x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi))


class ErfBackward0(Node):
    """Of the standard normal CDF ``0.5 * (1 + erf(x / sqrt(2)))`` (exact gelu's recorded
    backward): its derivative, the density, is made of recorded ops."""

    __slots__ = ("_x",)

    _x: Tensor

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g * _normal_pdf(self._x)._data,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (_only(grads) * _normal_pdf(self._x),)


def _normal_cdf(x: Tensor) -> Tensor:
    """The standard normal CDF of ``x``, recorded."""
    out = (0.5 * (1 + _erf(x._data / math.sqrt(2.0)))).astype(x._data.dtype, copy=False)
    if not needs_grad(x):
        return wrap(out)
    node = ErfBackward0((edge(x),))
    node._x = x
    return record(out, node)


def _inside(x: np.ndarray, lo: Any, hi: Any) -> np.ndarray:
    """Where ``x`` lies within [lo, hi], bounds included: where clamp passes the gradient."""
    if lo is None:
        return x <= hi
    if hi is None:
        return x >= lo
    return (x >= lo) & (x <= hi)


class ClampBackward1(_SavesInput):
    """clamp with number bounds."""

    __slots__ = ("_hi", "_lo")

    _hi: float | None
    _lo: float | None

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (np.where(_inside(self.x, self._lo, self._hi), g, g.dtype.type(0)),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (where(wrap(_inside(self.x, self._lo, self._hi)), _only(grads), 0),)


class ClampBackward0(Node):
    """clamp with Tensor bounds: a bound gets the gradient where it is the active one (as torch)."""

    __slots__ = ("hi", "lo", "x")
    _torch_saved_names = {"lo": "min", "hi": "max"}  # noqa: RUF012 - read-only table

    # The bounds' arrays, None for a missing bound; backward reads a bound's shape only when
    # its edge exists, which mypy cannot tell from the types.
    hi: Any
    lo: Any
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        e_x, e_lo, e_hi = self._next
        x, lo, hi = self.x, self.lo, self.hi
        zero = np.zeros((), dtype=g.dtype)
        gx = g_lo = g_hi = None
        if e_x is not None:
            gx = sum_to(np.where(_inside(x, lo, hi), g, zero), x.shape)
        if e_lo is not None:
            active = x < lo if hi is None else (x < lo) & (lo < hi)
            g_lo = sum_to(np.where(active, g, zero), lo.shape)
        if e_hi is not None:
            active = x > hi if lo is None else (x > hi) | (hi < lo)
            g_hi = sum_to(np.where(active, g, zero), hi.shape)
        return (gx, g_lo, g_hi)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = _only(grads)
        e_x, e_lo, e_hi = self._next
        x, lo, hi = self.x, self.lo, self.hi
        gx = g_lo = g_hi = None
        if e_x is not None:
            gx = sum_to_tensor(where(wrap(_inside(x, lo, hi)), g, 0), x.shape)
        if e_lo is not None:
            active = x < lo if hi is None else (x < lo) & (lo < hi)
            g_lo = sum_to_tensor(where(active, g, 0), lo.shape)
        if e_hi is not None:
            active = x > hi if lo is None else (x > hi) | (hi < lo)
            g_hi = sum_to_tensor(where(active, g, 0), hi.shape)
        return (gx, g_lo, g_hi)


def _erf(x: np.ndarray) -> np.ndarray:
    """Vectorised erf (numpy has none): Numerical Recipes' erfc Chebyshev fit, |rel err| < 1.2e-7.

    That is float32 precision, which is what GELU needs; scipy would be a heavy dependency.
    """
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -1.26551223 + t * (
        1.00002368
        + t
        * (
            0.37409196
            + t
            * (
                0.09678418
                + t
                * (
                    -0.18628806
                    + t
                    * (
                        0.27886807
                        + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))
                    )
                )
            )
        )
    )
    erfc = t * np.exp(-z * z + poly)
    return np.where(x >= 0, 1.0 - erfc, erfc - 1.0).astype(x.dtype, copy=False)


def _unary(x: Tensor, out: np.ndarray, cls: type[Node], saved: str) -> Tensor:
    if needs_grad(x):
        node = cls((edge(x),))
        if saved == "x":
            node.x = x._data  # type: ignore[attr-defined]
            node._save(x)
        else:
            node.out = out  # type: ignore[attr-defined]
        return record(out, node)
    return wrap(out)


def exp(x: Tensor) -> Tensor:
    return _unary(x, np.exp(x._data), ExpBackward0, "out")


def log(x: Tensor) -> Tensor:
    return _unary(x, np.log(x._data), LogBackward0, "x")


def log10(x: Tensor) -> Tensor:
    d = x._data
    # an integer or bool input gives the default float dtype, as in torch (numpy: float64)
    out = np.log10(d) if d.dtype.kind == "f" else np.log10(d, dtype=float32)
    return _unary(x, out, Log10Backward0, "x")


def log2(x: Tensor) -> Tensor:
    d = x._data
    out = np.log2(d) if d.dtype.kind == "f" else np.log2(d, dtype=float32)
    return _unary(x, out, Log2Backward0, "x")


def sqrt(x: Tensor) -> Tensor:
    return _unary(x, np.sqrt(x._data), SqrtBackward0, "out")


def abs(x: Tensor) -> Tensor:
    return _unary(x, np.abs(x._data), AbsBackward0, "x")


def sin(x: Tensor) -> Tensor:
    return _unary(x, np.sin(x._data), SinBackward0, "x")


def cos(x: Tensor) -> Tensor:
    return _unary(x, np.cos(x._data), CosBackward0, "x")


def reciprocal(x: Tensor) -> Tensor:
    d = x._data
    out = np.true_divide(1, d)
    if d.dtype.kind != "f":
        out = out.astype(float32)
    return _unary(x, out, ReciprocalBackward0, "out")


def tanh(x: Tensor) -> Tensor:
    return _unary(x, np.tanh(x._data), TanhBackward0, "out")


def sigmoid(x: Tensor) -> Tensor:
    d = x._data
    w = opmath(d)
    # Split by sign so exp never overflows.
    e = np.exp(-np.abs(w))
    out = np.where(w >= 0, 1 / (1 + e), e / (1 + e)).astype(d.dtype, copy=False)
    return _unary(x, out, SigmoidBackward0, "out")


def relu(x: Tensor) -> Tensor:
    return _unary(x, np.maximum(x._data, 0), ReluBackward0, "out")


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    d = x._data
    w = opmath(d)  # float16/bfloat16: in float32, rounded once
    out = np.where(w > 0, w, w * negative_slope).astype(d.dtype, copy=False)
    if needs_grad(x):
        node = LeakyReluBackward0((edge(x),))
        node.x = d
        node._slope = negative_slope
        node._save(x)
        return record(out, node)
    return wrap(out)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU, exact (erf) or with the tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    d = x._data
    w = opmath(d)
    if approximate == "tanh":
        k = math.sqrt(2.0 / math.pi)
        out = 0.5 * w * (1 + np.tanh(k * (w + 0.044715 * w**3)))
    else:
        out = 0.5 * w * (1 + _erf(w / math.sqrt(2.0)))
    out = out.astype(d.dtype, copy=False)
    if needs_grad(x):
        node = GeluBackward0((edge(x),))
        node.x = d
        node._approximate = approximate
        node._save(x)
        return record(out, node)
    return wrap(out)


def sgn(a: np.ndarray) -> np.ndarray:
    """torch's sign of an array: as numpy's, but 0 (not NaN) for a NaN element.

    The one sign every formula uses (abs, l1_loss and norm backward, ``sign``), so that a NaN
    input gives the 0 torch gives there rather than NaN.
    """
    out = np.asarray(np.sign(a))  # 0-dim: an array, not a numpy scalar copyto cannot fill
    if out.dtype.kind == "f":
        np.copyto(out, 0, where=np.isnan(out))
    return out


def sign(x: Tensor) -> Tensor:
    """Sign of each element (0 for NaN, as torch); its gradient is zero, so it records no node."""
    return wrap(sgn(x._data))


def clamp(x: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """Clamp into [min, max]; the gradient passes where the input lies inside (bounds included)."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensor(x, min, max)
    d = x._data
    out = np.clip(d, min, max)
    if out.dtype is not d.dtype:
        out = out.astype(d.dtype if d.dtype.kind == "f" else float32)
    if needs_grad(x):
        node = ClampBackward1((edge(x),))
        node.x = d
        node._lo = min
        node._hi = max
        node._save(x)
        return record(out, node)
    return wrap(out)


def _clamp_tensor(x: Tensor, min: Any, max: Any) -> Tensor:
    lo = min if isinstance(min, Tensor) or min is None else wrap(np.asarray(min, x._data.dtype))
    hi = max if isinstance(max, Tensor) or max is None else wrap(np.asarray(max, x._data.dtype))
    lo_d = None if lo is None else lo._data
    hi_d = None if hi is None else hi._data
    try:
        out = np.clip(x._data, lo_d, hi_d)
    except ValueError:
        from .arith import broadcast_error

        other = lo_d if lo_d is not None else hi_d
        assert other is not None  # clamp() only comes here with a Tensor bound
        raise broadcast_error(x._data, other) from None
    bounds = [t for t in (lo, hi) if t is not None]
    if needs_grad(x, *bounds):
        node = ClampBackward0(
            (edge(x), None if lo is None else edge(lo), None if hi is None else edge(hi))
        )
        node.x, node.lo, node.hi = x._data, lo_d, hi_d
        node._save(x, *bounds)
        return record(out, node)
    return wrap(out)
