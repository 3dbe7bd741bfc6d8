"""``F.pad`` in ``reflect``, ``replicate`` and ``circular`` modes, by index maps.

Along each padded dim, ``np.pad`` applied to ``arange(size)`` gives the source of every output
position (numpy's ``reflect``, ``edge`` and ``wrap`` are torch's three modes). Forward gathers
with those indices; backward adds each output gradient into its source with the scatter of max
pooling (one ``bincount``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from .pooling import _scatter_to_indices

__all__ = [
    "ReflectionPad1DBackward0",
    "ReflectionPad2DBackward0",
    "ReplicationPad1DBackward0",
    "ReplicationPad2DBackward0",
    "index_pad",
]

_NUMPY_MODES: dict[str, Any] = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
_COMBINATIONS = (
    "Supported combinations for non-constant padding:\n"
    "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
    "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
    "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
)


class _IndexPadBackward(Node):
    """Each input element gets the sum of the gradients of the output positions it fills."""

    __slots__ = ("_shape", "indices")

    _shape: tuple[int, ...]
    indices: np.ndarray  # per output position of the padded dims, its flat source

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        shape = self._shape
        planes = shape if self.indices.ndim == 2 else (*shape, 1)
        g2 = g if self.indices.ndim == 2 else g[..., None]
        flat = np.broadcast_to(self.indices.reshape(g2.shape[-2:]), g2.shape)
        return (_scatter_to_indices(g2, flat, planes).reshape(shape),)


class ReflectionPad1DBackward0(_IndexPadBackward):
    __slots__ = ()


class ReflectionPad2DBackward0(_IndexPadBackward):
    __slots__ = ()


class ReplicationPad1DBackward0(_IndexPadBackward):
    __slots__ = ()


class ReplicationPad2DBackward0(_IndexPadBackward):
    __slots__ = ()


class CircularPadBackward0(_IndexPadBackward):
    """hookgrad's one node for circular padding (torch records its copies as CopySlices)."""

    __slots__ = ()


_NODES: dict[tuple[str, int], type[_IndexPadBackward]] = {
    ("reflect", 1): ReflectionPad1DBackward0,
    ("reflect", 2): ReflectionPad2DBackward0,
    ("replicate", 1): ReplicationPad1DBackward0,
    ("replicate", 2): ReplicationPad2DBackward0,
    ("circular", 1): CircularPadBackward0,
    ("circular", 2): CircularPadBackward0,
}


def _source(
    size: int, left: int, right: int, mode: str, argument: int, dim: int, shape: Any
) -> np.ndarray:
    """The source index of every position of one padded dim (negative pads crop)."""
    if mode == "reflect" and (left >= size or right >= size):
        raise RuntimeError(
            f"Argument #{argument}: Padding size should be less than the corresponding input "
            f"dimension, but got: padding ({left}, {right}) at dimension {dim} of input "
            f"{list(shape)}"
        )
    if mode == "circular" and (left > size or right > size):
        raise RuntimeError("Padding value causes wrapping around more than once.")
    positive = (max(left, 0), max(right, 0))
    if mode == "circular":  # torch crops first, then wraps what is left
        kept = np.arange(size)[max(-left, 0) : size - max(-right, 0)]
        return np.pad(kept, positive, mode="wrap")
    index = np.pad(np.arange(size), positive, mode=_NUMPY_MODES[mode])
    return index[max(-left, 0) : len(index) - max(-right, 0)]


def index_pad(input: Tensor, pads: tuple[int, ...], mode: str, value: float | None) -> Tensor:
    """Pad the last ``len(pads) // 2`` (1 or 2) dims in ``mode``, last dim first."""
    if mode not in _NUMPY_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    x = input._data
    k = len(pads) // 2
    if len(pads) % 2 or not 1 <= k <= 3 or x.ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"Padding size {len(pads)} is not supported for {x.ndim}D input tensor.\n"
            + _COMBINATIONS
        )
    if k == 3:
        raise NotImplementedError(f"F.pad: hookgrad pads at most 2 dims in mode={mode!r}")
    sources = [
        _source(
            x.shape[-1 - i], pads[2 * i], pads[2 * i + 1], mode, 2 * i + 4, x.ndim - 1 - i, x.shape
        )
        for i in range(k)
    ][::-1]
    if k == 1:
        out, indices = x[..., sources[0]], sources[0]
    else:
        rows, cols = sources[0][:, None], sources[1][None, :]
        out, indices = x[..., rows, cols], rows * x.shape[-1] + cols
    if not needs_grad(input):
        return wrap(out)
    node = _NODES[(mode, k)]((edge(input),))
    node.indices, node._shape = indices, x.shape
    return record(out, node)
