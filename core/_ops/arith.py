"""Arithmetic with broadcasting: each forward kernel sits beside its backward node.

Python numbers stay Python numbers (numpy's weak scalars keep float32 results float32), so a
scalar operand costs no Tensor and no graph edge.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtype import float32
from ._base import Node, Tensor, edge, needs_grad, record, sum_to, wrap

__all__ = [
    "add",
    "div",
    "floor_divide",
    "matmul",
    "maximum",
    "minimum",
    "mul",
    "neg",
    "pow",
    "rdiv",
    "remainder",
    "rpow",
    "rsub",
    "sub",
    "where",
]

_Number = (int, float, bool, np.number, np.bool_)


def broadcast_error(a: np.ndarray, b: np.ndarray) -> RuntimeError:
    """The RuntimeError torch raises for incompatible shapes, naming the offending sizes."""
    sa, sb = a.shape, b.shape
    for i in range(1, max(len(sa), len(sb)) + 1):
        da = sa[-i] if i <= len(sa) else 1
        db = sb[-i] if i <= len(sb) else 1
        if da != db and da != 1 and db != 1:
            dim = max(len(sa), len(sb)) - i
            return RuntimeError(
                f"The size of tensor a ({da}) must match the size of tensor b ({db}) at "
                f"non-singleton dimension {dim}"
            )
    return RuntimeError(f"shapes {list(sa)} and {list(sb)} cannot be broadcast together")


def _scalar_result(out: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Integer tensor with a float scalar: torch gives the default float dtype, numpy float64."""
    if out.dtype.kind == "f" and a.dtype.kind in "biu" and out.dtype != float32:
        return out.astype(float32)
    return out


def _tensor_operand(value: Any, like: Tensor) -> Tensor | None:
    """Return ``value`` as a Tensor if it must take part in the graph, None for a number."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, _Number):
        return None
    return wrap(np.asarray(value, dtype=like._data.dtype if like._data.dtype.kind == "f" else None))


class _BinaryBackward(Node):
    """Base of binary nodes: keeps the operand shapes so broadcasting can be undone."""

    __slots__ = ("_sa", "_sb")


class AddBackward0(_BinaryBackward):
    __slots__ = ("_alpha",)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        gb = None
        if eb is not None:
            gb = sum_to(g if self._alpha == 1 else g * self._alpha, self._sb)
        return (sum_to(g, self._sa) if ea is not None else None, gb)


class SubBackward0(_BinaryBackward):
    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        return (
            sum_to(g, self._sa) if ea is not None else None,
            sum_to(-g, self._sb) if eb is not None else None,
        )


class MulBackward0(_BinaryBackward):
    __slots__ = ("a", "b")

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        return (
            sum_to(g * self.b, self._sa) if ea is not None else None,
            sum_to(g * self.a, self._sb) if eb is not None else None,
        )


class DivBackward0(_BinaryBackward):
    __slots__ = ("a", "b")

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        ga = gb = None
        if ea is not None:
            ga = sum_to(g / self.b, self._sa)
        if eb is not None:
            gb = sum_to(-g * self.a / (self.b * self.b), self._sb)
        return (ga, gb)


class PowBackward1(_BinaryBackward):
    """Tensor ** Tensor."""

    __slots__ = ("a", "b", "out")

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        ga = gb = None
        if ea is not None:
            ga = sum_to(g * self.b * np.power(self.a, self.b - 1), self._sa)
        if eb is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                log_a = np.where(self.a > 0, np.log(np.where(self.a > 0, self.a, 1)), 0)
            gb = sum_to(g * self.out * log_a.astype(g.dtype, copy=False), self._sb)
        return (ga, gb)


class _MinMaxBackward(_BinaryBackward):
    """maximum/minimum: the gradient goes to the winner, split evenly on ties (as torch)."""

    __slots__ = ("a", "b")
    _pick: Any = None

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        a, b = self.a, self.b
        first = type(self)._pick(a, b)
        tie = (a == b).astype(g.dtype)
        share_a = first.astype(g.dtype) * (1 - tie) + 0.5 * tie
        return (
            sum_to(g * share_a, self._sa) if ea is not None else None,
            sum_to(g * (1 - share_a), self._sb) if eb is not None else None,
        )


class MaximumBackward0(_MinMaxBackward):
    _pick = staticmethod(np.greater)


class MinimumBackward0(_MinMaxBackward):
    _pick = staticmethod(np.less)


class _ScalarBackward(Node):
    """Tensor (op) number: one edge, the number kept as metadata."""

    __slots__ = ("_scalar",)


class AddBackward1(_ScalarBackward):
    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g,)


class RsubBackward1(_ScalarBackward):
    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (-g,)


class MulBackward1(_ScalarBackward):
    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g * self._scalar,)


class DivBackward1(_ScalarBackward):
    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g / self._scalar,)


class PowBackward0(_ScalarBackward):
    """Tensor ** number."""

    __slots__ = ("a",)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        p = self._scalar
        if p == 0:
            return (np.zeros_like(g),)
        if p == 2:
            return (g * 2 * self.a,)
        return (g * p * np.power(self.a, p - 1),)


class RdivBackward(_ScalarBackward):
    """number / Tensor."""

    __slots__ = ("b", "out")

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (-g * self.out / self.b,)


class RpowBackward(_ScalarBackward):
    """number ** Tensor."""

    __slots__ = ("out",)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g * self.out * np.log(self._scalar).astype(g.dtype),)


class NegBackward0(Node):
    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (-g,)


def _binary(fn: Any, a: Tensor, b: Tensor) -> np.ndarray:
    try:
        return fn(a._data, b._data)
    except ValueError:
        raise broadcast_error(a._data, b._data) from None


def _record_binary(out: np.ndarray, node: _BinaryBackward, a: Tensor, b: Tensor) -> Tensor:
    node._sa = a._data.shape
    node._sb = b._data.shape
    return record(out, node)


def _record_scalar(out: np.ndarray, cls: type[_ScalarBackward], a: Tensor, scalar: Any) -> Tensor:
    node = cls((edge(a),))
    node._scalar = scalar
    return record(out, node)


def add(a: Tensor, b: Any, *, alpha: Any = 1) -> Tensor:
    """``a + alpha * b`` with broadcasting."""
    tb = _tensor_operand(b, a)
    if tb is None:
        out = _scalar_result(a._data + (b * alpha if alpha != 1 else b), a._data)
        if needs_grad(a):
            return _record_scalar(out, AddBackward1, a, b)
        return wrap(out)
    bd = tb._data if alpha == 1 else tb._data * alpha
    try:
        out = a._data + bd
    except ValueError:
        raise broadcast_error(a._data, tb._data) from None
    if needs_grad(a, tb):
        node = AddBackward0((edge(a), edge(tb)))
        node._alpha = alpha
        return _record_binary(out, node, a, tb)
    return wrap(out)


def sub(a: Tensor, b: Any, *, alpha: Any = 1) -> Tensor:
    """``a - alpha * b`` with broadcasting."""
    if alpha != 1:
        return add(a, b, alpha=-alpha)
    tb = _tensor_operand(b, a)
    if tb is None:
        out = _scalar_result(a._data - b, a._data)
        if needs_grad(a):
            return _record_scalar(out, AddBackward1, a, -b)
        return wrap(out)
    out = _binary(np.subtract, a, tb)
    if needs_grad(a, tb):
        return _record_binary(out, SubBackward0((edge(a), edge(tb))), a, tb)
    return wrap(out)


def rsub(a: Tensor, b: Any) -> Tensor:
    """``b - a`` for a number or array ``b``."""
    tb = _tensor_operand(b, a)
    if tb is not None:
        return sub(tb, a)
    out = _scalar_result(b - a._data, a._data)
    if needs_grad(a):
        return _record_scalar(out, RsubBackward1, a, b)
    return wrap(out)


def mul(a: Tensor, b: Any) -> Tensor:
    """Elementwise product with broadcasting."""
    tb = _tensor_operand(b, a)
    if tb is None:
        out = _scalar_result(a._data * b, a._data)
        if needs_grad(a):
            return _record_scalar(out, MulBackward1, a, b)
        return wrap(out)
    out = _binary(np.multiply, a, tb)
    if needs_grad(a, tb):
        node = MulBackward0((edge(a), edge(tb)))
        node.a = a._data
        node.b = tb._data
        node._save(a, tb)
        return _record_binary(out, node, a, tb)
    return wrap(out)


def _true_divide(x: np.ndarray, y: Any) -> np.ndarray:
    out = np.true_divide(x, y)
    float_divisor = isinstance(y, np.ndarray) and y.dtype.kind == "f"
    if out.dtype != float32 and out.dtype.kind == "f" and x.dtype.kind in "biu" and not float_divisor:
        out = out.astype(float32)
    return out


def div(a: Tensor, b: Any) -> Tensor:
    """True division with broadcasting (integers give floats, as in torch)."""
    tb = _tensor_operand(b, a)
    if tb is None:
        out = _true_divide(a._data, b)
        if needs_grad(a):
            return _record_scalar(out, DivBackward1, a, b)
        return wrap(out)
    out = _binary(_true_divide, a, tb)
    if needs_grad(a, tb):
        node = DivBackward0((edge(a), edge(tb)))
        node.a = a._data
        node.b = tb._data
        node._save(a, tb)
        return _record_binary(out, node, a, tb)
    return wrap(out)


def rdiv(a: Tensor, b: Any) -> Tensor:
    """``b / a`` for a number or array ``b``."""
    tb = _tensor_operand(b, a)
    if tb is not None:
        return div(tb, a)
    out = _scalar_result(np.true_divide(b, a._data), a._data)
    if needs_grad(a):
        node = RdivBackward((edge(a),))
        node._scalar = b
        node.out = out
        node.b = a._data
        node._save(a)
        return record(out, node)
    return wrap(out)


def pow(a: Tensor, exponent: Any) -> Tensor:
    """``a ** exponent`` for a number or Tensor exponent."""
    te = _tensor_operand(exponent, a)
    if te is None:
        out = _scalar_result(np.power(a._data, exponent), a._data)
        if needs_grad(a):
            node = PowBackward0((edge(a),))
            node._scalar = exponent
            node.a = a._data
            node._save(a)
            return record(out, node)
        return wrap(out)
    out = _binary(np.power, a, te)
    if needs_grad(a, te):
        node = PowBackward1((edge(a), edge(te)))
        node.a = a._data
        node.b = te._data
        node.out = out
        node._save(a, te)
        return _record_binary(out, node, a, te)
    return wrap(out)


def rpow(a: Tensor, base: Any) -> Tensor:
    """``base ** a`` for a number ``base``."""
    tb = _tensor_operand(base, a)
    if tb is not None:
        return pow(tb, a)
    out = _scalar_result(np.power(base, a._data), a._data)
    if needs_grad(a):
        node = RpowBackward((edge(a),))
        node._scalar = base
        node.out = out
        return record(out, node)
    return wrap(out)


def neg(a: Tensor) -> Tensor:
    out = np.negative(a._data)
    if needs_grad(a):
        return record(out, NegBackward0((edge(a),)))
    return wrap(out)


def _min_max(a: Tensor, b: Any, fn: Any, cls: type[_MinMaxBackward]) -> Tensor:
    tb = _tensor_operand(b, a) or wrap(np.asarray(b, dtype=a._data.dtype))
    out = _binary(fn, a, tb)
    if needs_grad(a, tb):
        node = cls((edge(a), edge(tb)))
        node.a = a._data
        node.b = tb._data
        node._save(a, tb)
        return _record_binary(out, node, a, tb)
    return wrap(out)


def maximum(a: Tensor, b: Any) -> Tensor:
    """Elementwise maximum; ties split the gradient evenly."""
    return _min_max(a, b, np.maximum, MaximumBackward0)


def minimum(a: Tensor, b: Any) -> Tensor:
    """Elementwise minimum; ties split the gradient evenly."""
    return _min_max(a, b, np.minimum, MinimumBackward0)


def floor_divide(a: Tensor, b: Any) -> Tensor:
    """Floor division; not differentiable (its gradient is zero almost everywhere)."""
    return wrap(np.floor_divide(a._data, b._data if isinstance(b, Tensor) else b))


def remainder(a: Tensor, b: Any) -> Tensor:
    """Python-style remainder; not differentiable."""
    return wrap(np.remainder(a._data, b._data if isinstance(b, Tensor) else b))


class MmBackward0(Node):
    """matmul of 1-D to N-D operands (numpy semantics, as torch.matmul)."""

    __slots__ = ("_sa", "_sb", "a", "b")

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        a, b = self.a, self.b
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g2 = g
        if a.ndim == 1:
            g2 = np.expand_dims(g2, -2)
        if b.ndim == 1:
            g2 = np.expand_dims(g2, -1)
        ga = gb = None
        if ea is not None:
            ga = sum_to(g2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(self._sa)
        if eb is not None:
            gb = np.swapaxes(a2, -1, -2) @ g2
            gb = sum_to(gb, b2.shape).reshape(self._sb)
        return (ga, gb)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with numpy/torch batching rules; a shape mismatch names both shapes."""
    if not isinstance(b, Tensor):
        raise TypeError(f"matmul(): argument 'other' must be Tensor, not {type(b).__name__}")
    ad, bd = a._data, b._data
    if ad.ndim == 0 or bd.ndim == 0:
        raise RuntimeError(
            "both arguments to matmul need to be at least 1D, but they are "
            f"{ad.ndim}D and {bd.ndim}D"
        )
    try:
        out = ad @ bd
    except ValueError:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, ad.shape))} and "
            f"{'x'.join(map(str, bd.shape))})"
        ) from None
    if needs_grad(a, b):
        node = MmBackward0((edge(a), edge(b)))
        node.a = ad
        node.b = bd
        node._sa = ad.shape
        node._sb = bd.shape
        node._save(a, b)
        return record(np.asarray(out), node)
    return wrap(np.asarray(out))


class WhereBackward0(Node):
    __slots__ = ("_sa", "_sb", "cond")

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        zero = np.zeros((), dtype=g.dtype)
        return (
            sum_to(np.where(self.cond, g, zero), self._sa) if ea is not None else None,
            sum_to(np.where(self.cond, zero, g), self._sb) if eb is not None else None,
        )


def where(condition: Tensor, input: Any, other: Any) -> Tensor:
    """Pick from ``input`` where ``condition`` holds, else from ``other``."""
    cond = condition._data if isinstance(condition, Tensor) else np.asarray(condition)
    like = input if isinstance(input, Tensor) else other
    if not isinstance(like, Tensor):
        like = wrap(np.asarray(input, dtype=float32))
    ta = _tensor_operand(input, like) or wrap(np.asarray(input, dtype=like._data.dtype))
    tb = _tensor_operand(other, like) or wrap(np.asarray(other, dtype=like._data.dtype))
    try:
        out = np.where(cond, ta._data, tb._data)
    except ValueError:
        raise broadcast_error(ta._data, tb._data) from None
    if needs_grad(ta, tb):
        node = WhereBackward0((edge(ta), edge(tb)))
        node.cond = cond
        node._sa = ta._data.shape
        node._sb = tb._data.shape
        return record(out, node)
    return wrap(out)
