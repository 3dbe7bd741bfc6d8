"""``F.multi_head_attention_forward``: torch's reference path, step for step, from hookgrad ops.

The steps (input projection, head split, masks, attention, output projection) follow
``torch.nn.functional.multi_head_attention_forward`` so the numbers, the errors and the
attention weights returned with ``need_weights`` are torch's. Torch's fused fast path (taken
in eval mode without grad) computes the same numbers; hookgrad always takes this path.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..._ops import products as _products
from ..._ops import reduce as _reduce
from ..._ops import shape as _shape
from ..._ops._base import Tensor, wrap
from .attention import scaled_dot_product_attention
from .conv import pad
from .dropout import dropout
from .linear import linear

__all__ = ["canonical_mask", "multi_head_attention_forward"]


def canonical_mask(
    mask: Tensor | None,
    mask_name: str,
    other_type: Any,
    other_name: str,
    target_type: Any,
    check_other: bool = True,
) -> Tensor | None:
    """A bool mask as a float one (``-inf`` where True), a float mask as it is (torch's
    ``F._canonical_mask``), with torch's warning when the two masks' dtypes differ."""
    if mask is None:
        return None
    dtype = mask._data.dtype
    is_float = dtype.kind == "f"
    if dtype != np.bool_ and not is_float:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and dtype != other_type:
        warnings.warn(
            f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type "
            "for both instead.",
            UserWarning,
            stacklevel=3,
        )
    if is_float:
        return mask
    target = np.dtype(target_type)
    return wrap(np.where(mask._data, target.type(-np.inf), target.type(0)))


def _mha_shape_check(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    key_padding_mask: Tensor | None,
    attn_mask: Tensor | None,
    num_heads: int,
) -> bool:
    """True for batched (3-D) input, False for unbatched (2-D); torch's AssertionErrors else."""
    rank = query.ndim
    if rank not in (2, 3):
        raise AssertionError(
            f"query should be unbatched 2D or batched 3D tensor but received {rank}-D query tensor"
        )
    kind = "batched (3-D)" if rank == 3 else "unbatched (2-D)"
    if key.ndim != rank or value.ndim != rank:
        raise AssertionError(
            f"For {kind} `query`, expected `key` and `value` to be {rank}-D but found "
            f"{key.ndim}-D and {value.ndim}-D tensors respectively"
        )
    if key_padding_mask is not None and key_padding_mask.ndim != rank - 1:
        raise AssertionError(
            f"For {kind} `query`, expected `key_padding_mask` to be `None` or {rank - 1}-D but "
            f"found {key_padding_mask.ndim}-D tensor instead"
        )
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(
                f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                f"{attn_mask.ndim}-D tensor instead"
            )
        expected = (num_heads, query.shape[0], key.shape[0])
        if rank == 2 and attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
            raise AssertionError(
                f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}"
            )
    return rank == 3


def _in_projection(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    weights: tuple[Tensor, Tensor, Tensor] | Tensor,
    bias: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """``q, k, v`` projected by the packed ``(3E, E)`` weight or by three separate ones."""
    if isinstance(weights, Tensor):
        if query is key and key is value:
            q, k, v = linear(query, weights, bias).chunk(3, dim=-1)
            return q, k, v
        weights = weights.chunk(3)  # type: ignore[assignment]
    biases: tuple[Tensor | None, ...] = (None,) * 3 if bias is None else bias.chunk(3)
    wq, wk, wv = weights
    return linear(query, wq, biases[0]), linear(key, wk, biases[1]), linear(value, wv, biases[2])


def _attn_mask_3d(attn_mask: Tensor, tgt_len: int, src_len: int, heads: int) -> Tensor:
    """``attn_mask`` as ``(1 or batch*heads, tgt_len, src_len)``, checked as torch checks."""
    if attn_mask.ndim == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(
                f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                f"{(tgt_len, src_len)}."
            )
        return attn_mask.unsqueeze(0)
    if tuple(attn_mask.shape) != (heads, tgt_len, src_len):
        raise RuntimeError(
            f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
            f"{(heads, tgt_len, src_len)}."
        )
    return attn_mask


def _heads(x: Tensor, bsz_heads: int, head_dim: int) -> Tensor:
    """``(len, bsz, E)`` -> ``(bsz * heads, len, head_dim)``."""
    return x.reshape(x.shape[0], bsz_heads, head_dim).transpose(0, 1)


def _check_static(static: Tensor, name: str, bsz_heads: int, head_dim: int) -> Tensor:
    if static.shape[0] != bsz_heads:
        raise AssertionError(f"expecting {name}.size(0) of {bsz_heads}, but got {static.shape[0]}")
    if static.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.shape[2]}")
    return static


def _append_key(
    k: Tensor, v: Tensor, extra_k: Tensor, extra_v: Tensor, dim: int
) -> tuple[Tensor, Tensor]:
    """One more key (and value) position: ``bias_k``/``bias_v`` or ``add_zero_attn``'s zeros."""
    return _shape.cat([k, extra_k], dim), _shape.cat([v, extra_v], dim)


def _pad_mask(mask: Tensor | None) -> Tensor | None:
    return None if mask is None else pad(mask, (0, 1))


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention on ``(L, N, E)`` input (or unbatched ``(L, E)``), as torch's."""
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    dtype = query.dtype
    key_padding_mask = canonical_mask(
        key_padding_mask,
        "key_padding_mask",
        None if attn_mask is None else attn_mask.dtype,
        "attn_mask",
        dtype,
    )
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
            "module method `generate_square_subsequent_mask` to create this mask."
        )
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # scaled_dot_product_attention builds the causal mask itself
    else:
        attn_mask = canonical_mask(attn_mask, "attn_mask", None, "", dtype, check_other=False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(
            f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}"
        )
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    weights: tuple[Tensor, Tensor, Tensor] | Tensor
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(
                f"key's sequence and batch dims {key.shape[:2]} do not match value's "
                f"{value.shape[:2]}"
            )
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(
                    f"use_separate_proj_weight is True but {name}_proj_weight is None"
                )
        weights = (q_proj_weight, k_proj_weight, v_proj_weight)  # type: ignore[assignment]
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        weights = in_proj_weight
    q, k, v = _in_projection(query, key, value, weights, in_proj_bias)
    if attn_mask is not None:
        attn_mask = _attn_mask_3d(attn_mask, tgt_len, key.shape[0], bsz * num_heads)
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k, v = _append_key(k, v, bias_k.expand(1, bsz, embed_dim), bias_v.expand(1, bsz, -1), 0)
        attn_mask, key_padding_mask = _pad_mask(attn_mask), _pad_mask(key_padding_mask)
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")
    bsz_heads = bsz * num_heads
    q = _heads(q, bsz_heads, head_dim)
    k = (
        _heads(k, bsz_heads, head_dim)
        if static_k is None
        else _check_static(static_k, "static_k", bsz_heads, head_dim)
    )
    v = (
        _heads(v, bsz_heads, head_dim)
        if static_v is None
        else _check_static(static_v, "static_v", bsz_heads, head_dim)
    )
    if add_zero_attn:
        zeros = wrap(np.zeros((bsz_heads, 1, head_dim), dtype=k._data.dtype))
        k, v = _append_key(k, v, zeros, zeros, 1)
        attn_mask, key_padding_mask = _pad_mask(attn_mask), _pad_mask(key_padding_mask)
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != bsz:
            raise AssertionError(
                f"Expected key_padded_mask.shape[0] to be {bsz}, but got "
                f"{key_padding_mask.shape[0]}"
            )
        if key_padding_mask.shape[1] != src_len:
            raise AssertionError(
                f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
                f"{key_padding_mask.shape[1]}"
            )
        key_padding_mask = (
            key_padding_mask.reshape(bsz, 1, 1, src_len)
            .expand(-1, num_heads, -1, -1)
            .reshape(bsz_heads, 1, src_len)
        )
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask
    if not training:
        dropout_p = 0.0
    if need_weights:
        if is_causal and attn_mask is None:
            raise AssertionError("FIXME: is_causal not implemented for need_weights")
        q_scaled = q * math.sqrt(1.0 / float(head_dim))
        if attn_mask is not None:
            weights_ = _products.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
        else:
            weights_ = _products.bmm(q_scaled, k.transpose(-2, -1))
        weights_ = _reduce.softmax(weights_, -1)
        if dropout_p > 0.0:
            weights_ = dropout(weights_, p=dropout_p)
        out = _products.bmm(weights_, v)
        out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
        weights_ = weights_.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights_ = weights_.mean(dim=1)
        if not is_batched:
            return out.squeeze(1), weights_.squeeze(0)
        return out, weights_
    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.ndim == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    return (out if is_batched else out.squeeze(1)), None
