"""The ``hookgrad.<op>`` functional forms: the same kernels as the Tensor methods."""

from __future__ import annotations

from ._ops._base import public_op
from ._ops.arith import add, div, matmul, maximum, minimum, mul, neg, pow, sub, where
from ._ops.compare import all, any, eq, ge, gt, isfinite, isinf, isnan, le, lt, ne
from ._ops.index import gather, masked_fill
from ._ops.reduce import (
    amax,
    amin,
    argmax,
    argmin,
    log_softmax,
    logsumexp,
    max,
    mean,
    min,
    norm,
    prod,
    softmax,
    std,
    sum,
    var,
)
from ._ops.shape import (
    cat,
    chunk,
    flatten,
    permute,
    reshape,
    split,
    squeeze,
    stack,
    transpose,
    unbind,
    unsqueeze,
)
from ._ops.unary import abs, clamp, cos, exp, log, relu, sigmoid, sign, sin, sqrt, tanh
from ._tensor import Tensor

__all__ = [
    "abs",
    "add",
    "all",
    "allclose",
    "amax",
    "amin",
    "any",
    "argmax",
    "argmin",
    "cat",
    "chunk",
    "clamp",
    "clip",
    "cos",
    "div",
    "eq",
    "equal",
    "exp",
    "flatten",
    "gather",
    "ge",
    "gt",
    "isfinite",
    "isinf",
    "isnan",
    "le",
    "log",
    "log_softmax",
    "logsumexp",
    "lt",
    "masked_fill",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mm",
    "mul",
    "ne",
    "neg",
    "norm",
    "permute",
    "pow",
    "prod",
    "relu",
    "reshape",
    "sigmoid",
    "sign",
    "sin",
    "softmax",
    "split",
    "sqrt",
    "squeeze",
    "stack",
    "std",
    "sub",
    "sum",
    "tanh",
    "transpose",
    "unbind",
    "unsqueeze",
    "var",
    "where",
]

# Every op above as its public function form: a first argument that is not a Tensor is
# torch's TypeError (see public_op), checked only after the call failed.
globals().update(
    {name: public_op(value) for name, value in tuple(globals().items()) if name in __all__}
)
clip = clamp
mm = matmul


def equal(a: Tensor, b: Tensor) -> bool:
    """True if both tensors have the same shape and elements."""
    return a.equal(b)


def allclose(
    a: Tensor, b: Tensor, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> bool:
    return a.allclose(b, rtol=rtol, atol=atol, equal_nan=equal_nan)
