"""In-place ops on views: the base's history is rebased, as torch's ``CopySlices``.

When ``v = x[0]`` is modified in place while recording, the values of ``x`` change too, so
the gradient of ``x`` must flow through the in-place op. torch gives the base a
:class:`CopySlices` node wrapping the op's node, and the view an :class:`AsStridedBackward0`
node that places its gradient into the base's region. The region is described once, by
:class:`ViewGeometry`: the view's shape, strides and offset within the base's memory, which is
what numpy knows about any view, whatever chain of view ops made it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..autograd._saved import unpack_node
from ..autograd.graph import Node

__all__ = ["AsStridedBackward0", "CopySlices", "ViewGeometry"]

_OVERLAP_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


def _extent(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int]:
    """The lowest and highest element offsets an array with these (element) strides reaches."""
    lo = sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s < 0 and n > 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s > 0 and n > 0)
    return lo, hi


class ViewGeometry:
    """Where a view's elements sit within its base: shapes, element strides and offset.

    :meth:`buffers` lays out fresh zeroed memory exactly as the base's, so a gradient for the
    base and the view's region of it are plain numpy views of one another. A view whose
    elements share memory (``expand``) is refused unless ``overlap`` (its regenerated history
    reads the base, never writes it): :meth:`scatter_add` then sums the shared elements.
    """

    __slots__ = (
        "_base_shape",
        "_base_strides",
        "_offset",
        "_span",
        "_start",
        "overlaps",
        "shape",
        "strides",
    )

    def __init__(self, view: np.ndarray, base: np.ndarray, *, overlap: bool = False) -> None:
        item = base.itemsize
        offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        if view.itemsize != item or any(s % item for s in (*view.strides, *base.strides, offset)):
            raise RuntimeError(
                "in-place operation on a view whose elements do not line up with its base's "
                f"(view dtype {view.dtype}, base dtype {base.dtype}): clone() the view first"
            )
        self._base_shape, self.shape = base.shape, view.shape
        self._base_strides = tuple(s // item for s in base.strides)
        self.strides = tuple(s // item for s in view.strides)
        self._offset = offset // item
        self.overlaps = any(s == 0 and n > 1 for n, s in zip(self.shape, self.strides, strict=True))
        if self.overlaps and not overlap:
            raise RuntimeError(_OVERLAP_MESSAGE)
        lo, hi = _extent(self._base_shape, self._base_strides)
        vlo, vhi = _extent(self.shape, self.strides)
        if view.size and not lo <= self._offset + vlo <= self._offset + vhi <= hi:
            raise RuntimeError(
                "in-place operation on a view that no longer lies within its base's memory "
                "(was the base's .data reassigned?): clone() the view first"
            )
        self._start = -lo
        self._span = hi - lo + 1

    def buffers(self, dtype: np.dtype[Any]) -> tuple[np.ndarray, np.ndarray]:
        """``(base, region)``: zeros shaped and strided as the base, and the view's part of it."""
        raw = np.zeros(max(self._span, 1), dtype=dtype)
        return self._lay(raw, self._base_shape, self._base_strides, 0), self._lay(
            raw, self.shape, self.strides, self._offset
        )

    def scatter_add(self, g: np.ndarray) -> np.ndarray:
        """A gradient for the base: zeros but ``g`` added where the view's elements sit,
        summed where several of them share one."""
        raw = np.zeros(max(self._span, 1), dtype=g.dtype)
        if self.overlaps:  # each view element's index in raw, then one unbuffered sum
            where = self._lay(np.arange(raw.size), self.shape, self.strides, self._offset)
            np.add.at(raw, where, g)
        else:
            self._lay(raw, self.shape, self.strides, self._offset)[...] = g
        return np.array(self._lay(raw, self._base_shape, self._base_strides, 0))

    def _lay(
        self, raw: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...], offset: int
    ) -> np.ndarray:
        """``raw`` seen with these (element) strides from ``offset`` within the base."""
        item = raw.itemsize
        return as_strided(raw[self._start + offset :], shape, tuple(s * item for s in strides))


class CopySlices(Node):
    """The base's node after an in-place op on its view: the base's gradient passes through,
    except in the view's region, which goes through the op's own formula ``fn``.

    Edges: the base's previous history, then ``fn``'s edges other than the view's.
    """

    __slots__ = ("_fn", "_geometry")
    # fn's saved values are this node's: freed with it, checked against in-place writes.
    _saved_fields = ("_fn",)

    _fn: Node | None
    _geometry: ViewGeometry

    def __init__(self, base_edge: Any, fn: Node, geometry: ViewGeometry) -> None:
        super().__init__((base_edge, *fn._next[1:]))
        self._fn, self._geometry = fn, geometry
        self._versions = fn._versions

    def name(self) -> str:
        return "torch::autograd::CopySlices"

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        fn = self._fn
        assert fn is not None  # the engine refuses a freed node before calling backward
        if fn._packed is not None:  # saved-tensor hooks hold the wrapped op's values
            unpack_node(fn)
        base, region = self._geometry.buffers(g.dtype)
        base[...] = g
        results = fn.backward(region.copy())
        if results[0] is None:
            region[...] = 0
        else:
            region[...] = results[0]
        return (np.array(base), *results[1:])

    def _release(self) -> None:
        if self._fn is not None:
            self._fn._release()
        super()._release()


class AsStridedBackward0(Node):
    """The view's node after the rebase: its gradient lands in its region of the base's."""

    __slots__ = ("_geometry",)

    _geometry: ViewGeometry

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (self._geometry.scatter_add(g),)
