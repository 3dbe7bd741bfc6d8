"""Max, average and adaptive-average pooling over 2-D planes, and their 1-D forms.

The 2-D ops see ``(N, C, H, W)`` (or unbatched ``(C, H, W)``) input as strided windows of the
padded planes (``sliding_window_view``, no copy). Max pooling keeps each window's argmax as a
flat index into the input plane, as torch's ``return_indices``; its backward scatters the
gradient to those indices with one ``bincount``, so a position no window selected gets exactly 0
whatever the incoming gradient holds (NaN or inf included). Average pooling adds the windows
and divides by torch's per-window divisor; its backward spreads ``g / divisor`` back with one
strided add per kernel offset. Adaptive average pooling is two small averaging matrices,
``A_h @ x @ A_w.T``. The 1-D forms run the 2-D ones on an inserted height-1 dim, as torch does
(so their outputs come from ``SqueezeBackward1``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..._dtype import is_floating
from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap

__all__ = [
    "AdaptiveAvgPool2DBackward0",
    "AvgPool2DBackward0",
    "MaxPool2DWithIndicesBackward0",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "max_pool1d",
    "max_pool2d",
]


def _ints(value: Any, name: str, op: str, n: int = 2) -> tuple[int, ...]:
    """``3`` -> ``(3, 3)``; a 1-sequence repeats; an ``n``-sequence is kept."""
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            return (int(value[0]),) * n
        if len(value) != n:
            ints = "int" if n == 1 else f"tuple of {('two', 'three')[n - 2]} ints"
            raise RuntimeError(f"{op}: {name} must either be a single int, or a {ints}")
        return tuple(int(v) for v in value)
    return (int(value),) * n


def _output_size(size: int, k: int, pad: int, stride: int, dilation: int, ceil: bool) -> int:
    """torch's ``pooling_output_shape``, with its checks."""
    if stride == 0:
        raise RuntimeError("stride should not be zero")
    if pad < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
    if pad > ((k - 1) * dilation + 1) // 2:
        raise RuntimeError(
            "pad should be at most half of effective kernel size, but got "
            f"pad={pad}, kernel_size={k} and dilation={dilation}"
        )
    out = (size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (out - 1) * stride >= size + pad:
        out -= 1
    return out


class _Geometry:
    """Where the windows of a 2-D pooling lie: kernel, stride, padding, dilation, output."""

    __slots__ = ("dilation", "kernel", "out", "padding", "stride")

    def __init__(
        self, shape: tuple[int, ...], kernel: Any, stride: Any, padding: Any, dilation: Any,
        ceil_mode: bool, op: str,
    ) -> None:  # fmt: skip
        self.kernel = _ints(kernel, "kernel_size", op)
        self.stride = self.kernel if stride is None or stride == [] else _ints(stride, "stride", op)
        self.padding = _ints(padding, "padding", op)
        self.dilation = _ints(dilation, "dilation", op)
        c, h, w = shape[-3:]
        self.out = tuple(
            _output_size(size, k, p, s, d, ceil_mode)
            for size, k, p, s, d in zip(
                (h, w), self.kernel, self.padding, self.stride, self.dilation
            )
        )
        self._check(c, h, w)

    def _check(self, c: int, h: int, w: int) -> None:
        """torch's ``pool2d_shape_check``, after the output size is known."""
        (kh, kw), (sh, sw), (dh, dw), (ph, pw) = (
            self.kernel,
            self.stride,
            self.dilation,
            self.padding,
        )
        if kh <= 0 or kw <= 0:
            raise RuntimeError(
                f"kernel size should be greater than zero, but got kH: {kh} kW: {kw}"
            )
        if sh <= 0 or sw <= 0:
            raise RuntimeError(f"stride should be greater than zero, but got dH: {sh} dW: {sw}")
        if dh <= 0 or dw <= 0:
            raise RuntimeError(
                f"dilation should be greater than zero, but got dilationH: {dh} dilationW: {dw}"
            )
        if kw // 2 < pw or kh // 2 < ph:
            raise RuntimeError(
                "pad should be smaller than or equal to half of kernel size, but got "
                f"padW = {pw}, padH = {ph}, kW = {kw}, kH = {kh}"
            )
        if min(self.out) < 1:
            raise RuntimeError(
                f"Given input size: ({c}x{h}x{w}). Calculated output size: "
                f"({c}x{self.out[0]}x{self.out[1]}). Output size is too small"
            )

    def windows(self, x: np.ndarray, fill: Any) -> np.ndarray:
        """``(N, C, OH, OW, kh, kw)`` strided view of ``x`` padded with ``fill`` (padding,
        and on the far side whatever ceil mode's last windows reach past it)."""
        spans = [d * (k - 1) + 1 for k, d in zip(self.kernel, self.dilation)]
        pads = [(0, 0)] * (x.ndim - 2)
        for size, span, o, p, s in zip(x.shape[-2:], spans, self.out, self.padding, self.stride):
            pads.append((p, max(p, (o - 1) * s + span - size - p)))
        if any(any(p) for p in pads):
            x = np.pad(x, pads, constant_values=fill)
        windows = sliding_window_view(x, spans, axis=(-2, -1))
        (sh, sw), (dh, dw), (oh, ow) = self.stride, self.dilation, self.out
        return windows[..., : sh * (oh - 1) + 1 : sh, : sw * (ow - 1) + 1 : sw, ::dh, ::dw]


def _check_rank(x: np.ndarray) -> None:
    if x.ndim not in (3, 4) or x.size == 0:
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")


# -- max pooling -------------------------------------------------------------------------------


class MaxPool2DWithIndicesBackward0(Node):
    """Each window's gradient goes to its argmax (``indices``, flat in each input plane)."""

    __slots__ = ("_shape", "indices")

    _shape: tuple[int, ...]
    indices: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (_scatter_to_indices(g, self.indices, self._shape),)


def _scatter_to_indices(g: np.ndarray, indices: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``g`` into a zero array of ``shape`` at ``indices`` (flat in the last two dims);
    a window that saw only padding (index past the plane) sends its gradient nowhere."""
    plane = shape[-1] * shape[-2]
    planes = int(np.prod(shape[:-2]))
    offsets = np.arange(planes).reshape((*indices.shape[:-2], 1, 1)) * plane
    inside = (indices >= 0) & (indices < plane)
    if not inside.all():
        indices, g = np.where(inside, indices, 0), np.where(inside, g, g.dtype.type(0))
    summed = np.bincount((indices + offsets).ravel(), g.ravel(), minlength=planes * plane)
    return summed.astype(g.dtype, copy=False).reshape(shape)


def _argmax_as_torch(flat: np.ndarray) -> np.ndarray:
    """Each window's argmax as torch's kernel picks it: the first maximum, or the last NaN."""
    arg = flat.argmax(axis=-1)
    if flat.dtype.kind == "f":
        nan = np.isnan(flat)
        if nan.any():
            last_nan = flat.shape[-1] - 1 - nan[..., ::-1].argmax(axis=-1)
            arg = np.where(nan.any(axis=-1), last_nan, arg)
    return arg


def _first_inside(out: int, stride: int, pad: int, dilation: int) -> np.ndarray:
    """Per window along one dim, its first kernel position at or after the input's start."""
    start = np.arange(out) * stride - pad
    return np.where(start < 0, start + (-start + dilation - 1) // dilation * dilation, start)


def _lowest(dtype: np.dtype) -> Any:
    return -np.inf if is_floating(dtype) else np.iinfo(dtype).min


def max_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """The maximum of each window; with ``return_indices`` also where it lies in the input."""
    x = input._data
    _check_rank(x)
    geo = _Geometry(x.shape, kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d")
    windows = geo.windows(x, _lowest(x.dtype))
    kh, kw = geo.kernel
    flat = windows.reshape(*windows.shape[:-2], kh * kw)
    arg = _argmax_as_torch(flat)
    out = np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
    (sh, sw), (ph, pw), (dh, dw) = geo.stride, geo.padding, geo.dilation
    rows = np.arange(geo.out[0])[:, None] * sh - ph + (arg // kw) * dh
    cols = np.arange(geo.out[1])[None, :] * sw - pw + (arg % kw) * dw
    if x.dtype.kind == "f":  # nothing above -inf: torch keeps the window's first input position
        empty = out == -np.inf
        if empty.any():
            rows = np.where(empty, _first_inside(geo.out[0], sh, ph, dh)[:, None], rows)
            cols = np.where(empty, _first_inside(geo.out[1], sw, pw, dw)[None, :], cols)
    indices = rows * x.shape[-1] + cols
    if needs_grad(input):
        node = MaxPool2DWithIndicesBackward0((edge(input),))
        node.indices, node._shape = indices, x.shape
        node._save(input)
        result = record(out, node)
    else:
        result = wrap(out)
    return (result, wrap(indices.astype(np.int64))) if return_indices else result


# -- average pooling ---------------------------------------------------------------------------


def _divisors(size: int, k: int, pad: int, stride: int, out: int, include_pad: bool) -> np.ndarray:
    """torch's per-window element count along one dim (clipped at the padding's far edge)."""
    start = np.arange(out) * stride - pad
    end = np.minimum(start + k, size + pad)
    if include_pad:
        return end - start
    return np.minimum(end, size) - np.maximum(start, 0)


class AvgPool2DBackward0(Node):
    """Each window spreads ``g / divisor`` evenly over the input elements it covers."""

    __slots__ = ("_geometry", "_shape", "divisor")

    _geometry: _Geometry
    _shape: tuple[int, ...]
    divisor: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        geo, (h, w) = self._geometry, self._shape[-2:]
        (kh, kw), (sh, sw), (ph, pw) = geo.kernel, geo.stride, geo.padding
        oh, ow = geo.out
        share = g / self.divisor
        padded_h, padded_w = (
            max(h + 2 * ph, (oh - 1) * sh + kh),
            max(w + 2 * pw, (ow - 1) * sw + kw),
        )
        grad = np.zeros((*self._shape[:-2], padded_h, padded_w), dtype=g.dtype)
        for i in range(kh):  # one strided add per kernel offset, over all windows at once
            for j in range(kw):
                grad[..., i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw] += share
        return (grad[..., ph : ph + h, pw : pw + w],)


def avg_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """The mean of each window (zero padding counted when ``count_include_pad``)."""
    x = input._data
    if x.ndim < 3:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-x.ndim}, {x.ndim - 1}], "
            "but got -3)"
        )
    geo = _Geometry(x.shape, kernel_size, stride, padding, 1, ceil_mode, "avg_pool2d")
    if divisor_override is not None:
        if divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        divisor = np.asarray(divisor_override, dtype=x.dtype)
    else:
        dims = zip(x.shape[-2:], geo.kernel, geo.padding, geo.stride, geo.out)
        dh, dw = (_divisors(*d, count_include_pad) for d in dims)
        divisor = np.outer(dh, dw).astype(x.dtype)
    out = (geo.windows(x, 0).sum(axis=(-2, -1)) / divisor).astype(x.dtype, copy=False)
    if needs_grad(input):
        node = AvgPool2DBackward0((edge(input),))
        node._geometry, node._shape, node.divisor = geo, x.shape, divisor
        return record(out, node)
    return wrap(out)


# -- adaptive average pooling ------------------------------------------------------------------


def _averaging_matrix(size: int, out: int, dtype: np.dtype) -> np.ndarray:
    """``(out, size)``: row ``i`` averages ``[floor(i*size/out), ceil((i+1)*size/out))``."""
    i = np.arange(out)
    start = (i * size) // out
    end = -((-(i + 1) * size) // out)
    j = np.arange(size)
    inside = (j >= start[:, None]) & (j < end[:, None])
    return (inside / (end - start)[:, None]).astype(dtype)


class AdaptiveAvgPool2DBackward0(Node):
    """``g`` mapped back through the averaging matrices: ``A_h.T @ g @ A_w``."""

    __slots__ = ("cols", "rows")

    rows: np.ndarray
    cols: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (self.rows.T @ g @ self.cols,)


def _adaptive_size(output_size: Any, shape: tuple[int, ...]) -> tuple[int, int]:
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 2:
            raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
        sizes = output_size
    else:
        sizes = (output_size, output_size)
    h, w = (shape[-2 + i] if s is None else int(s) for i, s in enumerate(sizes))
    return h, w


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling into ``output_size`` (None keeps that dim) with torch's window bounds."""
    x = input._data
    if x.ndim not in (3, 4):
        raise RuntimeError(
            f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(x.shape)}"
        )
    for dim in range(x.ndim - 3 + 1, x.ndim):
        if x.shape[dim] == 0:
            raise RuntimeError(
                "adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                f"dimensions, but input has sizes {list(x.shape)} with dimension {dim} being empty"
            )
    oh, ow = _adaptive_size(output_size, x.shape)
    if (oh, ow) == (1, 1):  # torch takes the mean here, and records MeanBackward1
        return input.mean((-1, -2), keepdim=True)
    rows = _averaging_matrix(x.shape[-2], oh, x.dtype)
    cols = _averaging_matrix(x.shape[-1], ow, x.dtype)
    out = rows @ x @ cols.T
    if needs_grad(input):
        node = AdaptiveAvgPool2DBackward0((edge(input),))
        node.rows, node.cols = rows, cols
        return record(out, node)
    return wrap(out)


# -- the 1-D forms: the 2-D ops on a height-1 plane --------------------------------------------


def _check_1d(x: np.ndarray, op: str) -> None:
    if x.ndim not in (2, 3):
        raise RuntimeError(
            f"Expected 2 to 3 dimensions, but got {x.ndim}-dimensional tensor for argument #1 "
            f"'self' (while checking arguments for {op})"
        )


def _one(value: Any, name: str, op: str) -> int:
    return _ints(value, name, op, 1)[0]


def max_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Max pooling over the last dim of ``(N, C, L)`` or ``(C, L)`` input."""
    x = input._data
    if x.ndim not in (2, 3):
        raise RuntimeError(
            "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size "
            f"for input, but got:{list(x.shape)}"
        )
    op = "max_pool1d"
    kernel = (1, _one(kernel_size, "kernel_size", op))
    strides = None if stride is None or stride == [] else (1, _one(stride, "stride", op))
    pads, dilations = (0, _one(padding, "padding", op)), (1, _one(dilation, "dilation", op))
    out = max_pool2d(input.unsqueeze(-2), kernel, strides, pads, dilations, ceil_mode, True)
    values, indices = out[0].squeeze(-2), out[1].squeeze(-2)
    return (values, indices) if return_indices else values


def avg_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """Average pooling over the last dim of ``(N, C, L)`` or ``(C, L)`` input."""
    _check_1d(input._data, "avg_pool1d")
    op = "avg_pool1d"
    kernel = (1, _one(kernel_size, "kernel_size", op))
    strides = None if stride is None or stride == [] else (1, _one(stride, "stride", op))
    pads = (0, _one(padding, "padding", op))
    out = avg_pool2d(input.unsqueeze(-2), kernel, strides, pads, ceil_mode, count_include_pad)
    return out.squeeze(-2)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Adaptive average pooling over the last dim of ``(N, C, L)`` or ``(C, L)`` input."""
    _check_1d(input._data, "adaptive_avg_pool1d")
    size = _one(output_size, "output_size", "adaptive_avg_pool1d")
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)
