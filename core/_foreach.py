"""``torch._foreach_*``: one operation over a list of tensors, as torch 2.13 offers them.

Torch's CPU implementation of these functions is the per-tensor op in a loop, so hookgrad's is
too: each element goes through hookgrad's own tensor op, which brings autograd, version
counters, broadcasting and torch's in-place errors. In-place functions return the list they
were given (torch does); out-of-place ones return a tuple.

The second operand takes torch's overloads: a scalar (used for every tensor), a list of
scalars or a 1-D tensor of them (one per tensor), a single tensor (broadcast to every tensor)
or a list of tensors (one per tensor). Lists of different lengths raise torch's RuntimeError.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any, TypeAlias

from ._ops import arith, compare, unary
from ._ops.inplace import apply_inplace
from ._tensor import Tensor

__all__ = [
    "_foreach_add",
    "_foreach_add_",
    "_foreach_addcdiv",
    "_foreach_addcdiv_",
    "_foreach_addcmul",
    "_foreach_addcmul_",
    "_foreach_div",
    "_foreach_div_",
    "_foreach_lerp",
    "_foreach_lerp_",
    "_foreach_maximum",
    "_foreach_maximum_",
    "_foreach_mul",
    "_foreach_mul_",
    "_foreach_neg",
    "_foreach_neg_",
    "_foreach_norm",
    "_foreach_sqrt",
    "_foreach_sqrt_",
    "_foreach_sub",
    "_foreach_sub_",
    "_foreach_zero_",
]

TensorList: TypeAlias = Sequence[Tensor]
Operand: TypeAlias = Any  # scalar | list of scalars | Tensor | list of Tensors


# ---------------------------------------------------------------------------- operands
def _check(tensors: TensorList, *others: TensorList) -> None:
    """Torch's list checks: a non-empty first list, the others of the same length."""
    if len(tensors) == 0:
        raise RuntimeError("Tensor list must have at least one tensor.")
    for other in others:
        if len(other) != len(tensors):
            raise RuntimeError(
                "Tensor lists must have the same number of tensors, got "
                f"{len(tensors)} and {len(other)}"
            )


def _per_tensor(tensors: TensorList, operand: Operand) -> list[Any]:
    """The operand each tensor is combined with, whichever of torch's overloads was used."""
    if isinstance(operand, (list, tuple)):
        if operand and all(isinstance(o, Tensor) for o in operand):
            _check(tensors, operand)
            return list(operand)
        if len(operand) != len(tensors):
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        return list(operand)
    if isinstance(operand, Tensor) and operand.dim() == 1 and len(tensors) > 1:
        # The ``Tensor scalars`` overload of addcmul/addcdiv: one scalar per tensor.
        if operand.numel() != len(tensors):
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        return operand.tolist()
    return [operand] * len(tensors)


def _pairs(tensors: TensorList, operand: Operand) -> Iterator[tuple[Tensor, Any]]:
    _check(tensors)
    return zip(tensors, _per_tensor(tensors, operand))


def _requiring_grad(*operands: Any) -> Tensor | None:
    """One operand that requires grad (so an in-place op records), else None."""
    for operand in operands:
        if isinstance(operand, Tensor) and operand._requires_grad:
            return operand
    return None


# ---------------------------------------------------------------------------- element ops
def _addc(op: Any, x: Tensor, t1: Tensor, t2: Tensor, value: Any) -> Tensor:
    """``x + (value * t1) op t2``, torch's order for addcmul/addcdiv."""
    scaled = t1 if value == 1 else arith.mul(t1, value)
    return arith.add(x, op(scaled, t2))


def _lerp(start: Tensor, end: Tensor, weight: Any) -> Tensor:
    """Torch's two-sided lerp: ``start + w (end - start)`` for ``|w| < 0.5``, else from ``end``."""
    diff = arith.sub(end, start)
    if not isinstance(weight, Tensor):
        if abs(weight) < 0.5:
            return arith.add(start, arith.mul(diff, weight))
        return arith.sub(end, arith.mul(diff, _one_minus(weight, start)))
    small = compare.lt(unary.abs(weight), 0.5)
    low = arith.add(start, arith.mul(diff, weight))
    high = arith.sub(end, arith.mul(diff, arith.rsub(weight, 1)))
    return arith.where(small, low, high)


def _one_minus(weight: float, like: Tensor) -> float:
    """``1 - weight`` computed in ``like``'s dtype, as torch's kernel does."""
    dtype = like.dtype.type
    return float(dtype(1) - dtype(weight))


# ---------------------------------------------------------------------------- binary
def _foreach_add_(self: TensorList, other: Operand, *, alpha: Any = 1) -> TensorList:
    """``self[i] += alpha * other[i]`` in place."""
    for t, o in _pairs(self, other):
        t.add_(o, alpha=alpha)
    return self


def _foreach_add(self: TensorList, other: Operand, *, alpha: Any = 1) -> tuple[Tensor, ...]:
    """``self[i] + alpha * other[i]``."""
    return tuple(arith.add(t, o, alpha=alpha) for t, o in _pairs(self, other))


def _foreach_sub_(self: TensorList, other: Operand, *, alpha: Any = 1) -> TensorList:
    """``self[i] -= alpha * other[i]`` in place."""
    for t, o in _pairs(self, other):
        t.sub_(o, alpha=alpha)
    return self


def _foreach_sub(self: TensorList, other: Operand, *, alpha: Any = 1) -> tuple[Tensor, ...]:
    """``self[i] - alpha * other[i]``."""
    return tuple(arith.add(t, o, alpha=-alpha) for t, o in _pairs(self, other))


def _foreach_mul_(self: TensorList, other: Operand) -> TensorList:
    """``self[i] *= other[i]`` in place."""
    for t, o in _pairs(self, other):
        t.mul_(o)
    return self


def _foreach_mul(self: TensorList, other: Operand) -> tuple[Tensor, ...]:
    """``self[i] * other[i]``."""
    return tuple(arith.mul(t, o) for t, o in _pairs(self, other))


def _foreach_div_(self: TensorList, other: Operand) -> TensorList:
    """``self[i] /= other[i]`` in place."""
    for t, o in _pairs(self, other):
        t.div_(o)
    return self


def _foreach_div(self: TensorList, other: Operand) -> tuple[Tensor, ...]:
    """``self[i] / other[i]``."""
    return tuple(arith.div(t, o) for t, o in _pairs(self, other))


def _foreach_maximum_(self: TensorList, other: Operand) -> TensorList:
    """``self[i] = maximum(self[i], other[i])`` in place (NaN propagates)."""
    for t, o in _pairs(self, other):
        apply_inplace(t, partial(arith.maximum, b=o), _requiring_grad(o))
    return self


def _foreach_maximum(self: TensorList, other: Operand) -> tuple[Tensor, ...]:
    """``maximum(self[i], other[i])`` (NaN propagates)."""
    return tuple(arith.maximum(t, o) for t, o in _pairs(self, other))


# ---------------------------------------------------------------------------- ternary
def _foreach_addcmul_(
    self: TensorList, tensor1: TensorList, tensor2: TensorList, value: Operand = 1
) -> TensorList:
    """``self[i] += value[i] * tensor1[i] * tensor2[i]`` in place."""
    _check(self, tensor1, tensor2)
    for t, a, b, v in zip(self, tensor1, tensor2, _per_tensor(self, value)):
        apply_inplace(t, partial(_addc, arith.mul, t1=a, t2=b, value=v), _requiring_grad(a, b))
    return self


def _foreach_addcmul(
    self: TensorList, tensor1: TensorList, tensor2: TensorList, value: Operand = 1
) -> tuple[Tensor, ...]:
    """``self[i] + value[i] * tensor1[i] * tensor2[i]``."""
    _check(self, tensor1, tensor2)
    scalars = _per_tensor(self, value)
    return tuple(_addc(arith.mul, *args) for args in zip(self, tensor1, tensor2, scalars))


def _foreach_addcdiv_(
    self: TensorList, tensor1: TensorList, tensor2: TensorList, value: Operand = 1
) -> TensorList:
    """``self[i] += value[i] * tensor1[i] / tensor2[i]`` in place."""
    _check(self, tensor1, tensor2)
    for t, a, b, v in zip(self, tensor1, tensor2, _per_tensor(self, value)):
        apply_inplace(t, partial(_addc, arith.div, t1=a, t2=b, value=v), _requiring_grad(a, b))
    return self


def _foreach_addcdiv(
    self: TensorList, tensor1: TensorList, tensor2: TensorList, value: Operand = 1
) -> tuple[Tensor, ...]:
    """``self[i] + value[i] * tensor1[i] / tensor2[i]``."""
    _check(self, tensor1, tensor2)
    scalars = _per_tensor(self, value)
    return tuple(_addc(arith.div, *args) for args in zip(self, tensor1, tensor2, scalars))


def _foreach_lerp_(self: TensorList, tensors1: TensorList, weight: Operand) -> TensorList:
    """``self[i] += weight[i] * (tensors1[i] - self[i])`` in place, torch's lerp formula."""
    _check(self, tensors1)
    for t, end, w in zip(self, tensors1, _per_tensor(self, weight)):
        apply_inplace(t, partial(_lerp, end=end, weight=w), _requiring_grad(end, w))
    return self


def _foreach_lerp(self: TensorList, tensors1: TensorList, weight: Operand) -> tuple[Tensor, ...]:
    """``lerp(self[i], tensors1[i], weight[i])``."""
    _check(self, tensors1)
    return tuple(_lerp(*args) for args in zip(self, tensors1, _per_tensor(self, weight)))


# ---------------------------------------------------------------------------- unary
def _foreach_sqrt(self: TensorList) -> tuple[Tensor, ...]:
    """``sqrt(self[i])``."""
    _check(self)
    return tuple(unary.sqrt(t) for t in self)


def _foreach_sqrt_(self: TensorList) -> TensorList:
    """``self[i] = sqrt(self[i])`` in place."""
    _check(self)
    for t in self:
        apply_inplace(t, unary.sqrt, None)
    return self


def _foreach_neg(self: TensorList) -> tuple[Tensor, ...]:
    """``-self[i]``."""
    _check(self)
    return tuple(arith.neg(t) for t in self)


def _foreach_neg_(self: TensorList) -> TensorList:
    """``self[i] = -self[i]`` in place."""
    _check(self)
    for t in self:
        apply_inplace(t, arith.neg, None)
    return self


def _foreach_zero_(self: TensorList) -> TensorList:
    """Fill every tensor with zeros in place."""
    _check(self)
    for t in self:
        t.zero_()
    return self


def _foreach_norm(self: TensorList, ord: float = 2, dtype: Any = None) -> tuple[Tensor, ...]:
    """The ``ord``-norm of each tensor (flattened), optionally computed in ``dtype``."""
    _check(self)
    p = math.inf if ord == float("inf") else ord
    if dtype is not None:
        return tuple(t.to(dtype=dtype).norm(p) for t in self)
    return tuple(t.norm(p) for t in self)
