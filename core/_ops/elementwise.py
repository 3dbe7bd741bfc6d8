"""More elementwise math, table-driven: ``floor``, ``ceil``, ``round``, ``trunc``, ``frac``,
``log1p``, ``expm1``, ``exp2``, ``rsqrt``, ``square``, ``erf``, ``erfc``, ``erfinv``, the
trigonometric and hyperbolic functions and their inverses, and ``atan2``, ``logaddexp``,
``hypot``, the logical ops and ``isclose``.

Each op is a numpy kernel and torch's derivative formula (derivatives.yaml), written once with
Tensor ops: the backward pass evaluates it on the saved arrays without recording, and a
``create_graph`` backward records it, so double backward comes for free. Integer inputs of
the floating functions give float32, as in torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._dtype import float32
from .._grad_mode import no_grad
from ._base import Node, Tensor, edge, needs_grad, record, sum_to, wrap
from ._graph import saved_input, saved_output, sum_to_tensor
from .unary import _erf, reciprocal

__all__ = [
    "BINARY",
    "LOGICAL",
    "UNARY",
    "acos",
    "acosh",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctan2",
    "arctanh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "ceil",
    "clamp_max",
    "clamp_min",
    "cosh",
    "erf",
    "erfc",
    "erfinv",
    "exp2",
    "expm1",
    "fix",
    "floor",
    "fmod",
    "frac",
    "hypot",
    "isclose",
    "log1p",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "round",
    "rsqrt",
    "sinc",
    "sinh",
    "square",
    "tan",
    "trunc",
]

Derivative = Callable[[Tensor, Tensor, Tensor], Tensor]
"""``(grad, input, output) -> input's gradient``, in Tensor ops."""


class _UnaryBackward(Node):
    """One input; ``x`` and ``out`` as the forward saw them; the class's ``formula``."""

    __slots__ = ("out", "x")

    formula: Derivative
    x: np.ndarray
    out: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        with no_grad():
            return (type(self).formula(wrap(g), wrap(self.x), wrap(self.out))._data,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        (g,) = grads
        assert g is not None
        x, out = saved_input(self, 0, self.x), saved_output(self, self.out)
        return (type(self).formula(g, x, out),)


def _floating(d: np.ndarray) -> np.ndarray:
    return d if d.dtype.kind in "fc" else d.astype(float32)


def _erfinv(y: np.ndarray) -> np.ndarray:
    """erf's inverse: Giles' single-precision start, then two Newton steps in float64."""
    w = -np.log((1.0 - y.astype(np.float64)) * (1.0 + y))
    small = w < 5.0
    ws, wl = w - 2.5, np.sqrt(w) - 3.0
    ps = np.polyval([2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                     0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941], ws)  # fmt: skip
    pl = np.polyval([-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                     0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682], wl)  # fmt: skip
    x = np.where(small, ps, pl) * y
    for _ in range(2):
        err = _erf(x) - y
        x = x - err / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
    out = np.where(np.abs(y) == 1, np.copysign(np.inf, y), x)
    return np.where(np.abs(y) > 1, np.nan, out).astype(y.dtype)


def _zero(g: Tensor, x: Tensor, out: Tensor) -> Tensor:
    return g * 0


_TWO_BY_SQRT_PI = 2.0 / math.sqrt(math.pi)

# name -> (torch's node name, numpy kernel of a floating array, derivative)
_FLOAT_UNARY: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray], Derivative]] = {
    "log1p": ("Log1PBackward0", np.log1p, lambda g, x, out: g / (x + 1)),
    "expm1": ("Expm1Backward0", np.expm1, lambda g, x, out: g * (out + 1)),
    "exp2": ("Exp2Backward0", np.exp2, lambda g, x, out: g * out * math.log(2)),
    "rsqrt": (
        "RsqrtBackward0",
        lambda d: (1 / np.sqrt(d)).astype(d.dtype, copy=False),
        lambda g, x, out: -0.5 * g * out.pow(3),
    ),
    "erf": ("ErfBackward0", _erf, lambda g, x, out: _TWO_BY_SQRT_PI * (-x * x).exp() * g),
    "erfc": (
        "ErfcBackward0",
        lambda d: (1 - _erf(d)).astype(d.dtype, copy=False),
        lambda g, x, out: -_TWO_BY_SQRT_PI * (-x * x).exp() * g,
    ),
    "erfinv": (
        "ErfinvBackward0",
        _erfinv,
        lambda g, x, out: 0.5 * math.sqrt(math.pi) * (out * out).exp() * g,
    ),
    "tan": ("TanBackward0", np.tan, lambda g, x, out: g * (1 + out * out)),
    "asin": ("AsinBackward0", np.arcsin, lambda g, x, out: g * rsqrt(1 - x * x)),
    "acos": ("AcosBackward0", np.arccos, lambda g, x, out: g * -rsqrt(1 - x * x)),
    "atan": ("AtanBackward0", np.arctan, lambda g, x, out: g / (x * x + 1)),
    "sinh": ("SinhBackward0", np.sinh, lambda g, x, out: g * cosh(x)),
    "cosh": ("CoshBackward0", np.cosh, lambda g, x, out: g * sinh(x)),
    "asinh": ("AsinhBackward0", np.arcsinh, lambda g, x, out: g * rsqrt(x * x + 1)),
    "acosh": ("AcoshBackward0", np.arccosh, lambda g, x, out: g * rsqrt(x * x - 1)),
    "atanh": ("AtanhBackward0", np.arctanh, lambda g, x, out: g * reciprocal(1 - x * x)),
    "sinc": (
        "SincBackward0",
        lambda d: np.sinc(d).astype(d.dtype, copy=False),
        lambda g, x, out: _sinc_grad(g, x),
    ),
    "frac": ("FracBackward0", lambda d: d - np.trunc(d), lambda g, x, out: g),
}


def _sinc_grad(g: Tensor, x: Tensor) -> Tensor:
    """torch's ``sinc_backward``, op for op: ``(pi x cos(pi x) - sin(pi x)) / (pi x^2)``, zero
    where ``pi x^2`` is. Near 0 both terms nearly cancel, so any other arrangement of the
    formula rounds differently from torch's (2e-3 relative was seen near x = 0)."""
    x_pi = x * math.pi
    x_sq_pi = x * x * math.pi
    return (g * (x_pi * x_pi.cos() - x_pi.sin()) / x_sq_pi).masked_fill(x_sq_pi == 0, 0.0)


# Rounding keeps integer dtypes (a copy) and has a zero gradient.
_ROUNDING: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
    "floor": ("FloorBackward0", np.floor),
    "ceil": ("CeilBackward0", np.ceil),
    "trunc": ("TruncBackward0", np.trunc),
}


def _node_class(name: str, formula: Derivative) -> type[_UnaryBackward]:
    return type(name, (_UnaryBackward,), {"__slots__": (), "formula": staticmethod(formula)})


def _apply(x: Tensor, out: np.ndarray, cls: type[_UnaryBackward]) -> Tensor:
    if needs_grad(x):
        node = cls((edge(x),))
        node.x = x._data
        node.out = out
        node._save(x)
        return record(out, node)
    return wrap(out)


def _float_op(name: str) -> Callable[[Tensor], Tensor]:
    node_name, kernel, formula = _FLOAT_UNARY[name]
    cls = _node_class(node_name, formula)

    def op(input: Tensor) -> Tensor:
        return _apply(input, np.asarray(kernel(_floating(input._data))), cls)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``torch.{name}``, elementwise; its gradient is torch's formula."
    return op


def _rounding_op(name: str) -> Callable[[Tensor], Tensor]:
    node_name, kernel = _ROUNDING[name]
    cls = _node_class(node_name, _zero)

    def op(input: Tensor) -> Tensor:
        d = input._data
        out = kernel(d) if d.dtype.kind == "f" else d.copy()
        return _apply(input, np.asarray(out), cls)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (
        f"``torch.{name}``, elementwise; integers are returned as they are, the gradient is zero."
    )
    return op


_ROUND_CLS = _node_class("RoundBackward0", _zero)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """``torch.round``: half to even, as torch; ``decimals`` rounds to that many digits."""
    d = input._data
    if d.dtype.kind != "f":
        out = d.copy()
    elif decimals == 0:
        out = np.round(d)
    else:
        scale = d.dtype.type(10.0**decimals)
        out = (
            np.round(d * scale) / scale if decimals > 0 else np.round(d / (1 / scale)) * (1 / scale)
        )
    return _apply(input, np.asarray(out, dtype=d.dtype), _ROUND_CLS)


def square(input: Tensor) -> Tensor:
    """``torch.square``: ``input ** 2`` (integers stay integers)."""
    return input.pow(2)


def clamp_min(input: Tensor, min: Any) -> Tensor:
    """``torch.clamp_min``: ``clamp(input, min=min)``."""
    return input.clamp(min=min)


def clamp_max(input: Tensor, max: Any) -> Tensor:
    """``torch.clamp_max``: ``clamp(input, max=max)``."""
    return input.clamp(max=max)


log1p: Callable[[Tensor], Tensor] = _float_op("log1p")
expm1: Callable[[Tensor], Tensor] = _float_op("expm1")
exp2: Callable[[Tensor], Tensor] = _float_op("exp2")
rsqrt: Callable[[Tensor], Tensor] = _float_op("rsqrt")
erf: Callable[[Tensor], Tensor] = _float_op("erf")
erfc: Callable[[Tensor], Tensor] = _float_op("erfc")
erfinv: Callable[[Tensor], Tensor] = _float_op("erfinv")
tan: Callable[[Tensor], Tensor] = _float_op("tan")
asin: Callable[[Tensor], Tensor] = _float_op("asin")
acos: Callable[[Tensor], Tensor] = _float_op("acos")
atan: Callable[[Tensor], Tensor] = _float_op("atan")
sinh: Callable[[Tensor], Tensor] = _float_op("sinh")
cosh: Callable[[Tensor], Tensor] = _float_op("cosh")
asinh: Callable[[Tensor], Tensor] = _float_op("asinh")
acosh: Callable[[Tensor], Tensor] = _float_op("acosh")
atanh: Callable[[Tensor], Tensor] = _float_op("atanh")
sinc: Callable[[Tensor], Tensor] = _float_op("sinc")
frac: Callable[[Tensor], Tensor] = _float_op("frac")
floor: Callable[[Tensor], Tensor] = _rounding_op("floor")
ceil: Callable[[Tensor], Tensor] = _rounding_op("ceil")
trunc: Callable[[Tensor], Tensor] = _rounding_op("trunc")
arcsin = asin
arccos = acos
arctan = atan
arcsinh = asinh
arccosh = acosh
arctanh = atanh
fix = trunc

UNARY: dict[str, Callable[..., Tensor]] = {
    **{name: globals()[name] for name in _FLOAT_UNARY},
    **{name: globals()[name] for name in _ROUNDING},
    "round": round,
    "square": square,
    "clamp_min": clamp_min,
    "clamp_max": clamp_max,
}
"""Every unary op here by torch's name (``torch.X`` and ``Tensor.X``; ``X_`` in place)."""

UNARY.update(
    {
        alias: globals()[alias]
        for alias in ("arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "fix")
    }
)  # fmt: skip  (torch's other names)


# ---------------------------------------------------------------------------- binary
BinaryDerivative = Callable[[Tensor, Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]


class _BinaryBackward(Node):
    __slots__ = ("a", "b", "out")

    formula: BinaryDerivative
    a: np.ndarray
    b: np.ndarray
    out: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        with no_grad():
            da, db = type(self).formula(wrap(g), wrap(self.a), wrap(self.b), wrap(self.out))
        ea, eb = self._next
        return (
            sum_to(da._data, self.a.shape) if ea is not None else None,
            sum_to(db._data, self.b.shape) if eb is not None else None,
        )

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        (g,) = grads
        assert g is not None
        a, b = saved_input(self, 0, self.a), saved_input(self, 1, self.b)
        da, db = type(self).formula(g, a, b, saved_output(self, self.out))
        ea, eb = self._next
        return (
            sum_to_tensor(da, self.a.shape) if ea is not None else None,
            sum_to_tensor(db, self.b.shape) if eb is not None else None,
        )


def _atan2_grad(g: Tensor, a: Tensor, b: Tensor, out: Tensor) -> tuple[Tensor, Tensor]:
    recip = reciprocal(a * a + b * b)
    return g * b * recip, g * -a * recip


def _logaddexp_grad(g: Tensor, a: Tensor, b: Tensor, out: Tensor) -> tuple[Tensor, Tensor]:
    return g / (1 + (b - a).exp()), g / (1 + (a - b).exp())


def _hypot_grad(g: Tensor, a: Tensor, b: Tensor, out: Tensor) -> tuple[Tensor, Tensor]:
    return g * a / out, g * b / out


def _fmod_grad(g: Tensor, a: Tensor, b: Tensor, out: Tensor) -> tuple[Tensor, Tensor]:
    return g, g * -UNARY["trunc"](a / b)


_BINARY_TABLE: dict[str, tuple[str, Callable[[np.ndarray, np.ndarray], Any], BinaryDerivative]] = {
    "atan2": ("Atan2Backward0", np.arctan2, _atan2_grad),
    "logaddexp": ("LogaddexpBackward0", np.logaddexp, _logaddexp_grad),
    "hypot": ("HypotBackward0", np.hypot, _hypot_grad),
    "fmod": ("FmodBackward0", np.fmod, _fmod_grad),
}


def _operand(value: Any, like: Tensor) -> Tensor:
    return value if isinstance(value, Tensor) else wrap(np.asarray(value, dtype=like._data.dtype))


def _binary_op(name: str) -> Callable[[Tensor, Any], Tensor]:
    node_name, kernel, formula = _BINARY_TABLE[name]
    cls = type(node_name, (_BinaryBackward,), {"__slots__": (), "formula": staticmethod(formula)})

    def op(input: Tensor, other: Any) -> Tensor:
        other = _operand(other, input)
        a, b = input._data, other._data
        if name != "fmod":
            a, b = _floating(a), _floating(b)
        out = np.asarray(kernel(a, b))
        if out.dtype != np.result_type(a, b):
            out = out.astype(np.result_type(a, b))
        if needs_grad(input, other):
            node = cls((edge(input), edge(other)))
            node.a, node.b, node.out = a, b, out
            node._save(input, other)
            return record(out, node)
        return wrap(out)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``torch.{name}`` with broadcasting; its gradients are torch's formulas."
    return op


atan2 = _binary_op("atan2")
arctan2 = atan2
logaddexp = _binary_op("logaddexp")
hypot = _binary_op("hypot")
fmod = _binary_op("fmod")
BINARY: dict[str, Callable[..., Tensor]] = {
    "atan2": atan2, "arctan2": arctan2, "logaddexp": logaddexp, "hypot": hypot, "fmod": fmod,
}  # fmt: skip


def _logical(kernel: Callable[..., np.ndarray], name: str) -> Callable[..., Tensor]:
    def op(input: Tensor, *other: Any) -> Tensor:
        arrays = [t._data if isinstance(t, Tensor) else np.asarray(t) for t in (input, *other)]
        return wrap(np.asarray(kernel(*arrays)))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``torch.{name}``: a bool tensor, truthiness of each element (no gradient)."
    return op


logical_and = _logical(np.logical_and, "logical_and")
logical_or = _logical(np.logical_or, "logical_or")
logical_xor = _logical(np.logical_xor, "logical_xor")
logical_not = _logical(np.logical_not, "logical_not")
LOGICAL: dict[str, Callable[..., Tensor]] = {
    "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor,
    "logical_not": logical_not,
}  # fmt: skip


def isclose(
    input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Tensor:
    """``|input - other| <= atol + rtol * |other|`` elementwise, as a bool tensor."""
    return wrap(np.isclose(input._data, other._data, rtol=rtol, atol=atol, equal_nan=equal_nan))
