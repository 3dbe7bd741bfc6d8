"""``F.layer_norm``, ``F.batch_norm`` and ``F.group_norm``, each one fused backward node.

The input is folded to rows ``(M, K)`` over the normalized trailing dims. Forward keeps the
normalized rows ``xhat`` and ``rstd = 1 / sqrt(var + eps)``; backward is the closed form
``dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))`` with ``dxhat = g * w``.
Batch and group norm use the same closed form over other axes: per channel over the batch and
spatial dims, per (sample, group) over the group's channels and spatial dims.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from ..._ops._graph import only, saved_output, saved_tensor
from ..._size import Size

__all__ = [
    "NativeBatchNormBackward0",
    "NativeGroupNormBackward0",
    "NativeLayerNormBackward0",
    "as_normalized_shape",
    "batch_norm",
    "group_norm",
    "instance_norm",
    "layer_norm",
]


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


# -- batch_norm and group_norm: standardize over axes, one closed-form backward -----------------


def _standardize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> tuple[np.ndarray, ...]:
    """``(xhat, mean, biased var, rstd)`` of ``x`` over ``axes`` (statistics keep their dims)."""
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=axes, keepdims=True)
    rstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype, copy=False)
    return centered * rstd, mean, var, rstd


def _standardize_backward(
    gxhat: np.ndarray, xhat: np.ndarray, rstd: np.ndarray, axes: tuple[int, ...]
) -> np.ndarray:
    """The input gradient through ``xhat = (x - mean) * rstd`` with batch statistics."""
    mean_g = gxhat.mean(axis=axes, keepdims=True)
    mean_gx = (gxhat * xhat).mean(axis=axes, keepdims=True)
    return rstd * (gxhat - mean_g - xhat * mean_gx)


def _check_elements(name: str, t: Tensor | None, channels: int) -> None:
    if t is not None and t._data.size != channels:
        raise RuntimeError(f"{name} should contain {channels} elements not {t._data.size}")


class NativeBatchNormBackward0(Node):
    """Edges ``(input, weight, bias)``; with batch statistics (``training``) the mean and
    variance depend on the input, with running statistics they are constants."""

    __slots__ = ("_axes", "_training", "rstd", "weight", "xhat")

    _axes: tuple[int, ...]
    _training: bool
    rstd: np.ndarray
    weight: np.ndarray | None
    xhat: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ex, ew, eb = self._next
        axes, xhat = self._axes, self.xhat
        gx = gw = gb = None
        if ew is not None:
            gw = (g * xhat).sum(axis=axes)
        if eb is not None:
            gb = g.sum(axis=axes)
        if ex is not None:
            gxhat = g if self.weight is None else g * self.weight
            if self._training:
                gx = _standardize_backward(gxhat, xhat, self.rstd, axes)
            else:
                gx = gxhat * self.rstd
        return (gx, gw, gb)


def _verify_batch_size(sizes: tuple[int, ...], shown: object) -> None:
    """torch's refusal to compute statistics from one value (``sizes[0] * sizes[2:]``)."""
    if sizes[0] * int(np.prod(sizes[2:])) == 1:
        raise ValueError(
            f"Expected more than 1 value per channel when training, got input size {shown}"
        )


def _update_running_(running: Tensor | None, batch: np.ndarray, momentum: float) -> None:
    """``running = (1 - momentum) * running + momentum * batch``, in place and unrecorded;
    like torch's kernel, the write does not count as a version of the buffer."""
    if running is not None:
        data = running._data
        data *= 1 - momentum
        data += (momentum * batch).astype(data.dtype, copy=False)


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each channel (dim 1) with the batch's statistics when ``training`` (and fold
    them into the running ones), else with ``running_mean``/``running_var``."""
    x = input._data
    if training:
        _verify_batch_size(x.shape, Size(x.shape))
    channels = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        _check_elements(name, t, channels)
    _check_elements("weight", weight, channels)
    _check_elements("bias", bias, channels)
    axes = (0, *range(2, x.ndim))
    stats_shape = (1, channels) + (1,) * (x.ndim - 2)
    if training:
        xhat, mean, var, rstd = _standardize(x, axes, eps)
        n = x.size // channels
        _update_running_(running_mean, mean.reshape(channels), momentum)
        _update_running_(running_var, var.reshape(channels) * (n / max(n - 1, 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            missing = "running_mean" if running_mean is None else "running_var"
            raise RuntimeError(f"{missing} must be defined in evaluation mode")
        rstd = (1.0 / np.sqrt(running_var._data.reshape(stats_shape) + eps)).astype(x.dtype)
        xhat = (x - running_mean._data.reshape(stats_shape)) * rstd
    out, w = _scale_shift(xhat, weight, bias, stats_shape)
    params = [t for t in (weight, bias) if t is not None]
    if not needs_grad(input, *params):
        return wrap(out)
    node = NativeBatchNormBackward0(_edges(input, weight, bias))
    node.xhat, node.rstd, node.weight = xhat, rstd, w
    node._axes, node._training = axes, training
    node._save(input, *params)
    return record(out, node)


def _edges(input: Tensor, weight: Tensor | None, bias: Tensor | None) -> tuple[Any, ...]:
    """The ``(input, weight, bias)`` edges of a normalization node."""
    return (
        edge(input),
        None if weight is None else edge(weight),
        None if bias is None else edge(bias),
    )


def _scale_shift(
    xhat: np.ndarray, weight: Tensor | None, bias: Tensor | None, shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(xhat * weight + bias, weight as broadcast)`` with the per-channel parameters viewed
    as ``shape``."""
    w = None if weight is None else weight._data.reshape(shape)
    out = xhat if w is None else xhat * w
    if bias is not None:
        out = out + bias._data.reshape(shape)
    return out, w


class NativeGroupNormBackward0(Node):
    """Edges ``(input, weight, bias)``: statistics per (sample, group), affine per channel."""

    __slots__ = ("_groups", "rstd", "weight", "xhat")

    _groups: int
    rstd: np.ndarray
    weight: np.ndarray | None
    xhat: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ex, ew, eb = self._next
        xhat = self.xhat
        axes = (0, *range(2, g.ndim))
        gx = gw = gb = None
        if ew is not None:
            gw = (g * xhat).sum(axis=axes)
        if eb is not None:
            gb = g.sum(axis=axes)
        if ex is not None:
            gxhat = g if self.weight is None else g * self.weight
            grouped = (g.shape[0], self._groups, -1)
            gx = _standardize_backward(
                gxhat.reshape(grouped), xhat.reshape(grouped), self.rstd, (2,)
            ).reshape(g.shape)
        return (gx, gw, gb)


def _check_group_norm(x: np.ndarray, num_groups: int, weight: Tensor | None) -> None:
    if x.shape[1] % num_groups:
        raise RuntimeError(
            "Expected number of channels in input to be divisible by num_groups, but got input "
            f"of shape {list(x.shape)} and num_groups={num_groups}"
        )
    if weight is not None and weight._data.size != x.shape[1]:
        raise RuntimeError(
            "Expected weight to be a vector of size equal to the number of channels in input, "
            f"but got weight of shape {list(weight.shape)} and input of shape {list(x.shape)}"
        )


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each sample's channels in ``num_groups`` groups, then scale and shift per
    channel."""
    x = input._data
    if x.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {x.ndim}")
    values = [x.shape[0] * x.shape[1] // num_groups, num_groups, *x.shape[2:]]
    _verify_batch_size(tuple(values), values)
    _check_group_norm(x, num_groups, weight)
    xhat, _, _, rstd = _standardize(x.reshape(x.shape[0], num_groups, -1), (2,), eps)
    xhat = xhat.reshape(x.shape)
    out, w = _scale_shift(xhat, weight, bias, (1, x.shape[1]) + (1,) * (x.ndim - 2))
    params = [t for t in (weight, bias) if t is not None]
    if not needs_grad(input, *params):
        return wrap(out)
    node = NativeGroupNormBackward0(_edges(input, weight, bias))
    node.xhat, node.rstd, node.weight, node._groups = xhat, rstd, w, num_groups
    node._save(input, *params)
    return record(out, node)


def _verify_spatial_size(shape: tuple[int, ...]) -> None:
    """torch's refusal to compute instance statistics from one value per instance."""
    if int(np.prod(shape[2:])) == 1:
        raise ValueError(
            f"Expected more than 1 spatial element when training, got input size {Size(shape)!r}"
        )


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each (sample, channel) over its spatial dims (``use_input_stats``), folding
    the instances' average statistics into the running ones; else normalize with those.

    With input statistics this is group norm with one group per channel (recorded as its
    node); with running statistics it is batch norm in eval mode.
    """
    x = input._data
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    _verify_spatial_size(x.shape)
    if running_mean is not None or running_var is not None:
        _, mean, var, _ = _standardize(x, tuple(range(2, x.ndim)), eps)
        spatial = x.size // (x.shape[0] * x.shape[1])
        _update_running_(running_mean, mean.reshape(x.shape[:2]).mean(axis=0), momentum)
        unbiased = var.reshape(x.shape[:2]) * (spatial / max(spatial - 1, 1))
        _update_running_(running_var, unbiased.mean(axis=0), momentum)
    return group_norm(input, x.shape[1], weight, bias, eps)
