"""``F.layer_norm`` with one fused backward node (torch's ``NativeLayerNormBackward0``).

The input is folded to rows ``(M, K)`` over the normalized trailing dims. Forward keeps the
normalized rows ``xhat`` and ``rstd = 1 / sqrt(var + eps)``; backward is the closed form
``dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))`` with ``dxhat = g * w``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from ..._ops._graph import only, saved_output, saved_tensor

__all__ = ["NativeLayerNormBackward0", "as_normalized_shape", "layer_norm"]


def as_normalized_shape(shape: Any) -> tuple[int, ...]:
    """``4`` -> ``(4,)``; sequences become tuples of ints."""
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(s) for s in shape)


class NativeLayerNormBackward0(Node):
    """Edges ``(input, weight, bias)``; weight/bias edges are None without elementwise affine."""

    __slots__ = ("_in_shape", "_norm_shape", "rstd", "weight", "xhat")

    _in_shape: tuple[int, ...]
    _norm_shape: tuple[int, ...]
    rstd: np.ndarray
    weight: np.ndarray | None
    xhat: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ex, ew, eb = self._next
        xhat = self.xhat
        g2 = g.reshape(xhat.shape)
        gx = gw = gb = None
        if ew is not None:
            gw = np.einsum("mk,mk->k", g2, xhat).reshape(self._norm_shape)
        if eb is not None:
            gb = g2.sum(axis=0).reshape(self._norm_shape)
        if ex is not None:
            gxhat = g2 if self.weight is None else g2 * self.weight
            mean_g = gxhat.mean(axis=1, keepdims=True)
            mean_gx = np.einsum("mk,mk->m", gxhat, xhat)[:, None] / xhat.shape[1]
            gx = (self.rstd * (gxhat - mean_g - xhat * mean_gx)).reshape(self._in_shape)
        return (gx, gw, gb)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        ex, ew, eb = self._next
        xhat_d = self.xhat
        rows, k = xhat_d.shape
        x2 = saved_tensor(self, 0).reshape(rows, k)
        centered = x2 - x2.mean(dim=1, keepdim=True)
        rstd = _rstd(x2, self.rstd)
        xhat = centered * rstd
        g2 = g.reshape(rows, k)
        gx = gw = gb = None
        if ew is not None:
            gw = (g2 * xhat).sum(0).reshape(self._norm_shape)
        if eb is not None:
            gb = g2.sum(0).reshape(self._norm_shape)
        if ex is not None:
            gxhat = g2 if self.weight is None else g2 * saved_tensor(self, 1).reshape(k)
            mean_g = gxhat.mean(dim=1, keepdim=True)
            mean_gx = (gxhat * xhat).mean(dim=1, keepdim=True)
            gx = (rstd * (gxhat - mean_g - xhat * mean_gx)).reshape(self._in_shape)
        return (gx, gw, gb)


class RstdBackward(Node):
    """Of ``(var(x2, rows) + eps) ** -0.5`` (layer norm's recorded backward), kept from the
    forward: its derivative ``-rstd**3 * (x2 - mean) / K`` is made of recorded ops, itself
    included, so every order works."""

    __slots__ = ("_value", "_x2")

    _value: np.ndarray
    _x2: Tensor

    def name(self) -> str:
        return "NativeLayerNormBackwardBackward0"

    def backward(self, grad: Any) -> tuple[np.ndarray | None, ...]:
        return (self.backward_graph([wrap(grad)])[0]._data,)  # type: ignore[union-attr]

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        x2 = self._x2
        centered = x2 - x2.mean(dim=1, keepdim=True)
        rstd = saved_output(self, self._value)
        return (only(grads) * -(rstd**3) * centered / x2._data.shape[1],)


def _rstd(x2: Tensor, value: np.ndarray) -> Tensor:
    """Layer norm's ``rstd`` rows as a recorded function of the folded input ``x2``."""
    if not needs_grad(x2):
        return wrap(value)
    node = RstdBackward((edge(x2),))
    node._x2, node._value = x2, value
    return record(value, node)


def _check_shape(x: np.ndarray, shape: tuple[int, ...]) -> None:
    if len(shape) > x.ndim or x.shape[x.ndim - len(shape) :] != shape:
        expected = ", ".join(["*", *map(str, shape)])
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape [{expected}], "
            f"but got input of size{list(x.shape)}"
        )


def layer_norm(
    input: Tensor,
    normalized_shape: Any,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift."""
    x = input._data
    shape = as_normalized_shape(normalized_shape)
    _check_shape(x, shape)
    k = int(np.prod(shape))
    x2 = x.reshape(-1, k)
    centered = x2 - x2.mean(axis=1, keepdims=True)
    var = np.einsum("mk,mk->m", centered, centered)[:, None] / k
    rstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype, copy=False)
    xhat = centered * rstd
    w = None if weight is None else weight._data.reshape(k)
    out = xhat if w is None else xhat * w
    if bias is not None:
        out = out + bias._data.reshape(k)
    out = out.reshape(x.shape)
    params = [t for t in (weight, bias) if t is not None]
    if not needs_grad(input, *params):
        return wrap(out)
    node = NativeLayerNormBackward0(
        (
            edge(input),
            None if weight is None else edge(weight),
            None if bias is None else edge(bias),
        )
    )
    node._in_shape, node._norm_shape = x.shape, shape
    node.xhat, node.rstd, node.weight = xhat, rstd, w
    node._save(input, *params)
    return record(out, node)
