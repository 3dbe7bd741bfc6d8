"""Products beyond ``matmul``: mm, bmm, mv, dot, baddbmm, spmm and einsum (numpy's einsum
both ways)."""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from .._dtype import c_type_name, is_reduced_float
from ..amp._state import state as _autocast
from ..amp._state import to_lower, without_autocast
from ._base import Node, Tensor, edge, needs_grad, not_a_tensor, record, sum_to, wrap
from .arith import broadcast_error, matmul

__all__ = ["baddbmm", "bmm", "dot", "einsum", "mm", "mv", "spmm"]


def _check_bmm(a: Tensor, b: Tensor, op: str) -> None:
    for name, t in (("batch1", a), ("batch2", b)):
        if not isinstance(t, Tensor):
            raise not_a_tensor(op, name, t)
        if t._data.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    (n, _, k), expected = a._data.shape, b._data.shape[:2]
    if expected != (n, k):
        raise RuntimeError(
            "Expected size for first two dimensions of batch2 tensor to be: "
            f"[{n}, {k}] but got: [{expected[0]}, {expected[1]}]."
        )


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matrix product of two 3-D tensors (``BmmBackward0``)."""
    _check_bmm(a, b, "bmm")
    return matmul(a, b)


def mm(a: Tensor, b: Tensor) -> Tensor:
    """Product of two matrices of one dtype (``MmBackward0``), with torch's errors."""
    if not isinstance(b, Tensor):
        raise not_a_tensor("mm", "mat2", b, 2)
    for name, t in (("self", a), ("mat2", b)):
        if t._data.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix")
    da, db = a._data.dtype, b._data.dtype
    if da != db and _autocast.lower is None and a._data.shape[1] == b._data.shape[0]:
        raise RuntimeError(
            "expected m1 and m2 to have the same dtype, but got: "
            f"{c_type_name(da)} != {c_type_name(db)}"
        )
    return matmul(a, b)  # a shape mismatch is matmul's error, which is torch's mm's


def spmm(input: Tensor, mat2: Tensor) -> Tensor:
    """``torch.spmm`` of a dense ``input`` (pytorch/examples' GCN on a dense adjacency): ``mm``.
    hookgrad has no sparse layout, so the first operand is always dense."""
    return mm(input, mat2)


def mv(a: Tensor, v: Tensor) -> Tensor:
    """Matrix-vector product (``MvBackward0``)."""
    if not isinstance(v, Tensor):
        raise not_a_tensor("mv", "vec", v)
    sa, sv = a._data.shape, v._data.shape
    if len(sa) != 2 or len(sv) != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {len(sa)}, {len(sv)}")
    if sa[1] != sv[0]:
        raise RuntimeError(
            f"size mismatch, got input ({sa[0]}), mat ({sa[0]}x{sa[1]}), vec ({sv[0]})"
        )
    return without_autocast(matmul, a, v)  # not on torch's autocast lists: inputs' dtype


def dot(a: Tensor, b: Tensor) -> Tensor:
    """Inner product of two 1-D tensors; CPU autocast leaves it in its inputs' dtype."""
    return without_autocast(matmul, a, b)


def _einsum(spec: str, *arrays: np.ndarray, optimize: bool = False) -> np.ndarray:
    """numpy's einsum; float16/bfloat16 operands are multiplied and summed in float32 and the
    result rounded back once, as torch's (numpy has no bfloat16 einsum)."""
    dtype = np.result_type(*arrays)
    if not is_reduced_float(dtype):
        return np.asarray(np.einsum(spec, *arrays, optimize=optimize))
    wide = [a.astype(np.float32) for a in arrays]
    return np.asarray(np.einsum(spec, *wide, optimize=optimize)).astype(dtype)


class BaddbmmBackward0(Node):
    """``beta * input + alpha * (batch1 @ batch2)``."""

    __slots__ = ("_alpha", "_beta", "_shape", "a", "b")

    _alpha: float
    _beta: float
    _shape: tuple[int, ...]
    a: np.ndarray
    b: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        e_in, e_a, e_b = self._next
        g_in = g_a = g_b = None
        if e_in is not None:
            g_in = sum_to(g * self._beta if self._beta != 1 else g, self._shape)
        scaled = g * self._alpha if self._alpha != 1 else g
        if e_a is not None:
            g_a = scaled @ np.swapaxes(self.b, -1, -2)
        if e_b is not None:
            g_b = np.swapaxes(self.a, -1, -2) @ scaled
        return (g_in, g_a, g_b)


def baddbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1
) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)``; with ``beta=0`` input is ignored
    (its NaNs do not propagate), as in torch."""
    _check_bmm(batch1, batch2, "baddbmm")
    if _autocast.lower is not None:  # torch's CPU autocast: lower precision
        input, batch1, batch2 = to_lower(input, batch1, batch2)
    product = batch1._data @ batch2._data
    if product.dtype != batch1._data.dtype and batch1._data.dtype == batch2._data.dtype:
        product = product.astype(batch1._data.dtype)  # numpy multiplies bfloat16 into float32
    if alpha != 1:
        product = product * alpha
    base = input._data
    try:
        out = product + (base * beta if beta != 1 else base) if beta != 0 else product
    except ValueError:
        raise broadcast_error(base, product) from None
    out = np.broadcast_to(out, product.shape).astype(product.dtype, copy=True)
    if needs_grad(input, batch1, batch2):
        node = BaddbmmBackward0((edge(input), edge(batch1), edge(batch2)))
        node._alpha, node._beta, node._shape = alpha, beta, base.shape
        node.a, node.b = batch1._data, batch2._data
        node._save(batch1, batch2)
        return record(out, node)
    return wrap(out)


def _parse(equation: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """Each operand's subscripts and the output's, with ``...`` spelled out as letters and
    the implicit output (letters used once, sorted) made explicit."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(shapes):
        raise RuntimeError(
            "einsum(): more operands were provided than specified in the equation"
            if len(shapes) > len(inputs)
            else "einsum(): fewer operands were provided than specified in the equation"
        )
    spare = [c for c in string.ascii_letters if c not in equation]
    width = max(
        (len(s) - (len(sub) - 3) for s, sub in zip(shapes, inputs) if "..." in sub), default=0
    )
    ellipsis = "".join(spare[:width])
    subs = []
    for sub, shape in zip(inputs, shapes):
        if "..." in sub:
            n = len(shape) - (len(sub) - 3)
            sub = sub.replace("...", ellipsis[width - n :] if n else "")
        subs.append(sub)
    if arrow:
        out = rhs.replace("...", ellipsis)
    else:
        letters = "".join(subs)
        out = ellipsis + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ellipsis)
        )
    return subs, out


class EinsumBackward(Node):
    """einsum's gradient for each operand: the einsum of the output gradient with the other
    operands, broadcast over letters only that operand sums, written back onto its
    diagonals when a letter repeats in it, and summed where it broadcast a size-1 dim."""

    __slots__ = ("_out", "_subs", "arrays")

    _out: str
    _subs: list[str]
    arrays: list[np.ndarray]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        sizes: dict[str, int] = {}
        for sub, a in zip(self._subs, self.arrays):
            for c, n in zip(sub, a.shape):
                sizes[c] = max(sizes.get(c, 1), n)
        return tuple(
            self._operand_grad(i, g, sizes) if e is not None else None
            for i, e in enumerate(self._next)
        )

    def _operand_grad(self, i: int, g: np.ndarray, sizes: dict[str, int]) -> np.ndarray:
        sub, arrays = self._subs[i], self.arrays
        others = [(s, a) for j, (s, a) in enumerate(zip(self._subs, arrays)) if j != i]
        known = set(self._out).union(*(s for s, _ in others))
        unique = "".join(dict.fromkeys(sub))
        reached = "".join(c for c in unique if c in known)
        operands = [g] + [a for _, a in others]
        spec = ",".join([self._out] + [s for s, _ in others]) + "->" + reached
        part = _einsum(spec, *operands)
        full_shape = tuple(sizes[c] for c in unique)
        part = np.expand_dims(part, [k for k, c in enumerate(unique) if c not in known])
        part = np.broadcast_to(part, full_shape)
        shape = arrays[i].shape
        full = tuple(sizes[c] for c in sub)
        if unique != sub:  # a repeated letter: write onto the diagonal of a zero tensor
            grad = np.zeros(full, dtype=g.dtype)
            view = np.einsum(f"{sub}->{unique}", grad)
            view[...] = part
        else:
            grad = part
        return sum_to(np.asarray(grad, dtype=arrays[i].dtype), shape)


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation over ``operands`` (Tensors, or one list of them)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for t in operands:
        if not isinstance(t, Tensor):
            raise not_a_tensor("einsum", "operands", t)
    if _autocast.lower is not None:  # torch's CPU autocast: lower precision (its bmm)
        operands = to_lower(*operands)
    arrays = [t._data for t in operands]
    subs, out_sub = _parse(equation, [a.shape for a in arrays])
    spec = ",".join(subs) + "->" + out_sub
    try:
        out = _einsum(spec, *arrays, optimize=len(arrays) > 2)
    except ValueError as error:
        raise RuntimeError(f"einsum(): {error}") from None
    if needs_grad(*operands):
        node = EinsumBackward(tuple(edge(t) for t in operands))
        node._subs, node._out, node.arrays = subs, out_sub, arrays
        node._save(*operands)
        return record(out, node)
    return wrap(out)
