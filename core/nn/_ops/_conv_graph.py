"""The recorded backward of ``conv2d`` (``create_graph=True``).

A convolution is bilinear in its input and weight, so its two gradients are bilinear too, in
the incoming gradient and the other operand: the input's, ``conv_input_grad(g, w)`` (a
transposed convolution), and the weight's, ``conv_weight_grad(g, x)``. The gradients of
these two are made of ``conv2d`` and of each other, so the three ops close under
differentiation: every order of derivative works.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from ..._ops._graph import only, saved_tensor
from .conv import ConvolutionBackward0, _col2im, _im2col, _weight_grad, conv2d

__all__ = ["conv_input_grad", "conv_weight_grad", "convolution_backward_graph"]

# (input shape, padding, stride, dilation, output size, groups): ConvolutionBackward0's.
Geometry = tuple[Any, ...]


def convolution_backward_graph(node: ConvolutionBackward0, g: Tensor) -> tuple[Tensor | None, ...]:
    """``ConvolutionBackward0.backward_graph``: edges ``(input, weight, bias)``."""
    ex, ew, eb = node._next
    x, w = saved_tensor(node, 0), saved_tensor(node, 1)
    # The node's geometry is the 2-D convolution's plus the kernel and the input's own shape:
    # conv1d and unbatched input run as a batched conv2d, so their tensors go through 4-D.
    shape, padding, stride, dilation, out_hw, groups, kernel, in_shape = node._geometry
    geometry = (shape, padding, stride, dilation, out_hw, groups)
    w4 = w if w.dim() == 4 else w.reshape(w.shape[0], w.shape[1], *kernel)
    g4 = g.reshape(shape[0], w4.shape[0], *out_hw)
    return (
        conv_input_grad(g4, w4, geometry).reshape(in_shape) if ex is not None else None,
        conv_weight_grad(g4, x.reshape(shape), geometry, w4._data.shape).reshape(w.shape)
        if ew is not None
        else None,
        g4.sum(dim=(0, 2, 3)) if eb is not None else None,
    )


def _grouped(g: np.ndarray, groups: int) -> np.ndarray:
    n, o = g.shape[0], g.shape[1]
    return g.reshape(n, groups, o // groups, -1)


def conv_input_grad(g: Tensor, w: Tensor, geometry: Geometry) -> Tensor:
    """The gradient of a convolution's input: ``g`` spread back through the weight ``w``."""
    shape, padding, stride, dilation, out_hw, groups = geometry
    wd = w._data
    w3 = wd.reshape(groups, wd.shape[0] // groups, -1)
    gcols = np.swapaxes(w3, 1, 2) @ _grouped(g._data, groups)
    value = _col2im(gcols, shape, wd.shape[2:], padding, stride, dilation, out_hw)
    if not needs_grad(g, w):
        return wrap(value)
    node = ConvInputGradBackward((edge(g), edge(w)))
    node._g, node._other, node._geometry = g, w, geometry
    return record(value, node)


def conv_weight_grad(g: Tensor, x: Tensor, geometry: Geometry, w_shape: tuple[int, ...]) -> Tensor:
    """The gradient of a convolution's weight: ``g`` against the windows of the input ``x``."""
    _, padding, stride, dilation, _, groups = geometry
    cols, _ = _im2col(x._data, (w_shape[2], w_shape[3]), padding, stride, dilation, groups)
    value = _weight_grad(_grouped(g._data, groups), cols, w_shape)
    if not needs_grad(g, x):
        return wrap(value)
    node = ConvWeightGradBackward((edge(g), edge(x)))
    node._g, node._other, node._geometry = g, x, geometry
    return record(value, node)


class _ConvGradBackward(Node):
    """A convolution gradient's own node: edges ``(g, other operand)``. The numpy backward
    runs the recorded formula with grad mode off (the walk's), which records nothing."""

    __slots__ = ("_g", "_geometry", "_other")

    _g: Tensor
    _other: Tensor
    _geometry: Geometry

    def name(self) -> str:
        return "ConvolutionBackwardBackward0"

    def backward(self, grad: Any) -> tuple[np.ndarray | None, ...]:
        return tuple(None if t is None else t._data for t in self.backward_graph([wrap(grad)]))

    def _conv(self, x: Tensor, w: Tensor) -> Tensor:
        _, padding, stride, dilation, _, groups = self._geometry
        return conv2d(x, w, None, stride, padding, dilation, groups)


class ConvInputGradBackward(_ConvGradBackward):
    """Of ``conv_input_grad(g, w)``: ``conv2d(gg, w)`` for ``g``, ``conv_weight_grad(g, gg)``
    for ``w``."""

    __slots__ = ()

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        gg = only(grads)
        eg, ew = self._next
        w = self._other
        return (
            self._conv(gg, w) if eg is not None else None,
            conv_weight_grad(self._g, gg, self._geometry, w._data.shape)
            if ew is not None
            else None,
        )


class ConvWeightGradBackward(_ConvGradBackward):
    """Of ``conv_weight_grad(g, x)``: ``conv2d(x, gg)`` for ``g``, ``conv_input_grad(g, gg)``
    for ``x``."""

    __slots__ = ()

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        gg = only(grads)
        eg, ex = self._next
        return (
            self._conv(self._other, gg) if eg is not None else None,
            conv_input_grad(self._g, gg, self._geometry) if ex is not None else None,
        )
