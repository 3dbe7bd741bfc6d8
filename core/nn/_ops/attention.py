"""``F.scaled_dot_product_attention`` as one fused graph node, as torch's CPU kernel records.

Forward: ``softmax(q @ k.T * scale + bias) @ v`` with the mask folded into ``bias``; backward:
the softmax Jacobian applied once (``p * (dp - sum(dp * p))``), so no ``(L, S)`` intermediate
beyond the attention weights themselves is kept. A row whose keys are all masked out gives
zeros (torch's CPU flash kernel does the same), not the NaN a plain softmax would give.
"""

from __future__ import annotations

import math

import numpy as np

from ..._dtype import c_type_name
from ..._ops._base import Node, Tensor, edge, needs_grad, record, sum_to, wrap
from ..._ops.arith import broadcast_error
from ...amp._state import state as _autocast
from ...amp._state import to_lower
from .dropout import _scaled_mask

__all__ = ["ScaledDotProductFlashAttentionForCpuBackward0", "scaled_dot_product_attention"]


def _swap(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


class ScaledDotProductFlashAttentionForCpuBackward0(Node):
    """Gradients of ``(query, key, value)`` and, when it requires grad, of a float mask."""

    __slots__ = ("_groups", "_scale", "_shapes", "attn", "drop", "key", "query", "value")

    _groups: int
    _scale: float
    _shapes: tuple[tuple[int, ...], ...]
    attn: np.ndarray
    drop: np.ndarray | None
    key: np.ndarray
    query: np.ndarray
    value: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        p, drop, q, k, v = self.attn, self.drop, self.query, self.key, self.value
        kept = p if drop is None else p * drop
        gv = _swap(kept) @ g
        dp = g @ _swap(v)
        if drop is not None:
            dp *= drop
        ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=True))
        gq = (ds @ k) * self._scale
        gk = (_swap(ds) @ q) * self._scale
        grads = [
            sum_to(gq, self._shapes[0]),
            sum_to(_ungroup(gk, self._groups), self._shapes[1]),
            sum_to(_ungroup(gv, self._groups), self._shapes[2]),
        ]
        if len(self._next) == 4:
            grads.append(sum_to(ds, self._shapes[3]))
        return tuple(g if e is not None else None for g, e in zip(grads, self._next, strict=True))


def _group(a: np.ndarray, groups: int) -> np.ndarray:
    """Repeat each key/value head ``groups`` times along dim -3 (grouped-query attention)."""
    return a if groups == 1 else np.repeat(a, groups, axis=-3)


def _ungroup(g: np.ndarray, groups: int) -> np.ndarray:
    """Sum the gradient of each repeated head back onto its one key/value head."""
    if groups == 1:
        return g
    shape = g.shape
    return g.reshape(*shape[:-3], shape[-3] // groups, groups, *shape[-2:]).sum(axis=-3)


def _check_inputs(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: Tensor | None) -> None:
    """torch's errors for mixed dtypes, a mask of another dtype and mismatched sizes."""
    if not q.dtype == k.dtype == v.dtype:
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{c_type_name(q.dtype)} key.dtype: {c_type_name(k.dtype)} and value.dtype: "
            f"{c_type_name(v.dtype)} instead."
        )
    if mask is not None:
        m = mask._data.dtype
        if m != np.bool_ and m.kind != "f":
            raise RuntimeError(
                "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                f"attn_mask.dtype: {c_type_name(m)} and  query.dtype: {c_type_name(q.dtype)} "
                "instead."
            )
    if k.shape[-2] != v.shape[-2] or q.shape[-1] != k.shape[-1]:
        raise RuntimeError(
            f"scaled_dot_product_attention: query {list(q.shape)}, key {list(k.shape)} and "
            f"value {list(v.shape)} do not fit: expected query.size(-1) == key.size(-1) and "
            "key.size(-2) == value.size(-2)"
        )


def _check_batch(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """torch's broadcasting error when the batch (and head) dims do not broadcast."""
    try:
        np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        a = np.broadcast_to(np.empty((), np.bool_), q.shape[:-2])
        b = np.broadcast_to(np.empty((), np.bool_), k.shape[:-2])
        raise broadcast_error(a, b) from None


def _gqa_groups(q: np.ndarray, k: np.ndarray, v: np.ndarray, enable_gqa: bool) -> int:
    """How many query heads share one key/value head (1 unless ``enable_gqa``)."""
    if not enable_gqa or q.ndim < 3 or k.shape[-3] == q.shape[-3]:
        return 1
    if q.shape[-3] % k.shape[-3] or q.shape[-3] % v.shape[-3] or k.shape[-3] != v.shape[-3]:
        # torch's message, cut short exactly where torch's is
        raise RuntimeError("Number of heads in key and value must divide the number of heads in ")
    return q.shape[-3] // k.shape[-3]


def _fused_kernel_takes(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, groups: int, mask_grad: bool, dropout_p: float
) -> bool:
    """Whether torch's CPU flash kernel (rather than its math fallback) runs this call: 4-D
    inputs of one batch size, equal head counts (after grouping) and feature sizes, no
    dropout, no mask gradient. Only the fallback refuses a mask together with ``is_causal``."""
    return (
        q.ndim == k.ndim == v.ndim == 4
        and q.shape[0] == k.shape[0] == v.shape[0]
        and q.shape[1] == k.shape[1] * groups == v.shape[1] * groups
        and q.shape[-1] == v.shape[-1]
        and not mask_grad
        and dropout_p == 0
    )


def _attention_bias(
    mask: Tensor | None, is_causal: bool, size: tuple[int, int], dtype: np.dtype
) -> np.ndarray | None:
    """The additive bias: 0 where attended, ``-inf`` where masked; a float mask as given.

    With ``is_causal`` keys after each query are masked too, on top of an explicit mask (torch's
    CPU kernel, the only case where both may be given, applies both).
    """
    bias = None
    if mask is not None:
        m = mask._data
        if m.dtype == np.bool_:
            bias = np.where(m, dtype.type(0), dtype.type(-np.inf))
        else:
            bias = m.astype(dtype, copy=False)
    if is_causal:
        future = np.where(np.tril(np.ones(size, dtype=np.bool_)), dtype.type(0), -np.inf)
        bias = future.astype(dtype) if bias is None else bias + future.astype(dtype)
    return bias


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; a row that is ``-inf`` throughout becomes zeros."""
    top = np.max(scores, axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0, top)
    e = np.exp(scores - top)
    total = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(total == 0, 1, total)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(query @ key.T * scale + mask) @ value``; a bool mask marks the keys to attend.

    Dropout (``dropout_p``) zeros attention weights with masks drawn from
    ``hookgrad.default_generator``; ``is_causal`` masks keys after each query position.
    """
    if _autocast.lower is not None:  # torch's CPU autocast: lower precision
        query, key, value, attn_mask = to_lower(query, key, value, attn_mask)
    q, k, v = query._data, key._data, value._data
    _check_inputs(q, k, v, attn_mask)
    groups = _gqa_groups(q, k, v, enable_gqa)
    float_mask = attn_mask is not None and attn_mask._data.dtype != np.bool_
    grad_mask = float_mask and needs_grad(attn_mask)  # type: ignore[arg-type]
    if (
        is_causal
        and attn_mask is not None
        and not _fused_kernel_takes(q, k, v, groups, grad_mask, dropout_p)
    ):
        raise RuntimeError(
            "_scaled_dot_product_attention: Explicit attn_mask should not be set when "
            "is_causal=True"
        )
    kg, vg = _group(k, groups), _group(v, groups)
    _check_batch(q, kg, vg)
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ _swap(kg)) * q.dtype.type(factor)
    bias = _attention_bias(attn_mask, is_causal, (q.shape[-2], k.shape[-2]), q.dtype)
    if bias is not None:
        scores = scores + bias
    attn = _softmax_rows(scores).astype(q.dtype, copy=False)
    drop = _scaled_mask(attn, dropout_p) if dropout_p > 0 else None
    out = ((attn if drop is None else attn * drop) @ vg).astype(q.dtype, copy=False)
    if not (needs_grad(query, key, value) or grad_mask):
        return wrap(out)
    edges = [edge(query), edge(key), edge(value)]
    shapes = [q.shape, k.shape, v.shape]
    if grad_mask:
        edges.append(edge(attn_mask))  # type: ignore[arg-type]
        shapes.append(attn_mask._data.shape)  # type: ignore[union-attr]
    node = ScaledDotProductFlashAttentionForCpuBackward0(tuple(edges))
    node._groups, node._scale, node._shapes = groups, factor, tuple(shapes)
    node.attn, node.drop, node.query, node.key, node.value = attn, drop, q, kg, vg
    node._save(query, key, value)
    return record(out, node)
