"""``F.conv2d``/``F.conv1d`` (im2col + one batched matmul, fused backward), constant ``F.pad``.

The input is zero-padded, viewed as sliding windows with ``sliding_window_view`` (no copy),
and the strided/dilated windows are gathered once into a column matrix ``cols`` of shape
``(N, groups, C/groups * kh * kw, OH * OW)``. The output is ``W @ cols`` for every sample and
group. Backward reuses ``cols`` for the weight gradient and scatters ``W.T @ g`` back onto
the padded input, one kernel offset at a time (``kh * kw`` strided adds).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..._dtype import c_type_name, opsum, scalar_type_name
from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from ...amp._state import state as _autocast
from ...amp._state import to_lower

__all__ = [
    "ConstantPadNdBackward0",
    "ConvolutionBackward0",
    "conv1d",
    "conv2d",
    "pad",
    "pair",
    "single",
]


def pair(value: Any, name: str = "value") -> tuple[int, int]:
    """``3`` -> ``(3, 3)``; a 1-sequence repeats; a 2-sequence is kept."""
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            return (int(value[0]), int(value[0]))
        if len(value) != 2:
            raise RuntimeError(f"expected {name} to be a single integer or a pair, got {value}")
        return (int(value[0]), int(value[1]))
    return (int(value), int(value))


class ConvolutionBackward0(Node):
    """Gradients of a 2-D convolution with edges ``(input, weight, bias)`` as torch."""

    __slots__ = ("_geometry", "cols", "weight")

    cols: np.ndarray
    weight: np.ndarray
    # (x shape as 4-D, padding, stride, dilation, output spatial size, groups, kernel as 2-D,
    # the input's own shape): a 1-D convolution is a 2-D one over height-1 planes
    _geometry: tuple[Any, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ex, ew, eb = self._next
        shape, padding, stride, dilation, out_hw, groups, kernel, in_shape = self._geometry
        n, o = g.shape[0], g.shape[1]
        g4 = g.reshape(n, groups, o // groups, out_hw[0] * out_hw[1])
        gx = gw = gb = None
        if eb is not None:
            gb = opsum(g4, (0, 3)).reshape(o)
        if ew is not None:
            gw = _weight_grad(g4, self.cols, self.weight.shape)
        if ex is not None:
            w3 = self.weight.reshape(groups, o // groups, -1)
            gcols = np.swapaxes(w3, 1, 2) @ g4  # (N, G, Cg*kh*kw, L)
            gx = _col2im(gcols, shape, kernel, padding, stride, dilation, out_hw)
            gx = gx.reshape(in_shape)
        return (gx, gw, gb)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        from ._conv_graph import convolution_backward_graph

        grad = grads[0]
        assert grad is not None
        return convolution_backward_graph(self, grad)


def _weight_grad(g4: np.ndarray, cols: np.ndarray, w_shape: tuple[int, ...]) -> np.ndarray:
    """``sum_n g[n] @ cols[n].T`` per group: a batched matmul, then a sum of weight-sized terms."""
    return (g4 @ np.swapaxes(cols, -1, -2)).sum(axis=0).reshape(w_shape)


def _col2im(
    gcols: np.ndarray,
    shape: tuple[int, ...],
    kernel: tuple[int, ...],
    padding: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    out_hw: tuple[int, int],
) -> np.ndarray:
    """Scatter-add column gradients back onto the (padded) input, then crop the padding."""
    n, c, h, w = shape
    (ph, pw), (sh, sw), (dh, dw) = padding, stride, dilation
    kh, kw = kernel
    oh, ow = out_hw
    cols6 = gcols.reshape(n, c, kh, kw, oh, ow)
    grad = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=gcols.dtype)
    for i in range(kh):
        top = i * dh
        for j in range(kw):
            left = j * dw
            grad[
                :, :, top : top + sh * (oh - 1) + 1 : sh, left : left + sw * (ow - 1) + 1 : sw
            ] += cols6[:, :, i, j]
    return grad[:, :, ph : ph + h, pw : pw + w]


def _padding(
    padding: Any, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int]
) -> tuple[tuple[int, int], tuple[int, int]]:
    """``(symmetric padding, extra zeros on the far side)`` per spatial dim.

    ``"same"`` with an odd total padding (an even effective kernel) pads one more zero at the
    far end, as torch does with a padded copy of the input."""
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding == "same":
        if stride != (1, 1):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        spans = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return (spans[0] // 2, spans[1] // 2), (spans[0] % 2, spans[1] % 2)
    if isinstance(padding, str):
        raise RuntimeError(f"Invalid padding string: {padding!r}")
    return pair(padding, "padding"), (0, 0)


def _check_conv2d_ranks(x: np.ndarray, w: np.ndarray) -> None:
    if w.ndim != 4:
        raise RuntimeError(f"conv2d(): expected a 4-D weight, got {w.ndim}-D")
    if x.ndim != 4:
        raise RuntimeError(
            "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: "
            f"{list(x.shape)}"
        )


def _check_conv(x: np.ndarray, w: np.ndarray, bias: Tensor | None, groups: int) -> None:
    """torch's checks of a batched convolution's channels and dtypes."""
    if x.shape[1] != w.shape[1] * groups or w.shape[0] % groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(w.shape)}, expected input"
            f"{list(x.shape)} to have {w.shape[1] * groups} channels, but got "
            f"{x.shape[1]} channels instead"
        )
    if x.dtype != w.dtype:  # torch's kernels word it differently with and without a bias
        if bias is not None:
            raise RuntimeError(
                f"Input type ({c_type_name(x.dtype)}) and bias type "
                f"({c_type_name(bias._data.dtype)}) should be the same"
            )
        raise RuntimeError(
            f"expected scalar type {scalar_type_name(x.dtype)} but found "
            f"{scalar_type_name(w.dtype)}"
        )


def _im2col(
    x: np.ndarray,
    kernel: tuple[int, int],
    padding: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    groups: int,
    flat: bool = False,
) -> tuple[np.ndarray, tuple[int, int]]:
    """Columns ``(N, G, C/G * kh * kw, OH * OW)`` of the padded input, and ``(OH, OW)``;
    ``flat`` planes are conv1d's height-1 rows (its errors name the width only)."""
    n, c, h, w = x.shape
    (ph, pw), (sh, sw), (dh, dw) = padding, stride, dilation
    kh, kw = kernel
    span_h, span_w = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    if h + 2 * ph < span_h or w + 2 * pw < span_w:
        sizes, spans = [h + 2 * ph, w + 2 * pw], [span_h, span_w]
        if flat:
            sizes, spans = sizes[1:], spans[1:]
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, sizes))}). "
            f"Kernel size: ({' x '.join(map(str, spans))}). Kernel size can't be greater than "
            "actual input size"
        )
    windows = sliding_window_view(x, (span_h, span_w), axis=(2, 3))
    windows = windows[:, :, ::sh, ::sw, ::dh, ::dw]  # (N, C, OH, OW, kh, kw), still a view
    oh, ow = windows.shape[2], windows.shape[3]
    cols = np.ascontiguousarray(windows.transpose(0, 1, 4, 5, 2, 3))
    return cols.reshape(n, groups, (c // groups) * kh * kw, oh * ow), (oh, ow)


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """2-D cross-correlation over ``(N, C, H, W)`` (or unbatched ``(C, H, W)``) input."""
    if _autocast.lower is not None:  # torch's CPU autocast: lower precision
        input, weight, bias = to_lower(input, weight, bias)
    x, w = input._data, weight._data
    if x.ndim == 3:
        return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(
            0
        )
    _check_conv2d_ranks(x, w)
    _check_conv(x, w, bias, groups)
    strides, dilations = pair(stride, "stride"), pair(dilation, "dilation")
    kernel = (w.shape[2], w.shape[3])
    pads, extra = _padding(padding, kernel, strides, dilations)
    if any(extra):
        input = pad(input, (0, extra[1], 0, extra[0]))
        x = input._data
    return _convolution(input, weight, bias, x, w, strides, pads, dilations, groups)


def _convolution(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    x: np.ndarray,
    w: np.ndarray,
    strides: tuple[int, int],
    pads: tuple[int, int],
    dilations: tuple[int, int],
    groups: int,
) -> Tensor:
    """The 2-D convolution of the 4-D arrays ``x``, ``w`` (views of ``input``, ``weight``),
    recorded as one node whose gradients take ``input``'s and ``weight``'s own shapes."""
    kernel = (w.shape[2], w.shape[3])
    cols, out_hw = _im2col(x, kernel, pads, strides, dilations, groups, input.ndim == 3)
    o = w.shape[0]
    out = w.reshape(groups, o // groups, -1) @ cols  # (N, G, O/G, L)
    out = out.reshape(x.shape[0], o, *out_hw).astype(x.dtype, copy=False)  # bfloat16 stays
    if bias is not None:
        out += bias._data.reshape(1, o, 1, 1)
    if input.ndim == 3:  # conv1d: drop the height-1 dim
        out = out.reshape(x.shape[0], o, out_hw[1])
    tensors = (input, weight) if bias is None else (input, weight, bias)
    if not needs_grad(*tensors):
        return wrap(out)
    node = ConvolutionBackward0((edge(input), edge(weight), None if bias is None else edge(bias)))
    node.cols = cols
    node.weight = weight._data
    node._geometry = (x.shape, pads, strides, dilations, out_hw, groups, kernel, input.shape)
    node._save(input, weight)
    return record(out, node)


def _check_conv1d(x: np.ndarray, w: np.ndarray) -> None:
    if x.ndim not in (2, 3):
        raise RuntimeError(
            "Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: "
            f"{list(x.shape)}"
        )
    if w.ndim != 3:
        raise RuntimeError(
            f"Expected {w.ndim}-dimensional input for {w.ndim}-dimensional weight "
            f"{list(w.shape)}, but got {x.ndim}-dimensional input of size {list(x.shape)} instead"
        )


def single(value: Any, name: str) -> int:
    """``3`` or ``(3,)`` -> ``3``; torch's error for a longer sequence."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise RuntimeError(
                f"expected {name} to be a single integer value or a list of 1 values to match "
                f"the convolution dimensions, but got {name}={list(value)}"
            )
        return int(value[0])
    return int(value)


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """1-D cross-correlation over ``(N, C, L)`` (or unbatched ``(C, L)``) input: the 2-D one
    over planes of height 1, recorded as one node as torch's."""
    if _autocast.lower is not None:  # torch's CPU autocast: lower precision
        input, weight, bias = to_lower(input, weight, bias)
    x, w = input._data, weight._data
    _check_conv1d(x, w)
    if x.ndim == 2:
        return conv1d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(
            0
        )
    _check_conv(x, w, bias, groups)
    strides, dilations = (1, single(stride, "stride")), (1, single(dilation, "dilation"))
    if isinstance(padding, str):
        pads, extra = _padding(padding, (1, w.shape[2]), strides, dilations)
        if extra[1]:
            input = pad(input, (0, extra[1]))
            x = input._data
    else:
        pads = (0, single(padding, "padding"))
    x4, w4 = x[:, :, None, :], w[:, :, None, :]
    return _convolution(input, weight, bias, x4, w4, strides, pads, dilations, groups)


class ConstantPadNdBackward0(Node):
    """The gradient of the input is the part of the output gradient it was copied to."""

    __slots__ = ("_dst", "_shape", "_src")

    _dst: tuple[slice, ...]
    _shape: tuple[int, ...]
    _src: tuple[slice, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        grad = np.zeros(self._shape, dtype=g.dtype)
        grad[self._src] = g[self._dst]
        return (grad,)


def _pad_slices(
    shape: tuple[int, ...], pads: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...]]:
    """Output shape, and where the input's kept part comes from / goes to (negative crops)."""
    if len(pads) % 2 or len(pads) // 2 > len(shape):
        raise RuntimeError(
            f"Padding length must be divisible by 2 and at most twice the input dimension, "
            f"got {len(pads)} for a {len(shape)}-D input"
        )
    out_shape, src, dst = list(shape), [slice(None)] * len(shape), [slice(None)] * len(shape)
    for k in range(len(pads) // 2):
        dim = len(shape) - 1 - k
        left, right = pads[2 * k], pads[2 * k + 1]
        size = shape[dim]
        out_shape[dim] = size + left + right
        if out_shape[dim] < 0:
            raise RuntimeError(
                f"The input size {size}, plus negative padding {left} and {right} resulted in a "
                f"negative output size, which is invalid. Check dimension {dim} of your input."
            )
        start, stop = max(-left, 0), size - max(-right, 0)
        src[dim] = slice(start, max(stop, start))
        dst[dim] = slice(max(left, 0), max(left, 0) + max(stop - start, 0))
    return tuple(out_shape), tuple(src), tuple(dst)


def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last ``len(pad) // 2`` dims by ``(left, right)`` pairs, last dim first, with
    ``value`` (``mode="constant"``) or by reflecting, replicating or wrapping the input."""
    if mode != "constant":
        from .padding import index_pad  # padding imports pooling, which needs nothing here

        return index_pad(input, tuple(int(p) for p in pad), mode, value)
    x = input._data
    out_shape, src, dst = _pad_slices(x.shape, tuple(int(p) for p in pad))
    out = np.full(out_shape, 0 if value is None else value, dtype=x.dtype)
    out[dst] = x[src]
    if needs_grad(input):
        node = ConstantPadNdBackward0((edge(input),))
        node._shape, node._src, node._dst = x.shape, src, dst
        return record(out, node)
    return wrap(out)
