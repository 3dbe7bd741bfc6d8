"""``F.interpolate`` in ``nearest`` mode: each output element copies its nearest input element.

Along each spatial dim the source of output index ``i`` is torch's ``nearest_idx``:
``min(floor(i * scale), size - 1)`` in float32, ``scale`` being ``1 / scale_factor`` when a
scale factor is given, else ``in / out``. Forward gathers with those indices; backward adds
each output gradient into its source with the max-pooling scatter (one ``bincount``), so an
input no output copied gets exactly 0.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from .pooling import _scatter_to_indices

__all__ = ["UpsampleNearest1DBackward0", "UpsampleNearest2DBackward0", "interpolate"]

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"


class _UpsampleNearestBackward(Node):
    """Each input element gets the sum of the gradients of the outputs that copied it."""

    __slots__ = ("_shape", "indices")

    _shape: tuple[int, ...]
    indices: np.ndarray  # per output position, its source, flat in the (1 or 2-D) plane

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        shape = self._shape
        planes = shape if len(shape) == 4 else (*shape, 1)  # 1-D: a plane of width 1
        g4 = g if g.ndim == 4 else g[..., None]
        flat = np.broadcast_to(self.indices.reshape(g4.shape[-2:]), g4.shape)
        return (_scatter_to_indices(g4, flat, planes).reshape(shape),)


class UpsampleNearest1DBackward0(_UpsampleNearestBackward):
    __slots__ = ()


class UpsampleNearest2DBackward0(_UpsampleNearestBackward):
    __slots__ = ()


def _sources(size: int, out: int, scale_factor: float | None) -> np.ndarray:
    """torch's ``nearest_idx`` for every output index along one dim."""
    index = np.arange(out)
    if out == size:
        return index
    if out == 2 * size:
        return index >> 1
    if scale_factor is not None and scale_factor > 0:
        scale = np.float32(1.0 / scale_factor)
    else:
        scale = np.float32(size) / np.float32(out)
    return np.minimum(np.floor(index.astype(np.float32) * scale).astype(np.int64), size - 1)


def _targets(
    input: Tensor, size: Any, scale_factor: Any, recompute: bool | None
) -> tuple[list[int], list[float | None]]:
    """Output sizes and the scale factors the index formula uses, with torch's checks."""
    spatial = list(input.shape[2:])
    dim = len(spatial)
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if recompute:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {spatial} and output size of {size}. "
                    "Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                    "output size in (o1, o2, ...,oK) format."
                )
            return [int(s) for s in size], [None] * dim
        return [int(size)] * dim, [None] * dim
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != dim:
            raise ValueError(
                "Input and scale_factor must have the same number of spatial dimensions, but "
                f"got input with spatial dimensions of {spatial} and scale_factor of shape "
                f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format "
                "and scale_factor in (s1, s2, ...,sK) format."
            )
        factors = [float(s) for s in scale_factor]
    else:
        factors = [float(scale_factor)] * dim
    sizes = [math.floor(n * f) for n, f in zip(spatial, factors)]
    return sizes, [None] * dim if recompute else list(factors)


def _empty_size_error(spatial: tuple[int, ...], sizes: list[int]) -> None:
    """torch's refusal of an empty input or output plane."""
    if len(sizes) == 1:
        raise RuntimeError(
            "Input and output sizes should be greater than 0, but got input "
            f"(W: {spatial[0]}) and output (W: {sizes[0]})"
        )
    raise RuntimeError(
        "Input and output sizes should be greater than 0, but got input "
        f"(H: {spatial[0]}, W: {spatial[1]}) output (H: {sizes[0]}, W: {sizes[1]})"
    )


def interpolate(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial dims of ``(N, C, L)`` or ``(N, C, H, W)`` input (``nearest`` only)."""
    if mode in ("nearest", "area", "nearest-exact") and align_corners is not None:
        raise ValueError(
            "align_corners option can only be set with the interpolating modes: "
            "linear | bilinear | bicubic | trilinear"
        )
    if input.ndim not in (3, 4, 5):
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
            f"the modes: {_MODES} (got {mode})"
        )
    if mode != "nearest" or input.ndim == 5 or antialias:
        raise NotImplementedError(
            f"interpolate: hookgrad supports mode='nearest' on 3-D and 4-D input, got "
            f"mode={mode!r} on {input.ndim}-D input"
        )
    sizes, factors = _targets(input, size, scale_factor, recompute_scale_factor)
    x = input._data
    if min(sizes) < 1 or min(x.shape[2:]) < 1:
        _empty_size_error(x.shape[2:], sizes)
    sources = [_sources(n, o, f) for n, o, f in zip(x.shape[2:], sizes, factors)]
    node_class: type[_UpsampleNearestBackward]
    if len(sources) == 1:
        out, indices, node_class = x[..., sources[0]], sources[0], UpsampleNearest1DBackward0
    else:
        rows, cols = sources[0][:, None], sources[1][None, :]
        out, indices = x[..., rows, cols], rows * x.shape[-1] + cols
        node_class = UpsampleNearest2DBackward0
    if not needs_grad(input):
        return wrap(out)
    node = node_class((edge(input),))
    node.indices, node._shape = indices, x.shape
    return record(out, node)
