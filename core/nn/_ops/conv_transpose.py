"""``F.conv_transpose2d``: the input-gradient of a 2-D convolution, run forward.

Forward is conv2d's backward for the input: every input pixel spreads ``W.T @ x`` over a kernel
window of the (padded) output (``_col2im``: one strided add per kernel offset), then the padding
is cropped. Backward is a plain convolution: the output gradient, padded, becomes columns
(``_im2col``) whose product with ``W`` is the input gradient and whose product with the input
is the weight gradient. torch records both directions as ``ConvolutionBackward0``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._dtype import c_type_name, opsum, scalar_type_name
from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from ...amp._state import state as _autocast
from ...amp._state import to_lower
from .conv import _col2im, _im2col, _weight_grad, pair

__all__ = ["ConvolutionBackward0", "conv_transpose2d"]


class ConvolutionBackward0(Node):
    """Gradients of a transposed 2-D convolution with edges ``(input, weight, bias)``."""

    __slots__ = ("_geometry", "weight", "x")

    weight: np.ndarray
    x: np.ndarray  # the input as (N, G, Cin/G, H*W)
    # (input shape, kernel, padding, stride, dilation, groups)
    _geometry: tuple[Any, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ex, ew, eb = self._next
        shape, kernel, padding, stride, dilation, groups = self._geometry
        gx = gw = gb = None
        if eb is not None:
            gb = opsum(g, (0, 2, 3))
        cols = _output_columns(g, shape[2:], kernel, padding, stride, dilation, groups)
        if ew is not None:
            gw = _weight_grad(self.x, cols, self.weight.shape)
        if ex is not None:
            w3 = self.weight.reshape(groups, shape[1] // groups, -1)
            gx = (w3 @ cols).reshape(shape)
        return (gx, gw, gb)


def _output_columns(
    g: np.ndarray,
    in_hw: tuple[int, int],
    kernel: tuple[int, int],
    padding: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    groups: int,
) -> np.ndarray:
    """Columns of the padded output gradient: one window per input pixel (``in_hw`` of them;
    output padding past the last window is cut off)."""
    (ph, pw), (sh, sw), (dh, dw) = padding, stride, dilation
    span_h, span_w = dh * (kernel[0] - 1) + 1, dw * (kernel[1] - 1) + 1
    gp = np.pad(g, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    gp = gp[:, :, : (in_hw[0] - 1) * sh + span_h, : (in_hw[1] - 1) * sw + span_w]
    return _im2col(gp, kernel, (0, 0), stride, dilation, groups)[0]


def _check(x: np.ndarray, w: np.ndarray, groups: int, output_padding: Any, geometry: Any) -> None:
    """torch's checks of a batched conv_transpose2d call."""
    if w.ndim != 4:
        raise RuntimeError(f"conv_transpose2d(): expected a 4-D weight, got {w.ndim}-D")
    if w.shape[0] % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
            f"but got weight of size [{list(w.shape)}] instead"
        )
    if x.shape[1] != w.shape[0]:
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(w.shape)}, expected input"
            f"{list(x.shape)} to have {w.shape[0]} channels, but got {x.shape[1]} channels "
            "instead"
        )
    (oph, opw), ((sh, sw), (dh, dw)) = output_padding, geometry
    if not (oph < max(sh, dh) and opw < max(sw, dw)):
        raise RuntimeError(
            "output padding must be smaller than either stride or dilation, but got "
            f"output_padding_height: {oph} output_padding_width: {opw} stride_height: {sh} "
            f"stride_width: {sw} dilation_height: {dh} dilation_width: {dw}"
        )
    if x.dtype != w.dtype:
        raise RuntimeError(
            f"Input type (hookgrad.{scalar_type_name(x.dtype)}Tensor) and weight type "
            f"(hookgrad.{scalar_type_name(w.dtype)}Tensor) should be the same or input should "
            "be a MKLDNN tensor and weight is a dense tensor"
        )


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 2-D convolution of ``(N, Cin, H, W)`` (or unbatched ``(Cin, H, W)``) input
    with a ``(Cin, Cout / groups, kh, kw)`` weight."""
    if _autocast.lower is not None:  # torch's CPU autocast: lower precision
        input, weight, bias = to_lower(input, weight, bias)
    x, w = input._data, weight._data
    if x.ndim == 3:
        batched = conv_transpose2d(
            input.unsqueeze(0), weight, bias, stride, padding, output_padding, groups, dilation
        )
        return batched.squeeze(0)
    if x.ndim != 4:
        raise RuntimeError(
            "Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, but got input "
            f"of size: {list(x.shape)}"
        )
    strides, pads, dilations = pair(stride, "stride"), pair(padding), pair(dilation, "dilation")
    extra = pair(output_padding, "output_padding")
    _check(x, w, groups, extra, (strides, dilations))
    n, cin, h, wd = x.shape
    kernel = (w.shape[2], w.shape[3])
    cout = w.shape[1] * groups
    out_hw = tuple(
        (size - 1) * s - 2 * p + d * (k - 1) + 1 + e
        for size, s, p, d, k, e in zip((h, wd), strides, pads, dilations, kernel, extra)
    )
    if min(out_hw) < 1:
        raise RuntimeError(
            f"Given input size per channel: ({h} x {wd}). Calculated output size per channel: "
            f"({out_hw[0]} x {out_hw[1]}). Output size is too small"
        )
    x4 = x.reshape(n, groups, cin // groups, h * wd)
    cols = np.swapaxes(w.reshape(groups, cin // groups, -1), 1, 2) @ x4
    out = _col2im(cols, (n, cout, *out_hw), kernel, pads, strides, dilations, (h, wd))
    out = np.ascontiguousarray(out, dtype=x.dtype)  # numpy multiplies bfloat16 into float32
    if bias is not None:
        if bias._data.dtype != x.dtype:
            raise RuntimeError(
                f"Input type ({c_type_name(x.dtype)}) and bias type "
                f"({c_type_name(bias._data.dtype)}) should be the same"
            )
        out += bias._data.reshape(1, cout, 1, 1)
    tensors = (input, weight) if bias is None else (input, weight, bias)
    if not needs_grad(*tensors):
        return wrap(out)
    node = ConvolutionBackward0((edge(input), edge(weight), None if bias is None else edge(bias)))
    node.x, node.weight = x4, w
    node._geometry = (x.shape, kernel, pads, strides, dilations, groups)
    node._save(input, weight)
    return record(out, node)
