"""Diagonals: ``diagonal`` (a writable view, as torch's), ``diag``, ``diag_embed``, ``trace``.

Every op here reads or writes the same strided region, :func:`diagonal_of`; each backward
writes the gradient into that region of zeros, or reads it back out.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .._dtype import opsum
from ._base import Node, Tensor, edge, needs_grad, record, wrap
from ._graph import linear_grad, only
from .reduce import normalize_dims
from .shape import _as_view

__all__ = ["diag", "diag_embed", "diagonal", "diagonal_of", "trace"]


def diagonal_of(d: np.ndarray, offset: int, axis1: int, axis2: int) -> np.ndarray:
    """The diagonal of ``d`` over ``axis1``/``axis2`` as a view, moved to the last dim, as
    ``np.diagonal`` gives it but writable when ``d`` is (numpy's own is read-only)."""
    start = [slice(None)] * d.ndim
    start[axis2 if offset >= 0 else axis1] = slice(abs(offset), None)
    corner = d[tuple(start)]
    length = min(corner.shape[axis1], corner.shape[axis2])
    rest = [i for i in range(d.ndim) if i not in (axis1, axis2)]
    shape = (*(corner.shape[i] for i in rest), length)
    strides = (*(corner.strides[i] for i in rest), corner.strides[axis1] + corner.strides[axis2])
    return as_strided(corner, shape, strides, writeable=corner.flags.writeable)


def _on_diagonal(
    g: np.ndarray, shape: tuple[int, ...], offset: int, axes: tuple[int, int]
) -> np.ndarray:
    """Zeros shaped ``shape`` with ``g`` on that diagonal: the gradient of taking it."""
    grad = np.zeros(shape, dtype=g.dtype)
    diagonal_of(grad, offset, *axes)[...] = g
    return grad


def _diagonal_axes(ndim: int, dim1: int, dim2: int) -> tuple[int, int]:
    axis1, axis2 = normalize_dims((dim1, dim2), ndim)
    if axis1 == axis2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return axis1, axis2


class DiagonalBackward0(Node):
    """The gradient lands on the same diagonal of zeros shaped as the input."""

    __slots__ = ("_axes", "_offset", "_shape")

    _axes: tuple[int, int]
    _offset: int
    _shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (_on_diagonal(g, self._shape, self._offset, self._axes),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        offset, (axis1, axis2) = self._offset, self._axes
        value = _on_diagonal(g._data, self._shape, offset, self._axes)
        return (linear_grad(self, g, value, lambda gg: diagonal(gg, offset, axis1, axis2)),)


class DiagonalCopyBackward(DiagonalBackward0):
    """``diag`` of a matrix: torch copies the diagonal out (``diagonal_copy``)."""

    __slots__ = ()

    def name(self) -> str:
        return "DiagonalBackward0_copy"


def _diagonal_node(
    x: Tensor, offset: int, axes: tuple[int, int], cls: type[DiagonalBackward0]
) -> DiagonalBackward0:
    node = cls((edge(x),))
    node._offset, node._axes, node._shape = offset, axes, x._data.shape
    return node


def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal over ``dim1`` and ``dim2`` as a view, moved to the last dim.

    ``offset`` > 0 takes one above it, < 0 one below. Writes through the view reach ``x``;
    its node is ``DiagonalBackward0``."""
    axes = _diagonal_axes(x._data.ndim, dim1, dim2)
    out = diagonal_of(x._data, offset, *axes)
    node = _diagonal_node(x, offset, axes, DiagonalBackward0) if needs_grad(x) else None
    return _as_view(out, x, node)


class DiagEmbedBackward0(Node):
    """The gradient is the diagonal the input was written to."""

    __slots__ = ("_axes", "_offset")

    _axes: tuple[int, int]
    _offset: int

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (np.array(diagonal_of(g, self._offset, *self._axes)),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        offset, (axis1, axis2) = self._offset, self._axes
        value = np.array(diagonal_of(g._data, offset, axis1, axis2))
        return (linear_grad(self, g, value, lambda gg: diag_embed(gg, offset, axis1, axis2)),)


def diag_embed(x: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Zeros one dim larger than the input, with its last dim on a diagonal.

    The diagonal is over ``dim1`` and ``dim2`` of the result (``offset`` above or below the
    main one); the result's other dims are the input's others, in order."""
    d = x._data
    axes = _diagonal_axes(d.ndim + 1, dim1, dim2)
    size = (d.shape[-1] if d.ndim else 1) + abs(offset)
    rest = iter(d.shape[:-1])
    shape = tuple(size if i in axes else next(rest) for i in range(d.ndim + 1))
    out = np.zeros(shape, dtype=d.dtype)
    diagonal_of(out, offset, *axes)[...] = d
    if needs_grad(x):
        node = DiagEmbedBackward0((edge(x),))
        node._offset, node._axes = offset, axes
        return record(out, node)
    return wrap(out)


def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """A square matrix with a vector on a diagonal, or a copy of a matrix's diagonal.

    ``diagonal`` > 0 is above the main diagonal, < 0 below."""
    d = x._data
    if d.ndim == 1:
        return diag_embed(x, diagonal, 0, 1)
    if d.ndim != 2:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {d.ndim}D")
    out = np.array(diagonal_of(d, diagonal, 0, 1))
    if needs_grad(x):
        return record(out, _diagonal_node(x, diagonal, (0, 1), DiagonalCopyBackward))
    return wrap(out)


class TraceBackward0(Node):
    """The (0-d) gradient lands on the main diagonal of zeros shaped as the input."""

    __slots__ = ("_shape",)

    _shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (_on_diagonal(g, self._shape, 0, (0, 1)),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        return (linear_grad(self, g, _on_diagonal(g._data, self._shape, 0, (0, 1)), trace),)


def trace(x: Tensor) -> Tensor:
    """The sum of a matrix's main diagonal; integer matrices sum to int64, as torch's."""
    d = x._data
    if d.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {d.ndim}")
    if d.dtype == np.bool_:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    out = opsum(diagonal_of(d, 0, 0, 1))
    if d.dtype.kind in "iu":
        out = out.astype(np.int64)
    if needs_grad(x):
        node = TraceBackward0((edge(x),))
        node._shape = d.shape
        return record(out, node)
    return wrap(out)
