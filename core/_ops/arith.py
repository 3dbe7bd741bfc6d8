"""Arithmetic with broadcasting: each forward kernel sits beside its backward node.

Python numbers stay Python numbers (numpy's weak scalars keep float32 results float32), so a
scalar operand costs no Tensor and no graph edge.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtype import float32, is_floating
from ..amp._state import state as _autocast
from ..amp._state import to_lower
from ._base import Node, Tensor, edge, needs_grad, not_a_tensor, record, sum_to, wrap
from ._graph import only, saved_input, saved_output, sum_to_tensor

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
_ARRAY_OR_NUMBER = (*_Number, np.ndarray)


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
    """The dtype torch gives ``tensor (op) number``: a number never widens a float tensor
    (``np.float64(2) * float32`` stays float32), and an integer tensor with a float number
    gives the default float dtype where numpy would give float64."""
    if out.dtype is a.dtype:
        return out
    if is_floating(a.dtype):
        return out.astype(a.dtype)
    if out.dtype.kind == "f" and out.dtype != float32:
        return out.astype(float32)
    return out


# "V": ml_dtypes' bfloat16, a float to torch (numpy files it under kind 'V').
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "V": 2, "c": 3}


def result_dtype(a: np.ndarray, b: np.ndarray) -> np.dtype[Any]:
    """Torch's result dtype for two tensors of different dtypes.

    A higher category (bool < int < float) wins outright, so int64 with float32 is float32
    (numpy says float64). Within a category the widths promote, except that a 0-d tensor
    never widens a tensor with dimensions.
    """
    ca, cb = _CATEGORY[a.dtype.kind], _CATEGORY[b.dtype.kind]
    if (a.ndim == 0) == (b.ndim == 0):
        if ca == cb:
            return _promote_types(a.dtype, b.dtype)
        return a.dtype if ca > cb else b.dtype
    big, small, c_big, c_small = (a, b, ca, cb) if a.ndim else (b, a, cb, ca)
    return small.dtype if c_small > c_big else big.dtype


def _promote_types(a: np.dtype[Any], b: np.dtype[Any]) -> np.dtype[Any]:
    """numpy's promotion, except that bfloat16 with float16 (which numpy refuses) is
    float32, as in torch."""
    try:
        return np.promote_types(a, b)
    except TypeError:
        return float32


def _promote(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cast ``out`` to torch's dtype; callers only come here when the operand dtypes differ."""
    target = result_dtype(a, b)
    return out if out.dtype == target else out.astype(target)


def _tensor_operand(value: Any, like: Tensor, op: str) -> Tensor | None:
    """``value`` if it is a Tensor, None for a number (it takes no part in the graph), a numpy
    array as a Tensor (``t + array`` works in torch too); anything else (a list, a string,
    None) is torch's TypeError naming ``op``."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, _Number):
        return None
    if isinstance(value, np.ndarray):
        kind = like._data.dtype
        return wrap(np.asarray(value, dtype=kind if kind.kind == "f" else None))
    raise not_a_tensor(op, "other", value)


def _operand(node: Node, index: int, value: Any) -> Any:
    """A binary node's saved operand for its recorded formula: a number stays a number."""
    return saved_input(node, index, value) if isinstance(value, np.ndarray) else value


class _BinaryBackward(Node):
    """Base of binary nodes: keeps the operand shapes so broadcasting can be undone.

    ``tensor (op) number`` uses the same node with a None second edge, as torch does
    (``(x * 2).grad_fn`` is a MulBackward0 whose next_functions end in ``(None, 0)``).
    """

    __slots__ = ("_sa", "_sb")

    _sa: tuple[int, ...]
    _sb: tuple[int, ...]


class AddBackward0(_BinaryBackward):
    __slots__ = ("_alpha",)

    _alpha: float

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        gb = None
        if eb is not None:
            gb = sum_to(g if self._alpha == 1 else g * self._alpha, self._sb)
        return (sum_to(g, self._sa) if ea is not None else None, gb)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        ea, eb = self._next
        gb = None
        if eb is not None:
            gb = sum_to_tensor(g if self._alpha == 1 else g * self._alpha, self._sb)
        return (sum_to_tensor(g, self._sa) if ea is not None else None, gb)


class SubBackward0(_BinaryBackward):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        return (
            sum_to(g, self._sa) if ea is not None else None,
            sum_to(-g, self._sb) if eb is not None else None,
        )

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        ea, eb = self._next
        return (
            sum_to_tensor(g, self._sa) if ea is not None else None,
            sum_to_tensor(-g, self._sb) if eb is not None else None,
        )


class MulBackward0(_BinaryBackward):
    __slots__ = ("a", "b")

    a: np.ndarray
    # An array, or the number of ``tensor * number``.
    b: Any

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        return (
            sum_to(g * self.b, self._sa) if ea is not None else None,
            sum_to(g * self.a, self._sb) if eb is not None else None,
        )

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        ea, eb = self._next
        ga = gb = None
        if ea is not None:
            ga = sum_to_tensor(g * _operand(self, 1, self.b), self._sa)
        if eb is not None:
            gb = sum_to_tensor(g * saved_input(self, 0, self.a), self._sb)
        return (ga, gb)


class DivBackward0(_BinaryBackward):
    __slots__ = ("a", "b")

    a: np.ndarray
    # An array, or the number of ``tensor / number``.
    b: Any

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        ga = gb = None
        if ea is not None:
            ga = sum_to(g / self.b, self._sa)
        if eb is not None:
            gb = sum_to(-g * self.a / (self.b * self.b), self._sb)
        return (ga, gb)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        ea, eb = self._next
        b = _operand(self, 1, self.b)
        ga = gb = None
        if ea is not None:
            ga = sum_to_tensor(g / b, self._sa)
        if eb is not None:
            gb = sum_to_tensor(-g * saved_input(self, 0, self.a) / (b * b), self._sb)
        return (ga, gb)


class PowBackward1(_BinaryBackward):
    """Tensor ** Tensor. Zero where torch masks: exponent 0, and ``0 ** b`` with ``b >= 0``."""

    __slots__ = ("a", "b", "out")

    a: np.ndarray
    b: np.ndarray
    out: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        a, b = self.a, self.b
        ga = gb = None
        with np.errstate(divide="ignore", invalid="ignore"):
            if ea is not None:
                ga = sum_to(g * np.where(b == 0, 0, b * np.power(a, b - 1)), self._sa)
            if eb is not None:
                d_b = np.where((a == 0) & (b >= 0), 0, self.out * np.log(a))
                gb = sum_to(g * d_b.astype(g.dtype, copy=False), self._sb)
        return (ga, gb)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        ea, eb = self._next
        a, b = saved_input(self, 0, self.a), saved_input(self, 1, self.b)
        ga = gb = None
        if ea is not None:
            ga = sum_to_tensor(g * where(self.b == 0, 0, b * a ** (b - 1)), self._sa)
        if eb is not None:
            zero = (self.a == 0) & (self.b >= 0)
            gb = sum_to_tensor(g * where(zero, 0, saved_output(self, self.out) * a.log()), self._sb)
        return (ga, gb)


class _MinMaxBackward(_BinaryBackward):
    """maximum/minimum: the gradient goes to the winner, split evenly on ties (as torch).

    Selected with ``where``, not multiplied by a mask, so the loser gets an exact 0 even
    where the gradient is NaN or Inf, and a NaN operand (never a loser) gets all of it.
    """

    __slots__ = ("a", "b")

    a: np.ndarray
    b: np.ndarray

    _pick: Any = None

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        a, b = self.a, self.b
        pick, zero = type(self)._pick, g.dtype.type(0)
        shared = np.where(a == b, g * g.dtype.type(0.5), g)
        return (
            sum_to(np.where(pick(b, a), zero, shared), self._sa) if ea is not None else None,
            sum_to(np.where(pick(a, b), zero, shared), self._sb) if eb is not None else None,
        )

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        ea, eb = self._next
        a, b = self.a, self.b
        pick = type(self)._pick
        shared = where(a == b, g * 0.5, g)
        return (
            sum_to_tensor(where(pick(b, a), 0, shared), self._sa) if ea is not None else None,
            sum_to_tensor(where(pick(a, b), 0, shared), self._sb) if eb is not None else None,
        )


class MaximumBackward0(_MinMaxBackward):
    __slots__ = ()

    _pick = staticmethod(np.greater)


class MinimumBackward0(_MinMaxBackward):
    __slots__ = ()

    _pick = staticmethod(np.less)


class RsubBackward1(Node):
    """number - Tensor."""

    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (-g,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        return (-g,)


class PowBackward0(Node):
    """Tensor ** number."""

    __slots__ = ("_exponent", "a")

    _exponent: float
    a: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        p = self._exponent
        if p == 0:
            return (np.zeros_like(g),)
        if p == 2:
            return (g * 2 * self.a,)
        return (g * p * np.power(self.a, p - 1),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        p = self._exponent
        if p == 0:
            return (g * 0,)
        return (g * p * saved_input(self, 0, self.a) ** (p - 1),)


class PowBackward2(Node):
    """number ** Tensor; zero where the base is 0 and the exponent is >= 0 (as torch)."""

    __slots__ = ("_base", "out")

    _base: float
    out: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        base = self._base
        if base == 0:
            # torch: 0 where the exponent is >= 0 (out is 0 or 1), else out * log(0): -inf
            # where out is inf (negative exponent), NaN where out is NaN (NaN exponent)
            with np.errstate(invalid="ignore"):
                d_x = np.where(self.out <= 1, 0, self.out * -np.inf).astype(g.dtype, copy=False)
            return (g * d_x,)
        return (g * self.out * np.log(base).astype(g.dtype),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        out = saved_output(self, self.out)
        if self._base == 0:
            return (g * wrap(np.where(self.out == np.inf, -np.inf, 0).astype(self.out.dtype)),)
        return (g * out * float(np.log(self._base)),)


class NegBackward0(Node):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (-g,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        return (-g,)


def _binary(fn: Any, a: Tensor, b: Tensor) -> np.ndarray:
    ad, bd = a._data, b._data
    try:
        out = fn(ad, bd)
    except ValueError:
        raise broadcast_error(ad, bd) from None
    if ad.dtype is not bd.dtype and fn is not _true_divide:
        return _promote(out, ad, bd)
    return out


def _record_binary(out: np.ndarray, node: _BinaryBackward, a: Tensor, b: Tensor) -> Tensor:
    node._sa = a._data.shape
    node._sb = b._data.shape
    return record(out, node)


def _record_scalar(out: np.ndarray, node: _BinaryBackward, a: Tensor) -> Tensor:
    """Record ``a (op) number``: the number has no edge and the output has ``a``'s shape."""
    node._sa = a._data.shape
    return record(out, node)


def add(a: Tensor, b: Any, *, alpha: Any = 1) -> Tensor:
    """``a + alpha * b`` with broadcasting."""
    tb = _tensor_operand(b, a, "add")
    if tb is None:
        out = _scalar_result(a._data + (b * alpha if alpha != 1 else b), a._data)
        if needs_grad(a):
            node = AddBackward0((edge(a), None))
            node._alpha = alpha
            return _record_scalar(out, node, a)
        return wrap(out)
    bd = tb._data if alpha == 1 else tb._data * alpha
    try:
        out = a._data + bd
    except ValueError:
        raise broadcast_error(a._data, tb._data) from None
    if a._data.dtype is not tb._data.dtype:
        out = _promote(out, a._data, tb._data)
    if needs_grad(a, tb):
        node = AddBackward0((edge(a), edge(tb)))
        node._alpha = alpha
        return _record_binary(out, node, a, tb)
    return wrap(out)


def sub(a: Tensor, b: Any, *, alpha: Any = 1) -> Tensor:
    """``a - alpha * b`` with broadcasting."""
    if alpha != 1:
        return add(a, b, alpha=-alpha)
    tb = _tensor_operand(b, a, "sub")
    if tb is None:
        out = _scalar_result(a._data - b, a._data)
        if needs_grad(a):
            return _record_scalar(out, SubBackward0((edge(a), None)), a)
        return wrap(out)
    out = _binary(np.subtract, a, tb)
    if needs_grad(a, tb):
        return _record_binary(out, SubBackward0((edge(a), edge(tb))), a, tb)
    return wrap(out)


def rsub(a: Tensor, b: Any) -> Tensor:
    """``b - a`` for a number or array ``b``."""
    tb = _tensor_operand(b, a, "rsub")
    if tb is not None:
        return sub(tb, a)
    out = _scalar_result(b - a._data, a._data)
    if needs_grad(a):
        return record(out, RsubBackward1((edge(a),)))
    return wrap(out)


def mul(a: Tensor, b: Any) -> Tensor:
    """Elementwise product with broadcasting."""
    tb = _tensor_operand(b, a, "mul")
    if tb is None:
        out = _scalar_result(a._data * b, a._data)
        if needs_grad(a):
            node = MulBackward0((edge(a), None))
            node.b = b
            return _record_scalar(out, node, a)
        return wrap(out)
    out = _binary(np.multiply, a, tb)
    if needs_grad(a, tb):
        ea, eb = edge(a), edge(tb)
        node = MulBackward0((ea, eb))
        # Keep (and version-check) only what the needed gradients read, as torch does.
        if eb is None:
            node.b = tb._data
            node._save(tb)
        elif ea is None:
            node.a = a._data
            node._save(a)
        else:
            node.a = a._data
            node.b = tb._data
            node._save(a, tb)
        return _record_binary(out, node, a, tb)
    return wrap(out)


def _true_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Torch's dtype rules, and integers divide to the default float dtype (numpy: float64)."""
    out = np.true_divide(x, y)
    if x.dtype is y.dtype and x.dtype.kind == "f":
        return out
    target = x.dtype if x.dtype is y.dtype else result_dtype(x, y)
    if not is_floating(target):
        target = float32
    return out if out.dtype == target else out.astype(target)


def div(a: Tensor, b: Any) -> Tensor:
    """True division with broadcasting (integers give floats, as in torch)."""
    tb = _tensor_operand(b, a, "div")
    if tb is None:
        out = _scalar_result(np.true_divide(a._data, b), a._data)
        if needs_grad(a):
            node = DivBackward0((edge(a), None))
            node.b = b
            return _record_scalar(out, node, a)
        return wrap(out)
    out = _binary(_true_divide, a, tb)
    if needs_grad(a, tb):
        eb = edge(tb)
        node = DivBackward0((edge(a), eb))
        node.b = tb._data
        if eb is None:  # only a's gradient is needed, and it reads b alone
            node._save(tb)
        else:
            node.a = a._data
            node._save(a, tb)
        return _record_binary(out, node, a, tb)
    return wrap(out)


def rdiv(a: Tensor, b: Any) -> Tensor:
    """``b / a`` for a number or array ``b``: ``b * a.reciprocal()``, the graph torch builds."""
    tb = _tensor_operand(b, a, "rdiv")
    if tb is not None:
        return div(tb, a)
    from .unary import reciprocal

    return mul(reciprocal(a), b)


def pow(a: Tensor, exponent: Any) -> Tensor:
    """``a ** exponent`` for a number or Tensor exponent."""
    node: Node  # PowBackward0 for a number exponent, PowBackward1 for a Tensor one
    te = _tensor_operand(exponent, a, "pow")
    if te is None:
        out = _scalar_result(np.power(a._data, exponent), a._data)
        if needs_grad(a):
            node = PowBackward0((edge(a),))
            node._exponent = exponent
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
    tb = _tensor_operand(base, a, "rpow")
    if tb is not None:
        return pow(tb, a)
    out = _scalar_result(np.power(base, a._data), a._data)
    if needs_grad(a):
        node = PowBackward2((edge(a),))
        node._base = base
        node.out = out
        return record(out, node)
    return wrap(out)


def neg(a: Tensor) -> Tensor:
    out = np.negative(a._data)
    if needs_grad(a):
        return record(out, NegBackward0((edge(a),)))
    return wrap(out)


def _min_max(a: Tensor, b: Any, fn: Any, cls: type[_MinMaxBackward]) -> Tensor:
    tb = _tensor_operand(b, a, fn.__name__)
    if tb is None:
        tb = wrap(np.asarray(b, dtype=a._data.dtype))
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

    _sa: tuple[int, ...]
    _sb: tuple[int, ...]
    a: np.ndarray
    b: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        sa, sb = self._sa, self._sb
        # A 1-D operand acts as a row (left) or column (right) matrix; its unit dim is in g too.
        if len(sa) == 1:
            g = np.expand_dims(g, -2)
        if len(sb) == 1:
            g = np.expand_dims(g, -1)
        ga = gb = None
        if ea is not None:
            b = self.b if len(sb) > 1 else self.b[:, None]
            ga = sum_to(g @ np.swapaxes(b, -1, -2), sa if len(sa) > 1 else (1, sa[0]))
            ga = ga.reshape(sa)
        if eb is not None:
            a = self.a if len(sa) > 1 else self.a[None, :]
            gb = sum_to(np.swapaxes(a, -1, -2) @ g, sb if len(sb) > 1 else (sb[0], 1))
            gb = gb.reshape(sb)
        return (ga, gb)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        ea, eb = self._next
        sa, sb = self._sa, self._sb
        if len(sa) == 1:
            g = g.unsqueeze(-2)
        if len(sb) == 1:
            g = g.unsqueeze(-1)
        ga = gb = None
        if ea is not None:
            b = saved_input(self, 1, self.b)
            b = b if len(sb) > 1 else b.unsqueeze(-1)
            ga = sum_to_tensor(g @ b.transpose(-1, -2), sa if len(sa) > 1 else (1, sa[0]))
            ga = ga.reshape(sa)
        if eb is not None:
            a = saved_input(self, 0, self.a)
            a = a if len(sa) > 1 else a.unsqueeze(0)
            gb = sum_to_tensor(a.transpose(-1, -2) @ g, sb if len(sb) > 1 else (sb[0], 1))
            gb = gb.reshape(sb)
        return (ga, gb)


class DotBackward0(MmBackward0):
    """1-D @ 1-D: the output is 0-d, so each operand's gradient is the other one scaled."""

    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        return (g * self.b if ea is not None else None, g * self.a if eb is not None else None)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        ea, eb = self._next
        return (
            g * saved_input(self, 1, self.b) if ea is not None else None,
            g * saved_input(self, 0, self.a) if eb is not None else None,
        )


class MvBackward0(MmBackward0):
    """2-D @ 1-D."""

    __slots__ = ()


class BmmBackward0(MmBackward0):
    """3-D @ 3-D, as ``bmm``. Other shapes keep MmBackward0 (torch shows a reshape node there)."""

    __slots__ = ()


_MATMUL_NODES: dict[tuple[int, int], type[MmBackward0]] = {
    (1, 1): DotBackward0,
    (2, 1): MvBackward0,
    (3, 3): BmmBackward0,
}


def _matmul_error(sa: tuple[int, ...], sb: tuple[int, ...]) -> RuntimeError:
    if len(sa) == 1 and len(sb) == 1:
        return RuntimeError(
            f"inconsistent tensor size, expected tensor [{sa[0]}] and src [{sb[0]}] to have the "
            f"same number of elements, but got {sa[0]} and {sb[0]} elements respectively"
        )
    return RuntimeError(
        f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, sa))} and "
        f"{'x'.join(map(str, sb))})"
    )


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with numpy/torch batching rules; a shape mismatch names both shapes."""
    if not isinstance(b, Tensor):
        raise not_a_tensor("matmul", "other", b)
    if _autocast.lower is not None:  # torch's CPU autocast: lower precision
        a, b = to_lower(a, b)
    ad, bd = a._data, b._data
    if ad.ndim == 0 or bd.ndim == 0:
        raise RuntimeError(
            "both arguments to matmul need to be at least 1D, but they are "
            f"{ad.ndim}D and {bd.ndim}D"
        )
    try:
        out = ad @ bd
    except ValueError:
        raise _matmul_error(ad.shape, bd.shape) from None
    if out.dtype is not ad.dtype and ad.dtype is bd.dtype:
        out = out.astype(ad.dtype)  # numpy multiplies bfloat16 into float32; torch rounds back
    if needs_grad(a, b):
        cls = MmBackward0
        if ad.ndim != 2 or bd.ndim != 2:
            cls = _MATMUL_NODES.get((ad.ndim, bd.ndim), MmBackward0)
        ea, eb = edge(a), edge(b)
        node = cls((ea, eb))
        node._sa = ad.shape
        node._sb = bd.shape
        # a's gradient reads b and b's reads a: keep and version-check only what is needed.
        if eb is None:
            node.b = bd
            node._save(b)
        elif ea is None:
            node.a = ad
            node._save(a)
        else:
            node.a = ad
            node.b = bd
            node._save(a, b)
        return record(np.asarray(out), node)
    return wrap(np.asarray(out))


class WhereBackward0(Node):
    __slots__ = ("_sa", "_sb", "cond")

    _sa: tuple[int, ...]
    _sb: tuple[int, ...]
    cond: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ea, eb = self._next
        zero = np.zeros((), dtype=g.dtype)
        return (
            sum_to(np.where(self.cond, g, zero), self._sa) if ea is not None else None,
            sum_to(np.where(self.cond, zero, g), self._sb) if eb is not None else None,
        )

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        ea, eb = self._next
        return (
            sum_to_tensor(where(wrap(self.cond), g, 0), self._sa) if ea is not None else None,
            sum_to_tensor(where(wrap(self.cond), 0, g), self._sb) if eb is not None else None,
        )


_ONE_ARGUMENT: Any = object()
"""The default of where's ``input`` and ``other``: the one-argument form."""


def _where_operand(value: Any, like: Tensor, name: str) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if not isinstance(value, _ARRAY_OR_NUMBER):
        raise not_a_tensor("where", name, value)
    return wrap(np.asarray(value, dtype=like._data.dtype))


def where(condition: Tensor, input: Any = _ONE_ARGUMENT, other: Any = _ONE_ARGUMENT) -> Any:
    """Pick from ``input`` where ``condition`` holds, else from ``other``; ``where(condition)``
    alone is ``nonzero(condition, as_tuple=True)``."""
    if input is _ONE_ARGUMENT or other is _ONE_ARGUMENT:
        if input is not other:
            given = "Tensor" if isinstance(input, Tensor) else type(input).__name__
            raise TypeError(
                "where() received an invalid combination of arguments - got "
                f"(Tensor, {given}), but expected one of:"
            )
        from .index import nonzero

        return nonzero(condition, as_tuple=True)
    cond = condition._data if isinstance(condition, Tensor) else np.asarray(condition)
    like = input if isinstance(input, Tensor) else other
    if not isinstance(like, Tensor):
        like = wrap(np.asarray(input, dtype=float32))
    ta = _where_operand(input, like, "input")
    tb = _where_operand(other, like, "other")
    try:
        out = np.where(cond, ta._data, tb._data)
    except ValueError:
        raise broadcast_error(ta._data, tb._data) from None
    if ta._data.dtype is not tb._data.dtype:
        out = _promote(out, ta._data, tb._data)
    if needs_grad(ta, tb):
        node = WhereBackward0((edge(ta), edge(tb)))
        node.cond = cond
        node._sa = ta._data.shape
        node._sb = tb._data.shape
        return record(out, node)
    return wrap(out)
