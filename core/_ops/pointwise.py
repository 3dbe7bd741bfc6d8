"""Pointwise ops of three operands: lerp, addcmul, addcdiv (out of place and in place)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtype import scalar_type_name
from ._base import Node, Tensor, edge, needs_grad, not_a_tensor, record, sum_to, wrap
from .arith import broadcast_error

__all__ = ["addcdiv", "addcmul", "lerp"]


def _lerp_values(start: np.ndarray, end: np.ndarray, weight: Any) -> np.ndarray:
    """torch's two-sided formula: exact at both ends (weight 0 gives start, 1 gives end)."""
    diff = end - start
    out = np.where(np.abs(weight) < 0.5, start + weight * diff, end - diff * (1 - weight))
    return out.astype(np.result_type(start, end), copy=False)


class LerpBackward0(Node):
    """lerp with a number weight."""

    __slots__ = ("_sa", "_sb", "_weight")

    _sa: tuple[int, ...]
    _sb: tuple[int, ...]
    _weight: float

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        e_start, e_end = self._next
        w = self._weight
        return (
            sum_to(g * (1 - w), self._sa) if e_start is not None else None,
            sum_to(g * w, self._sb) if e_end is not None else None,
        )


class LerpBackward1(Node):
    """lerp with a Tensor weight: the weight gets ``grad * (end - start)``."""

    __slots__ = ("_sa", "_sb", "end", "start", "weight")

    _sa: tuple[int, ...]
    _sb: tuple[int, ...]
    end: np.ndarray
    start: np.ndarray
    weight: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        e_start, e_end, e_weight = self._next
        w = self.weight
        return (
            sum_to(g * (1 - w), self._sa) if e_start is not None else None,
            sum_to(g * w, self._sb) if e_end is not None else None,
            sum_to(g * (self.end - self.start), w.shape) if e_weight is not None else None,
        )


def lerp(start: Tensor, end: Tensor, weight: Any) -> Tensor:
    """``start + weight * (end - start)``, with a number or Tensor weight."""
    if not isinstance(end, Tensor):
        raise not_a_tensor("lerp", "end", end)
    a, b = start._data, end._data
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"expected dtype {scalar_type_name(a.dtype).lower()} for `end` but got dtype "
            f"{scalar_type_name(b.dtype).lower()}"
        )
    tw = weight if isinstance(weight, Tensor) else None
    w = weight if tw is None else tw._data
    try:
        out = _lerp_values(a, b, w)
    except ValueError:
        raise broadcast_error(a, b if tw is None else w) from None
    node: Node
    if tw is None:
        if needs_grad(start, end):
            node = LerpBackward0((edge(start), edge(end)))
            node._sa, node._sb, node._weight = a.shape, b.shape, float(weight)
            return record(out, node)
        return wrap(out)
    if needs_grad(start, end, tw):
        node = LerpBackward1((edge(start), edge(end), edge(tw)))
        node._sa, node._sb = a.shape, b.shape
        node.start, node.end, node.weight = a, b, w
        node._save(start, end, tw)
        return record(out, node)
    return wrap(out)


class AddcmulBackward0(Node):
    """``x + value * t1 * t2``: each factor's gradient is the other factor times value."""

    __slots__ = ("_shapes", "_value", "t1", "t2")

    _shapes: tuple[tuple[int, ...], ...]
    _value: Any
    t1: np.ndarray
    t2: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        e_x, e_1, e_2 = self._next
        sx, s1, s2 = self._shapes
        v = self._value
        return (
            sum_to(g, sx) if e_x is not None else None,
            sum_to(g * v * self.t2, s1) if e_1 is not None else None,
            sum_to(g * v * self.t1, s2) if e_2 is not None else None,
        )


class AddcdivBackward0(AddcmulBackward0):
    """``x + value * t1 / t2``."""

    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        e_x, e_1, e_2 = self._next
        sx, s1, s2 = self._shapes
        v, t1, t2 = self._value, self.t1, self.t2
        return (
            sum_to(g, sx) if e_x is not None else None,
            sum_to(g * v / t2, s1) if e_1 is not None else None,
            sum_to(-g * v * t1 / (t2 * t2), s2) if e_2 is not None else None,
        )


def _addc(
    x: Tensor, t1: Tensor, t2: Tensor, value: Any, op: Any, cls: type[AddcmulBackward0]
) -> Tensor:
    name = cls.__name__[:-9].lower()
    for arg, t in (("tensor1", t1), ("tensor2", t2)):
        if not isinstance(t, Tensor):
            raise not_a_tensor(name, arg, t)
    a, b, c = x._data, t1._data, t2._data
    try:
        part = op(b, c)
        out = a + (part * value if value != 1 else part)
    except ValueError:
        raise broadcast_error(a, b if b.shape != a.shape else c) from None
    out = np.asarray(out, dtype=np.result_type(a, b, c))
    if needs_grad(x, t1, t2):
        node = cls((edge(x), edge(t1), edge(t2)))
        node._shapes, node._value, node.t1, node.t2 = (a.shape, b.shape, c.shape), value, b, c
        node._save(t1, t2)
        return record(out, node)
    return wrap(out)


def addcmul(x: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``x + value * tensor1 * tensor2``."""
    return _addc(x, tensor1, tensor2, value, np.multiply, AddcmulBackward0)


def addcdiv(x: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``x + value * tensor1 / tensor2``."""
    return _addc(x, tensor1, tensor2, value, np.true_divide, AddcdivBackward0)
