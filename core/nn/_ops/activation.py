"""Activation functions of ``F`` beyond the basic unary ops: forward and derivative side by side.

Derivatives that switch on a region of the input (hardtanh/relu6, ELU, hardswish, softplus's
threshold, PReLU) select with ``np.where`` rather than multiply by a mask, so a NaN or inf
incoming gradient stays out of the region where torch's formula gives 0. In-place forms run
the op on a snapshot through ``apply_inplace``, as ``relu_`` does.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..._dtype import is_floating, opmath
from ..._ops import reduce as _reduce
from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from ..._ops.inplace import apply_inplace
from ...amp._state import state as _autocast
from ...amp._state import to_lower

__all__ = [
    "CeluBackward0",
    "CeluBackward1",
    "EluBackward0",
    "EluBackward1",
    "HardsigmoidBackward0",
    "HardswishBackward0",
    "HardtanhBackward0",
    "LogSigmoidBackward0",
    "MishBackward0",
    "PreluKernelBackward0",
    "SiluBackward0",
    "SoftplusBackward0",
    "celu",
    "elu",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "logsigmoid",
    "mish",
    "prelu",
    "relu6",
    "selu",
    "silu",
    "softmin",
    "softplus",
    "softsign",
    "tanhshrink",
]


def _float_only(x: np.ndarray, kernel: str) -> None:
    """torch's refusal of integer input to the transcendental activations."""
    if not is_floating(x.dtype):
        name = {"i": "Long", "u": "Byte", "b": "Bool"}.get(x.dtype.kind, str(x.dtype))
        if x.dtype == np.int32:
            name = "Int"
        raise NotImplementedError(f"\"{kernel}_cpu\" not implemented for '{name}'")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic sigmoid split by sign, so ``exp`` never overflows."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _softplus(x: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> np.ndarray:
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold`` (torch's formula)."""
    bx = x * beta
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        soft = np.log1p(np.exp(bx)) / beta
    return np.where(bx > threshold, x, soft).astype(x.dtype, copy=False)


def _record(input: Tensor, out: np.ndarray, node_class: type[Node], /, **fields: Any) -> Tensor:
    """``out`` as the result of a one-input node that keeps ``fields`` (arrays and options)."""
    if not needs_grad(input):
        return wrap(out)
    node = node_class((edge(input),))
    for name, value in fields.items():
        setattr(node, name, value)
    node._save(input)
    return record(out, node)


def _maybe_inplace(input: Tensor, inplace: bool, op: Any) -> Tensor:
    return apply_inplace(input, op, None) if inplace else op(input)


# -- SiLU and Mish -----------------------------------------------------------------------------


class SiluBackward0(Node):
    """``d/dx x*s(x) = s(x) * (1 + x * (1 - s(x)))``."""

    __slots__ = ("x",)

    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x = opmath(self.x)  # float16/bfloat16: in float32, rounded once
        s = _sigmoid(x)
        return ((opmath(g) * (s * (1 + x * (1 - s)))).astype(g.dtype, copy=False),)


def _silu(input: Tensor) -> Tensor:
    x = input._data
    _float_only(x, "silu")
    w = opmath(x)  # float16/bfloat16: in float32, rounded once
    return _record(input, (w * _sigmoid(w)).astype(x.dtype, copy=False), SiluBackward0, x=x)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)`` (swish)."""
    return _maybe_inplace(input, inplace, _silu)


class MishBackward0(Node):
    """``d/dx x*tanh(sp(x)) = tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)**2)``."""

    __slots__ = ("x",)

    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x = opmath(self.x)  # float16/bfloat16: in float32, rounded once
        t = np.tanh(_softplus(x))
        return ((opmath(g) * (t + x * _sigmoid(x) * (1 - t * t))).astype(g.dtype, copy=False),)


def _mish(input: Tensor) -> Tensor:
    x = input._data
    _float_only(x, "mish")
    w = opmath(x)  # float16/bfloat16: in float32, rounded once
    return _record(
        input, (w * np.tanh(_softplus(w))).astype(x.dtype, copy=False), MishBackward0, x=x
    )


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    return _maybe_inplace(input, inplace, _mish)


# -- Softplus ----------------------------------------------------------------------------------


class SoftplusBackward0(Node):
    """``sigmoid(beta * x)`` below the threshold, the gradient itself above it."""

    __slots__ = ("_beta", "_threshold", "x")

    _beta: float
    _threshold: float
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        bx = self.x * self._beta
        return (np.where(bx > self._threshold, g, g * _sigmoid(bx)),)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``; the identity where ``beta * x > threshold``."""
    x = input._data
    _float_only(x, "softplus")
    out = _softplus(x, beta, threshold)
    return _record(input, out, SoftplusBackward0, x=x, _beta=beta, _threshold=threshold)


# -- Hardtanh and ReLU6 ------------------------------------------------------------------------


class HardtanhBackward0(Node):
    """The gradient strictly inside ``(min_val, max_val)``, 0 elsewhere (selected)."""

    __slots__ = ("_max", "_min", "x")

    _max: float
    _min: float
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x = self.x
        outside = (x <= self._min) | (x >= self._max)
        return (np.where(outside, g.dtype.type(0), g),)


def _hardtanh(input: Tensor, min_val: float, max_val: float) -> Tensor:
    x = input._data
    out = np.clip(x, min_val, max_val).astype(x.dtype, copy=False)
    return _record(input, out, HardtanhBackward0, x=x, _min=min_val, _max=max_val)


def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """Clamp into ``[min_val, max_val]``."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _maybe_inplace(input, inplace, lambda t: _hardtanh(t, min_val, max_val))


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``: hardtanh on ``[0, 6]``, recorded as torch's HardtanhBackward0."""
    return hardtanh(input, 0.0, 6.0, inplace)


# -- ELU, SELU, CELU: one formula, torch's elu(x, alpha, scale, input_scale) ----------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


class EluBackward0(Node):
    """From the input: ``g * scale`` where ``x > 0``, else
    ``g * alpha * scale * input_scale * exp(x * input_scale)`` (selected)."""

    __slots__ = ("_alpha", "_input_scale", "_scale", "x")

    _alpha: float
    _input_scale: float
    _scale: float
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x, a, s, i = self.x, self._alpha, self._scale, self._input_scale
        with np.errstate(over="ignore"):
            negative = (a * s * i * np.exp(x * i)).astype(x.dtype, copy=False)
        return (np.where(x > 0, g * x.dtype.type(s), g * negative),)


class EluBackward1(Node):
    """The in-place form, from the result: ``g * input_scale * (out + alpha * scale)`` where
    ``out <= 0``, ``g * scale`` elsewhere."""

    __slots__ = ("_alpha", "_input_scale", "_scale", "out")

    _alpha: float
    _input_scale: float
    _scale: float
    out: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        out, a, s, i = self.out, self._alpha, self._scale, self._input_scale
        negative = (i * (out + out.dtype.type(a * s))).astype(out.dtype, copy=False)
        return (np.where(out > 0, g * out.dtype.type(s), g * negative),)


class CeluBackward0(EluBackward0):
    __slots__ = ()


class CeluBackward1(EluBackward1):
    __slots__ = ()


def _elu_values(x: np.ndarray, alpha: float, scale: float, input_scale: float) -> np.ndarray:
    _float_only(x, "elu")
    with np.errstate(over="ignore"):
        negative = (alpha * scale * np.expm1(np.minimum(x, 0) * input_scale)).astype(x.dtype)
    return np.where(x > 0, (x * scale).astype(x.dtype, copy=False), negative)


def _elu(
    input: Tensor,
    inplace: bool,
    alpha: float,
    scale: float = 1.0,
    input_scale: float = 1.0,
    nodes: tuple[type[Node], type[Node]] = (EluBackward0, EluBackward1),
) -> Tensor:
    """torch's ``elu(x, alpha, scale, input_scale)``; the in-place form saves the result."""
    options = {"_alpha": alpha, "_scale": scale, "_input_scale": input_scale}
    if not inplace:
        out = _elu_values(input._data, alpha, scale, input_scale)
        return _record(input, out, nodes[0], x=input._data, **options)

    def op(t: Tensor) -> Tensor:
        out = _elu_values(t._data, alpha, scale, input_scale)
        return _record(t, out, nodes[1], out=out, **options)

    return apply_inplace(input, op, None)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere."""
    return _elu(input, inplace, alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalizing constants."""
    return _elu(input, inplace, _SELU_ALPHA, _SELU_SCALE)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _elu(input, inplace, alpha, 1.0, 1.0 / alpha, (CeluBackward0, CeluBackward1))


# -- Hardsigmoid, LogSigmoid, Softsign, Tanhshrink ----------------------------------------------


class HardsigmoidBackward0(Node):
    """``g / 6`` strictly inside ``(-3, 3)``, 0 elsewhere (selected)."""

    __slots__ = ("x",)

    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x = self.x
        inside = (x > -3) & (x < 3)
        return (np.where(inside, g / g.dtype.type(6), g.dtype.type(0)),)


def _hardsigmoid(input: Tensor) -> Tensor:
    x = input._data
    out = (np.clip(x + 3, 0, 6) / 6).astype(x.dtype, copy=False)
    return _record(input, out, HardsigmoidBackward0, x=x)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    return _maybe_inplace(input, inplace, _hardsigmoid)


class LogSigmoidBackward0(Node):
    """``d/dx log(sigmoid(x)) = sigmoid(-x)``."""

    __slots__ = ("x",)

    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g * _sigmoid(-self.x),)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x)) = -softplus(-x)``, computed without overflow."""
    x = input._data
    _float_only(x, "log_sigmoid_forward")
    out = (np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))).astype(x.dtype, copy=False)
    return _record(input, out, LogSigmoidBackward0, x=x)


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)`` (recorded as its ops, as torch's)."""
    return input / (input.abs() + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)`` (recorded as its ops, as torch's)."""
    return input - input.tanh()


# -- Hardswish ---------------------------------------------------------------------------------


class HardswishBackward0(Node):
    """0 below -3, ``g * (x / 3 + 1/2)`` on ``[-3, 3]``, the gradient above 3 (selected)."""

    __slots__ = ("x",)

    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        x = self.x
        middle = g * (x / 3 + 0.5).astype(x.dtype, copy=False)
        return (np.where(x < -3, g.dtype.type(0), np.where(x <= 3, middle, g)),)


def _hardswish(input: Tensor) -> Tensor:
    x = input._data
    out = (x * np.clip(x + 3, 0, 6) / 6).astype(x.dtype, copy=False)
    return _record(input, out, HardswishBackward0, x=x)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    return _maybe_inplace(input, inplace, _hardswish)


# -- Softmin -----------------------------------------------------------------------------------


def softmin(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """``softmax(-x)`` along ``dim``."""
    if dim is None:
        warnings.warn(
            "Implicit dimension choice for softmin has been deprecated. Change the call to "
            "include dim=X as an argument.",
            UserWarning,
            stacklevel=_stacklevel,
        )
        dim = 0 if input.ndim in (0, 1, 3) else 1
    x = input if dtype is None else input.to(dtype)
    return _reduce.softmax(-x, dim)


# -- PReLU -------------------------------------------------------------------------------------


class PreluKernelBackward0(Node):
    """Edges ``(input, weight)``: ``g`` or ``w * g`` for the input, ``x * g`` summed over
    everything but the channel dim for the weight, both where ``x <= 0`` only (selected)."""

    __slots__ = ("_weight_shape", "w", "x")

    _weight_shape: tuple[int, ...]
    w: np.ndarray
    x: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ex, ew = self._next
        x, w = self.x, self.w
        positive = x > 0
        zero = g.dtype.type(0)
        gx = np.where(positive, g, w * g) if ex is not None else None
        gw = None
        if ew is not None:
            per_element = np.where(positive, zero, x * g)
            axes = tuple(d for d in range(x.ndim) if w.ndim == 0 or w.shape[d] == 1)
            gw = per_element.sum(axis=axes).reshape(self._weight_shape)
        return (gx, gw)


def _prelu_weight(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The weight shaped to broadcast along ``x``'s channel dim (dim 1, or 0 for 1-D)."""
    if w.ndim > 1:
        raise RuntimeError(
            f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {w.ndim}"
        )
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w.size != 1 and w.size != channels:
        raise RuntimeError(
            "Mismatch of parameter numbers and input channel size. Found parameter numbers = "
            f"{w.size} and channel size = {channels}."
        )
    if w.size == 1 or x.ndim < 2:
        return w.reshape(()) if w.size == 1 else w
    return w.reshape((1, channels) + (1,) * (x.ndim - 2))


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` where positive, ``weight * x`` elsewhere, one learned slope per channel."""
    if _autocast.lower is not None:  # torch's CPU autocast: lower precision
        input, weight = to_lower(input, weight)
    x, w = input._data, _prelu_weight(input._data, weight._data)
    out = np.where(x > 0, x, w * x).astype(x.dtype, copy=False)
    if not needs_grad(input, weight):
        return wrap(out)
    node = PreluKernelBackward0((edge(input), edge(weight)))
    node.x, node.w, node._weight_shape = x, w, tuple(weight.shape)
    node._save(input, weight)
    return record(out, node)
