"""``F.layer_norm``, ``F.batch_norm`` and ``F.group_norm``, each one fused backward node.

The input is folded to rows ``(M, K)`` over the normalized trailing dims. Forward keeps the
normalized rows ``xhat`` and ``rstd = 1 / sqrt(var + eps)``; backward is the closed form
``dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))`` with ``dxhat = g * w``.
Batch and group norm use the same closed form over other axes: per channel over the batch and
spatial dims, per (sample, group) over the group's channels and spatial dims.

float16 and bfloat16 inputs are normalized as torch's CPU kernels do: in float32, rounded to
the input's dtype once at the end. Their parameters are either of the input's dtype or all
float32 (torch's "mixed dtype"); the saved statistics and the parameter gradients take the
parameters' dtype (:func:`param_dtype`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._dtype import float32, is_reduced_float, opmath, scalar_type_name
from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from ..._ops._graph import only, saved_output, saved_tensor
from ..._size import Size
from ..._threads import get_num_threads

__all__ = [
    "NativeBatchNormBackward0",
    "NativeGroupNormBackward0",
    "NativeLayerNormBackward0",
    "as_normalized_shape",
    "batch_norm",
    "group_norm",
    "instance_norm",
    "layer_norm",
    "param_dtype",
]


def as_normalized_shape(shape: Any) -> tuple[int, ...]:
    """``4`` -> ``(4,)``; sequences become tuples of ints."""
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(s) for s in shape)


class NativeLayerNormBackward0(Node):
    """Edges ``(input, weight, bias)``; weight/bias edges are None without elementwise affine."""

    __slots__ = ("_in_shape", "_norm_shape", "_reduced", "mean", "rstd", "weight", "x", "xhat")

    _in_shape: tuple[int, ...]
    _norm_shape: tuple[int, ...]
    _reduced: tuple[np.dtype[Any], np.dtype[Any]] | None  # (input, parameter) dtypes
    mean: np.ndarray | None  # float16/bfloat16 input only: its rows and their mean
    x: np.ndarray | None
    rstd: np.ndarray
    weight: np.ndarray | None
    xhat: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        if self._reduced is not None:
            return self._backward_reduced(g)
        return self._backward(g)

    def _backward_reduced(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        """float16/bfloat16 as torch's kernel: in float32, the input gradient rounded once,
        the parameter gradients summed over rows per thread in the input's dtype."""
        ex, ew, eb = self._next
        xdtype, pdtype = self._reduced  # type: ignore[misc]
        g2 = g.reshape(self.xhat.shape).astype(float32)
        gw = gb = None
        if ew is not None:
            gw = _per_thread_row_sums(g2 * self.xhat, xdtype).astype(pdtype)
            gw = gw.reshape(self._norm_shape)
        if eb is not None:
            gb = _per_thread_row_sums(g2, xdtype).astype(pdtype).reshape(self._norm_shape)
        gx = None
        if ex is not None:
            gx = _layer_norm_input_grad(g2, self, k=self.xhat.shape[1])
            gx = gx.astype(xdtype).reshape(self._in_shape)
        return (gx, gw, gb)

    def _backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
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


def param_dtype(x: np.ndarray, *params: Tensor | None) -> np.dtype[Any]:
    """The dtype of a normalization's parameters (and saved statistics) for input ``x``, by
    torch's CPU rule: the input's, or float32 for all of them under a float16/bfloat16 input
    (torch's "mixed dtype"); anything else is refused with torch's messages."""
    dtypes = [p._data.dtype for p in params if p is not None]
    if not dtypes or dtypes[0] == x.dtype:
        for dtype in dtypes:
            if dtype != x.dtype:
                raise RuntimeError(
                    f"expected scalar type {scalar_type_name(x.dtype)} but found "
                    f"{scalar_type_name(dtype)}"
                )
        return x.dtype
    if any(dtype != float32 for dtype in dtypes):
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    if not is_reduced_float(x.dtype):
        raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
    return float32


def _layer_norm_input_grad(g2: np.ndarray, node: NativeLayerNormBackward0, k: int) -> np.ndarray:
    """torch's float32 formula of a float16/bfloat16 layer norm's input gradient:
    ``rstd * dy * w + b * x + c`` with ``b``, ``c`` from the row sums of ``dy * w`` and of
    ``dy * w * x``, and the saved (rounded) ``mean`` and ``rstd``."""
    assert node.x is not None and node.mean is not None
    x = node.x.astype(float32)
    gw = g2 if node.weight is None else g2 * node.weight.astype(float32)
    ds = (gw * x).sum(axis=1, dtype=np.float64, keepdims=True).astype(float32)
    db = gw.sum(axis=1, dtype=np.float64, keepdims=True).astype(float32)
    a, mean, scale = node.rstd.astype(float32), node.mean.astype(float32), np.float32(1 / k)
    b = (db * mean - ds) * a * a * a * scale
    c = -b * mean - db * a * scale
    return a * gw + b * x + c


def _per_thread_row_sums(terms: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """Column sums of float32 ``terms`` as torch's reduced-precision layer norm backward
    forms them: the rows split in ``get_num_threads()`` contiguous chunks (its
    ``parallel_for``), each chunk accumulated row by row into a buffer of ``dtype`` (rounded
    at every row), the buffers then summed in float32."""
    rows = terms.shape[0]
    threads = min(get_num_threads(), rows) if rows > 1 else 1
    chunk = -(-rows // threads)
    padded = np.zeros((threads * chunk, terms.shape[1]), float32)
    padded[:rows] = terms  # adding zero leaves a buffer as it is
    per_thread = padded.reshape(threads, chunk, -1)
    buffer = np.zeros((threads, terms.shape[1]), dtype)
    for r in range(chunk):
        buffer = (buffer.astype(float32) + per_thread[:, r]).astype(dtype)
    total = np.zeros(terms.shape[1], float32)
    for partial in buffer.astype(float32):
        total = total + partial
    return total


def _row_moments(x2: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``(mean, rstd)`` columns of the rows of ``x2``, as torch's reduced-precision
    kernels compute them (moments accumulated in float64 here, float32 Welford in torch:
    both round to the same float32 but for rare last-bit differences)."""
    x32 = x2.astype(float32)
    mean = x32.mean(axis=1, dtype=np.float64, keepdims=True)
    var = np.square(x32 - mean).mean(axis=1, keepdims=True).astype(float32)
    return mean.astype(float32), np.float32(1) / np.sqrt(var + np.float32(eps))


def _layer_norm_reduced(
    x2: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float, pdtype: np.dtype[Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(out, xhat, mean, rstd)`` of float16/bfloat16 rows: ``(x * rstd - rstd * mean) * w +
    b`` in float32, rounded once, as torch's kernel; ``mean`` and ``rstd`` are kept in the
    parameters' dtype, and ``xhat`` (float32) is rebuilt from them, as torch's backward does."""
    mean, rstd = _row_moments(x2, eps)
    y = _fma(x2, rstd, -rstd * mean)
    if w is not None or b is not None:
        y = _fma(y, 1 if w is None else w, 0 if b is None else b)
    mean_p, rstd_p = mean.astype(pdtype), rstd.astype(pdtype)
    a = rstd_p.astype(float32)
    return y.astype(x2.dtype), _fma(x2, a, -a * mean_p.astype(float32)), mean_p, rstd_p


def _fma(a: np.ndarray, b: Any, c: Any) -> np.ndarray:
    """float32 ``a * b + c`` rounded once, as the fused multiply-adds of torch's kernels (the
    float64 product of two float32 values is exact)."""
    return (a.astype(np.float64) * b + c).astype(float32)


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
    pdtype = param_dtype(x, weight, bias)
    k = int(np.prod(shape))
    x2 = x.reshape(-1, k)
    w = None if weight is None else weight._data.reshape(k)
    bv = None if bias is None else bias._data.reshape(k)
    reduced = is_reduced_float(x.dtype)
    mean = None
    if reduced:
        out, xhat, mean, rstd = _layer_norm_reduced(x2, w, bv, eps, pdtype)
    else:
        centered = x2 - x2.mean(axis=1, keepdims=True)
        var = np.einsum("mk,mk->m", centered, centered)[:, None] / k
        rstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype, copy=False)
        xhat = centered * rstd
        out = xhat if w is None else xhat * w
        if bv is not None:
            out = out + bv
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
    node._reduced = (x.dtype, pdtype) if reduced else None
    node.xhat, node.rstd, node.weight = xhat, rstd, w
    node.x, node.mean = (x2, mean) if reduced else (None, None)
    node._save(input, *params)
    return record(out, node)


# -- batch_norm and group_norm: standardize over axes, one closed-form backward -----------------


def _rounded(a: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """float32 ``a`` rounded to ``dtype`` and widened back."""
    return a.astype(dtype).astype(a.dtype)


def _standardize(
    x: np.ndarray, axes: tuple[int, ...], eps: float, stats: np.dtype[Any] | None = None
) -> tuple[np.ndarray, ...]:
    """``(xhat, mean, biased var, rstd)`` of ``x`` over ``axes`` (statistics keep their dims).
    With ``stats`` (float16/bfloat16 parameters), ``xhat`` uses the mean and rstd rounded to
    that dtype, as torch keeps and applies them."""
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=axes, keepdims=True)
    rstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype, copy=False)
    if stats is not None and is_reduced_float(stats):
        rstd, centered = _rounded(rstd, stats), x - _rounded(mean, stats)
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


class _RoundsBack(Node):
    """A normalization node whose float16/bfloat16 input was normalized in float32
    (``_reduced`` is then its input's and its parameters' dtypes): the gradients are
    computed in float32 too and rounded to those dtypes once."""

    __slots__ = ("_reduced",)

    _reduced: tuple[np.dtype[Any], np.dtype[Any]] | None

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        if self._reduced is None:
            return self._backward(g)
        xdtype, pdtype = self._reduced
        gx, gw, gb = self._backward(opmath(g))
        return tuple(
            None if a is None else a.astype(dtype)
            for a, dtype in ((gx, xdtype), (gw, pdtype), (gb, pdtype))
        )

    def _backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        raise NotImplementedError


class NativeBatchNormBackward0(_RoundsBack):
    """Edges ``(input, weight, bias)``; with batch statistics (``training``) the mean and
    variance depend on the input, with running statistics they are constants."""

    __slots__ = ("_axes", "_training", "rstd", "weight", "xhat")

    _axes: tuple[int, ...]
    _training: bool
    rstd: np.ndarray
    weight: np.ndarray | None
    xhat: np.ndarray

    def _backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
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
        if is_reduced_float(data.dtype):  # in float32, rounded once, as torch's
            data[...] = opmath(data) * (1 - momentum) + momentum * batch
            return
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
    pdtype = param_dtype(x, weight, bias, running_mean, running_var)
    x = opmath(x)  # float16/bfloat16: normalized in float32, rounded back once
    channels = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        _check_elements(name, t, channels)
    _check_elements("weight", weight, channels)
    _check_elements("bias", bias, channels)
    axes = (0, *range(2, x.ndim))
    stats_shape = (1, channels) + (1,) * (x.ndim - 2)
    if training:
        xhat, mean, var, rstd = _standardize(x, axes, eps, pdtype)
        n = x.size // channels
        _update_running_(running_mean, mean.reshape(channels), momentum)
        _update_running_(running_var, var.reshape(channels) * (n / max(n - 1, 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            missing = "running_mean" if running_mean is None else "running_var"
            raise RuntimeError(f"{missing} must be defined in evaluation mode")
        var = opmath(running_var._data).reshape(stats_shape)
        rstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype)
        xhat = (x - opmath(running_mean._data).reshape(stats_shape)) * rstd
    out, w = _scale_shift(xhat, weight, bias, stats_shape)
    out = out.astype(input._data.dtype, copy=False)
    params = [t for t in (weight, bias) if t is not None]
    if not needs_grad(input, *params):
        return wrap(out)
    node = NativeBatchNormBackward0(_edges(input, weight, bias))
    node._reduced = (input._data.dtype, pdtype) if x is not input._data else None
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


class NativeGroupNormBackward0(_RoundsBack):
    """Edges ``(input, weight, bias)``: statistics per (sample, group), affine per channel."""

    __slots__ = ("_groups", "rstd", "weight", "xhat")

    _groups: int
    rstd: np.ndarray
    weight: np.ndarray | None
    xhat: np.ndarray

    def _backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
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
    pdtype = param_dtype(x, weight, bias)
    x = opmath(x)  # float16/bfloat16: normalized in float32, rounded back once
    grouped = x.reshape(x.shape[0], num_groups, -1)
    xhat, _, _, rstd = _standardize(grouped, (2,), eps)
    out, w = _scale_shift(
        xhat.reshape(x.shape), weight, bias, (1, x.shape[1]) + (1,) * (x.ndim - 2)
    )
    out = out.astype(input._data.dtype, copy=False)
    params = [t for t in (weight, bias) if t is not None]
    if not needs_grad(input, *params):
        return wrap(out)
    if is_reduced_float(pdtype):  # torch's backward reads the statistics it kept, rounded
        xhat, _, _, rstd = _standardize(grouped, (2,), eps, pdtype)
    xhat = xhat.reshape(x.shape)
    node = NativeGroupNormBackward0(_edges(input, weight, bias))
    node._reduced = (input._data.dtype, pdtype) if x is not input._data else None
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
