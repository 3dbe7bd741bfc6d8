"""The ``hookgrad.<op>`` functional forms: the same kernels as the Tensor methods."""

from __future__ import annotations

from typing import Any

from ._ops._base import public_op
from ._ops.arith import add, div, matmul, maximum, minimum, mul, neg, pow, sub, where
from ._ops.compare import all, any, eq, ge, gt, isfinite, isinf, isnan, le, lt, ne
from ._ops.cumulative import cumprod, cumsum
from ._ops.diagonal import diag, diag_embed, diagonal, trace
from ._ops.index import gather, masked_fill, nonzero, scatter, scatter_add
from ._ops.out import accepts_out
from ._ops.pointwise import addcdiv, addcmul, lerp
from ._ops.products import baddbmm, bmm, einsum, mm, mv
from ._ops.random import bernoulli, histc, histogram, multinomial, normal
from ._ops.rearrange import flip, index_select, narrow, repeat_interleave, tril, triu
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
    select,
    split,
    split_with_sizes,
    squeeze,
    stack,
    t,
    transpose,
    unbind,
    unsqueeze,
)
from ._ops.sorting import argsort, median, sort, topk
from ._ops.stats import std_mean, var_mean
from ._ops.unary import (
    abs,
    clamp,
    cos,
    exp,
    log,
    log2,
    log10,
    reciprocal,
    relu,
    sigmoid,
    sign,
    sin,
    sqrt,
    tanh,
)
from ._tensor import Tensor

__all__ = [
    "abs",
    "add",
    "addcdiv",
    "addcmul",
    "all",
    "allclose",
    "amax",
    "amin",
    "any",
    "argmax",
    "argmin",
    "argwhere",
    "argsort",
    "baddbmm",
    "bernoulli",
    "bmm",
    "cat",
    "chunk",
    "clamp",
    "clone",
    "clip",
    "cos",
    "cumprod",
    "cumsum",
    "diag",
    "diag_embed",
    "diagonal",
    "div",
    "einsum",
    "eq",
    "equal",
    "exp",
    "flatten",
    "flip",
    "gather",
    "ge",
    "gt",
    "histc",
    "histogram",
    "index_select",
    "isfinite",
    "isinf",
    "isnan",
    "le",
    "lerp",
    "log",
    "log10",
    "log2",
    "log_softmax",
    "logsumexp",
    "lt",
    "masked_fill",
    "matmul",
    "max",
    "maximum",
    "mean",
    "median",
    "min",
    "minimum",
    "mm",
    "mul",
    "multinomial",
    "mv",
    "narrow",
    "ne",
    "neg",
    "nonzero",
    "norm",
    "normal",
    "permute",
    "pow",
    "prod",
    "reciprocal",
    "relu",
    "repeat_interleave",
    "reshape",
    "scatter",
    "scatter_add",
    "select",
    "sigmoid",
    "sign",
    "sin",
    "softmax",
    "sort",
    "split",
    "split_with_sizes",
    "sqrt",
    "squeeze",
    "stack",
    "std",
    "std_mean",
    "sub",
    "sum",
    "t",
    "tanh",
    "topk",
    "trace",
    "transpose",
    "tril",
    "triu",
    "unbind",
    "unsqueeze",
    "var",
    "var_mean",
    "where",
]

# Every op above as its public function form: a first argument that is not a Tensor is
# torch's TypeError (see public_op), checked only after the call failed. einsum's first
# argument is the equation, normal's may be a number. They take numpy's ``axis``/``keepdims``
# too, as torch's argument parser does, except those torch writes in Python.
_NOT_TENSOR_FIRST = frozenset({"einsum", "normal"})
_TORCH_NAMES_ONLY = frozenset({"norm", "split"})
globals().update(
    {
        name: public_op(value, numpy_names=name not in _TORCH_NAMES_ONLY)
        for name, value in tuple(globals().items())
        if name in __all__ and name not in _NOT_TENSOR_FIRST
    }
)
clip = clamp

# torch's function forms that take ``out=`` (the ones training code uses).
_TAKE_OUT = [
    "abs",
    "add",
    "addcdiv",
    "addcmul",
    "bmm",
    "cat",
    "clamp",
    "cos",
    "cumprod",
    "cumsum",
    "diag",
    "div",
    "exp",
    "gather",
    "index_select",
    "lerp",
    "log",
    "log10",
    "log2",
    "matmul",
    "maximum",
    "mean",
    "minimum",
    "mm",
    "mul",
    "mv",
    "neg",
    "pow",
    "prod",
    "sigmoid",
    "sin",
    "sqrt",
    "stack",
    "sub",
    "sum",
    "tanh",
    "where",
]
globals().update({name: accepts_out(globals()[name]) for name in _TAKE_OUT})


def clone(input: Tensor, *, memory_format: Any = None) -> Tensor:
    """A copy of ``input`` that stays in the graph (``CloneBackward0``)."""
    return input.clone(memory_format=memory_format)


clone = public_op(clone)


def argwhere(input: Tensor) -> Tensor:
    """The coordinates of the non-zero entries, one row each: ``nonzero(input)``."""
    return nonzero(input)


def equal(a: Tensor, b: Tensor) -> bool:
    """True if both tensors have the same shape and elements."""
    return a.equal(b)


def allclose(
    a: Tensor, b: Tensor, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> bool:
    return a.allclose(b, rtol=rtol, atol=atol, equal_nan=equal_nan)
