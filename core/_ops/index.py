"""Indexing: basic slicing gives views, advanced indexing copies and scatters back with add."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtype import c_type_name
from ..autograd._view import make_view
from ._base import Node, Tensor, edge, grad_state, needs_grad, record, sum_to, wrap
from ._graph import linear_grad, only, sum_to_tensor
from .arith import where

__all__ = [
    "gather",
    "getitem",
    "index_put",
    "masked_fill",
    "nonzero",
    "normalize_index",
    "one_hot",
    "scatter",
    "scatter_add",
]

_BASIC = (int, slice, type(None), type(Ellipsis))


def normalize_index(index: Any) -> tuple[Any, bool]:
    """Turn Tensors inside an index into arrays; report whether numpy will copy (advanced)."""
    items = index if isinstance(index, tuple) else (index,)
    converted = []
    advanced = False
    for item in items:
        if isinstance(item, Tensor):
            item = item._data
            if item.ndim == 0 and item.dtype.kind in "iu":
                item = int(item)
        elif isinstance(item, (list, np.ndarray, bool, np.bool_)):
            item = np.asarray(item)
        elif isinstance(item, np.integer):
            item = int(item)
        if not isinstance(item, _BASIC):
            advanced = True
        converted.append(item)
    return tuple(converted), advanced


def _index_error(d: np.ndarray, error: IndexError) -> IndexError:
    text = str(error)
    if " is out of bounds for axis " in text:  # numpy's wording of torch's message
        return IndexError(text.replace(" for axis ", " for dimension "))
    return IndexError(f"{text} (indexing a tensor of shape {list(d.shape)})")


class SliceBackward0(Node):
    """Basic indexing (ints, slices, None, Ellipsis): a view; the gradient is scattered back."""

    __slots__ = ("_index", "_shape")

    _index: tuple[Any, ...]
    _shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        grad = np.zeros(self._shape, dtype=g.dtype)
        grad[self._index] = g
        return (grad,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        index = self._index
        return (linear_grad(self, g, self.backward(g._data)[0], lambda gg: gg[index]),)  # type: ignore[arg-type]


class SelectBackward0(SliceBackward0):
    """Basic indexing whose last effective item is an int."""

    __slots__ = ()


class UnsqueezeBackward0(SliceBackward0):
    """Basic indexing whose last effective item is None."""

    __slots__ = ()


class AliasBackward0(SliceBackward0):
    """Basic indexing that selects everything (``x[...]``, ``x[:, :]``)."""

    __slots__ = ()


class IndexBackward0(SliceBackward0):
    """Advanced indexing: repeated indices must add up, hence ``np.add.at``."""

    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        grad = np.zeros(self._shape, dtype=g.dtype)
        np.add.at(grad, self._index, g)
        return (grad,)


_FULL = slice(None)


def _basic_node(index: Any, idx: tuple[Any, ...]) -> type[SliceBackward0]:
    """Name the node after the last op torch applies: it indexes left to right and, inside a
    tuple, skips whole-dim slices and Ellipsis."""
    if not isinstance(index, tuple):
        item = idx[0]
        if item is None:
            return UnsqueezeBackward0
        if item is Ellipsis:
            return AliasBackward0
        return SliceBackward0 if isinstance(item, slice) else SelectBackward0
    for item in reversed(idx):
        if item is None:
            return UnsqueezeBackward0
        if isinstance(item, int):
            return SelectBackward0
        if isinstance(item, slice) and item != _FULL:
            return SliceBackward0
    return AliasBackward0


def getitem(x: Tensor, index: Any) -> Tensor:
    node: SliceBackward0 | None  # IndexBackward0 for advanced indexing, else a view's node
    d = x._data
    idx, advanced = normalize_index(index)
    try:
        out = d[idx]
    except IndexError as error:
        raise _index_error(d, error) from None
    if advanced:
        out = np.asarray(out)
        if needs_grad(x):
            node = IndexBackward0((edge(x),))
            node._index, node._shape = idx, d.shape
            return record(out, node)
        return wrap(out)
    if not isinstance(out, np.ndarray):
        out = d[(*idx, Ellipsis)]  # a 0-d view instead of a numpy scalar copy
    node = None
    if needs_grad(x):
        node = _basic_node(index, idx)((edge(x),))
        node._index, node._shape = idx, d.shape
    result = record(out, node) if node is not None else wrap(out)
    return make_view(result, x)


class IndexPutBackward0(Node):
    __slots__ = ("_index", "_value_shape")

    _index: tuple[Any, ...]
    _value_shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        e_self, e_value = self._next
        grad_self = grad_value = None
        if e_self is not None:
            grad_self = g.copy()
            grad_self[self._index] = 0
        if e_value is not None:
            grad_value = sum_to(np.asarray(g[self._index]), self._value_shape)
        return (grad_self, grad_value)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        e_self, e_value = self._next
        grad_self = grad_value = None
        if e_self is not None:
            grad_self = index_put(g, self._index, 0)
        if e_value is not None:
            grad_value = sum_to_tensor(g[self._index], self._value_shape)
        return (grad_self, grad_value)


def index_put(x: Tensor, index: Any, value: Any) -> Tensor:
    """Out-of-place ``x[index] = value``: the kernel behind ``__setitem__``."""
    idx, _ = normalize_index(index)
    tv = value if isinstance(value, Tensor) else wrap(np.asarray(value, dtype=x._data.dtype))
    out = x._data.copy()
    try:
        out[idx] = tv._data
    except (ValueError, IndexError) as error:
        raise _assign_error(x, index, tv._data.shape, error) from None
    if needs_grad(x, tv):
        node = IndexPutBackward0((edge(x), edge(tv)))
        node._index = idx
        node._value_shape = tv._data.shape
        return record(out, node)
    return wrap(out)


def setitem(x: Tensor, index: Any, value: Any) -> None:
    """``x[index] = value``: written in place when nothing records, else through index_put."""
    from .inplace import apply_inplace, bump

    tv = value if isinstance(value, Tensor) else None
    if not grad_state.enabled or not (x._requires_grad or (tv is not None and tv._requires_grad)):
        idx, _ = normalize_index(index)
        try:
            x._data[idx] = value if tv is None else tv._data
        except (ValueError, IndexError) as error:
            raise _assign_error(x, index, np.shape(value), error) from None
        bump(x)
        return

    def kernel(src: Tensor) -> Tensor:
        return index_put(src, index, value)

    apply_inplace(x, kernel, tv)


def _assign_error(x: Tensor, index: Any, shape: Any, error: Exception) -> RuntimeError:
    return RuntimeError(
        f"cannot assign a value of shape {list(shape)} to index {index!r} of a tensor "
        f"of shape {list(x._data.shape)}: {error}"
    )


class MaskedFillBackward0(Node):
    __slots__ = ("_shape", "mask")

    _shape: tuple[int, ...]
    mask: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        e_self, e_value = self._next
        zero = np.zeros((), dtype=g.dtype)
        g_self = g_value = None
        if e_self is not None:
            g_self = sum_to(np.where(self.mask, zero, g), self._shape)
        if e_value is not None:
            g_value = np.asarray(np.where(self.mask, g, zero).sum(), dtype=g.dtype)
        return (g_self, g_value)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        e_self, e_value = self._next
        g_self = g_value = None
        if e_self is not None:
            g_self = sum_to_tensor(where(wrap(self.mask), 0, g), self._shape)
        if e_value is not None:
            g_value = where(wrap(self.mask), g, 0).sum()
        return (g_self, g_value)


def masked_fill(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    """Replace entries where ``mask`` is True; those entries get no gradient."""
    m = mask._data
    if m.dtype.kind != "b":
        raise RuntimeError(
            "masked_fill_ only supports boolean masks, but got mask with dtype "
            f"{c_type_name(m.dtype)}"
        )
    tv = value if isinstance(value, Tensor) else None
    if tv is not None and tv._data.ndim != 0:
        raise RuntimeError(
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{tv._data.ndim} dimension(s)."
        )
    fill = np.asarray(value if tv is None else tv._data, dtype=x._data.dtype)
    try:
        out = np.where(m, fill, x._data)
    except ValueError:
        from .arith import broadcast_error

        raise broadcast_error(x._data, m) from None
    if needs_grad(x, *(() if tv is None else (tv,))):
        node = MaskedFillBackward0((edge(x), None if tv is None else edge(tv)))
        node.mask, node._shape = m, x._data.shape
        return record(out, node)
    return wrap(out)


class GatherBackward0(Node):
    __slots__ = ("_positions", "_shape")

    _positions: tuple[np.ndarray, ...]
    _shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        grad = np.zeros(self._shape, dtype=g.dtype)
        np.add.at(grad, self._positions, g)
        return (grad,)


def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """Pick values along ``dim`` at ``index`` (same rank as ``x``, no larger on other dims)."""
    d = x._data
    positions = _index_positions("gather", "input", x, dim, index)
    out = d[positions]
    if needs_grad(x):
        node = GatherBackward0((edge(x),))
        node._positions, node._shape = positions, d.shape
        return record(out, node)
    return wrap(out)


def _along(index: np.ndarray, axis: int) -> tuple[np.ndarray, ...]:
    """Full fancy-index tuple addressing ``x[..., index[i], ...]`` (index on ``axis``, the
    entry's own position on every other dim): the positions gather reads and scatter writes."""
    full: list[np.ndarray] = list(np.indices(index.shape, sparse=True))
    full[axis] = index
    return tuple(full)


class ScatterBackward0(Node):
    """scatter with a src tensor: overwritten entries of self get no gradient, src gets the
    gradient gathered at the positions it wrote."""

    __slots__ = ("_positions", "_src_shape")

    _positions: tuple[np.ndarray, ...]
    _src_shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        e_self, e_src = self._next
        g_self = g_src = None
        if e_self is not None:
            g_self = g.copy()
            g_self[self._positions] = 0
        if e_src is not None:
            g_src = np.zeros(self._src_shape, dtype=g.dtype)
            g_src[_region(self._positions)] = g[self._positions]
        return (g_self, g_src)


class ScatterBackward1(ScatterBackward0):
    """scatter with a number value."""

    __slots__ = ()


class ScatterAddBackward0(ScatterBackward0):
    """scatter_add: self's gradient passes whole, src gets it gathered."""

    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        e_self, e_src = self._next
        g_src = None
        if e_src is not None:
            g_src = np.zeros(self._src_shape, dtype=g.dtype)
            g_src[_region(self._positions)] = g[self._positions]
        return (g if e_self is not None else None, g_src)


def _region(positions: tuple[np.ndarray, ...]) -> tuple[slice, ...]:
    """The leading block of src that index covers (src may be larger than index)."""
    shape = np.broadcast_shapes(*(p.shape for p in positions))
    return tuple(slice(0, n) for n in shape)


def _index_positions(
    op: str, self_name: str, x: Tensor, dim: int, index: Any
) -> tuple[np.ndarray, ...]:
    """The positions gather reads and scatter writes, after torch's checks of ``index``:
    an integer tensor of x's rank, no larger than x off ``dim``, in bounds along it."""
    from ._base import not_a_tensor
    from .reduce import normalize_dims

    if not isinstance(index, Tensor):
        raise not_a_tensor(op, "index", index, 3)
    d, idx = x._data, index._data
    if idx.dtype.kind not in "iu":
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index")
    (axis,) = normalize_dims(dim, d.ndim)
    if idx.ndim != d.ndim:
        raise RuntimeError(
            f"Index tensor must have the same number of dimensions as {self_name} tensor"
        )
    for i, (n, size) in enumerate(zip(idx.shape, d.shape)):
        if i != axis and n > size:
            where = f"Size does not match at dimension {i} e" if op == "gather" else "E"
            raise RuntimeError(
                f"{where}xpected index {list(idx.shape)} to be no larger than self "
                f"{list(d.shape)} apart from dimension {axis}"
            )
    size = d.shape[axis] if d.ndim else 1
    bad = idx[(idx < 0) | (idx >= size)]
    if bad.size:
        raise RuntimeError(
            f"index {int(bad.flat[0])} is out of bounds for dimension {axis} with size {size}"
        )
    return _along(idx.astype(np.intp, copy=False), axis)


def _scatter(op: str, x: Tensor, dim: int, index: Any, src: Any, add: bool) -> Tensor:
    positions = _index_positions(op, "self", x, dim, index)
    ts = src if isinstance(src, Tensor) else None
    out = x._data.copy()
    if ts is None:
        values: Any = np.asarray(src, dtype=out.dtype)
    else:
        values = ts._data[_region(positions)]
    if add:
        np.add.at(out, positions, values)
    else:
        out[positions] = values
    if needs_grad(x, *(() if ts is None else (ts,))):
        cls = ScatterAddBackward0 if add else (ScatterBackward1 if ts is None else ScatterBackward0)
        node = cls((edge(x), None if ts is None else edge(ts)))
        node._positions = positions
        node._src_shape = () if ts is None else ts._data.shape
        return record(out, node)
    return wrap(out)


def scatter(x: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None) -> Tensor:
    """A copy of ``x`` with ``src`` (a tensor or number) written at ``index`` along ``dim``."""
    return _scatter("scatter", x, dim, index, value if src is None else src, add=False)


def scatter_add(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of ``x`` with ``src`` added at ``index`` along ``dim`` (repeats add up)."""
    return _scatter("scatter_add", x, dim, index, src, add=True)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 rows with a 1 at each class index (``num_classes`` = max + 1 when -1)."""
    idx = tensor._data
    if idx.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if idx.size and idx.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(idx.max()) + 1 if idx.size else 0
    elif idx.size and idx.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return wrap((idx[..., None] == np.arange(num_classes)).astype(np.int64))


def nonzero(x: Tensor, *, as_tuple: bool = False) -> Any:
    """The int64 coordinates of the non-zero entries: one row per entry, or one tensor per
    dim with ``as_tuple`` (a 0-d tensor counts as 1-d there, as in torch)."""
    d = x._data
    coords = np.nonzero(d if d.ndim else d.reshape(1))
    if as_tuple:
        return tuple(wrap(c.astype(np.int64)) for c in coords)
    if d.ndim == 0:
        return wrap(np.zeros((int(bool(d)), 0), dtype=np.int64))
    return wrap(np.stack(coords, axis=1).astype(np.int64))
