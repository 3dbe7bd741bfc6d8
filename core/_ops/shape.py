"""Shape operations. Views share storage and the version counter with their base."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtype import is_floating, resolve_dtype
from ..autograd._view import MULTI_OUTPUT, make_view
from ._base import Node, Tensor, edge, grad_state, needs_grad, record, sum_to, wrap
from ._graph import only, sum_to_tensor
from .reduce import normalize_dims

__all__ = [
    "cat",
    "chunk",
    "clone",
    "expand",
    "flatten",
    "permute",
    "reshape",
    "select",
    "split",
    "split_with_sizes",
    "squeeze",
    "stack",
    "t",
    "to",
    "transpose",
    "unbind",
    "unsqueeze",
    "view",
]


def _sizes(shape: tuple[Any, ...]) -> tuple[int, ...]:
    """Accept ``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])`` like torch."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _as_view(out: np.ndarray, x: Tensor, node: Node | None, kind: int | None = None) -> Tensor:
    result = record(out, node) if node is not None else wrap(out)
    return make_view(result, x, kind)


class ViewBackward0(Node):
    """reshape/view/flatten: the gradient takes the input's shape back."""

    __slots__ = ("_shape",)

    _shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g.reshape(self._shape),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (only(grads).reshape(self._shape),)


class UnsafeViewBackward0(ViewBackward0):
    """reshape of a tensor that cannot be viewed: the result is a copy, not a view."""

    __slots__ = ()


class SqueezeBackward0(ViewBackward0):
    """squeeze() of every size-1 dim."""

    __slots__ = ()


class SqueezeBackward1(ViewBackward0):
    """squeeze(dim)."""

    __slots__ = ()


class SqueezeBackward2(ViewBackward0):
    """squeeze(dims) with a tuple of dims."""

    __slots__ = ()


class UnsqueezeBackward0(ViewBackward0):
    __slots__ = ()


def _reshaped(x: Tensor, out: np.ndarray, cls: type[ViewBackward0] = ViewBackward0) -> Tensor:
    node = None
    if needs_grad(x):
        node = cls((edge(x),))
        node._shape = x._data.shape
    return _as_view(out, x, node)


def _copied(d: np.ndarray, out: np.ndarray) -> bool:
    """True when numpy had to copy to reshape (only possible for a non-contiguous input)."""
    return not d.flags.c_contiguous and not np.may_share_memory(out, d)


def _reshape_array(d: np.ndarray, target: tuple[int, ...]) -> np.ndarray:
    try:
        return d.reshape(target)
    except ValueError:
        raise RuntimeError(
            f"shape '{list(target)}' is invalid for input of size {d.size}"
        ) from None


def reshape(x: Tensor, *shape: Any) -> Tensor:
    d = x._data
    out = _reshape_array(d, _sizes(shape))
    if _copied(d, out):
        if needs_grad(x):
            node = UnsafeViewBackward0((edge(x),))
            node._shape = d.shape
            return record(out, node)
        return wrap(out)
    return _reshaped(x, out)


def view(x: Tensor, *shape: Any) -> Tensor:
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        return to(x, shape[0])  # x.view(dtype) is a reinterpretation in torch; a cast here
    d = x._data
    out = _reshape_array(d, _sizes(shape))
    if _copied(d, out):
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        )
    return _reshaped(x, out)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    d = x._data
    if d.ndim == 0:
        return reshape(x, (1,))
    start, end = normalize_dims((start_dim, end_dim), d.ndim)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if start == end:
        return x
    return reshape(
        x, (*d.shape[:start], int(np.prod(d.shape[start : end + 1])), *d.shape[end + 1 :])
    )


def squeeze(x: Tensor, dim: Any = None) -> Tensor:
    d = x._data
    if dim is None:
        return _reshaped(x, np.squeeze(d), SqueezeBackward0)
    dims = normalize_dims(dim, d.ndim)
    keep = tuple(i for i in dims if d.ndim and d.shape[i] == 1)
    out = np.squeeze(d, axis=keep) if keep else d.reshape(d.shape)
    return _reshaped(x, out, SqueezeBackward1 if isinstance(dim, int) else SqueezeBackward2)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    d = x._data
    span = d.ndim + 1
    if not -span <= dim < span:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-span}, {span - 1}], but got {dim})"
        )
    return _reshaped(x, np.expand_dims(d, dim % span), UnsqueezeBackward0)


class PermuteBackward0(Node):
    __slots__ = ("_inverse",)

    _inverse: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (np.transpose(g, self._inverse),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (only(grads).permute(self._inverse),)


class TransposeBackward0(PermuteBackward0):
    __slots__ = ()


class TBackward0(PermuteBackward0):
    __slots__ = ()


def _permuted(x: Tensor, order: tuple[int, ...], cls: type[PermuteBackward0]) -> Tensor:
    node = None
    if needs_grad(x):
        node = cls((edge(x),))
        node._inverse = tuple(np.argsort(order))
    return _as_view(np.transpose(x._data, order), x, node)


def permute(x: Tensor, *dims: Any) -> Tensor:
    d = x._data
    sizes = _sizes(dims)
    if len(sizes) != d.ndim:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {d.ndim} is not "
            f"equal to len(dims) = {len(sizes)}"
        )
    order = normalize_dims(sizes, d.ndim) if d.ndim else ()
    if len(set(order)) != len(order):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return _permuted(x, order, PermuteBackward0)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    nd = x._data.ndim
    a, b = normalize_dims((dim0, dim1), nd)
    order = list(range(nd))
    if nd:
        order[a], order[b] = order[b], order[a]
    return _permuted(x, tuple(order), TransposeBackward0)


def t(x: Tensor) -> Tensor:
    nd = x._data.ndim
    if nd > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {nd}D")
    return _permuted(x, tuple(range(nd - 1, -1, -1)), TBackward0)


def _expand_error(shape: tuple[int, ...], target: list[int]) -> RuntimeError:
    lead = len(target) - len(shape)
    dim = next(
        (lead + i for i, size in enumerate(shape) if size != 1 and target[lead + i] != size), 0
    )
    existing = shape[dim - lead] if dim >= lead else 1
    return RuntimeError(
        f"The expanded size of the tensor ({target[dim]}) must match the existing size "
        f"({existing}) at non-singleton dimension {dim}.  Target sizes: {target}.  "
        f"Tensor sizes: {list(shape)}"
    )


class ExpandBackward0(Node):
    __slots__ = ("_shape",)

    _shape: tuple[int, ...]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (sum_to(g, self._shape),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (sum_to_tensor(only(grads), self._shape),)


def expand(x: Tensor, *sizes: Any) -> Tensor:
    d = x._data
    target = list(_sizes(sizes))
    lead = len(target) - d.ndim
    if lead < 0:
        raise RuntimeError(
            f"expand(torch.FloatTensor{{{list(d.shape)}}}, size={target}): the number of sizes "
            "provided must be greater or equal to the number of dimensions in the tensor"
        )
    for i, size in enumerate(d.shape):
        if target[lead + i] == -1:
            target[lead + i] = size
    try:
        out = np.broadcast_to(d, tuple(target))
    except ValueError:
        raise _expand_error(d.shape, target) from None
    node = None
    if needs_grad(x):
        node = ExpandBackward0((edge(x),))
        node._shape = d.shape
    return _as_view(out, x, node)


class SplitBackward0(Node):
    """One node for all pieces; missing piece gradients count as zeros."""

    __slots__ = ("_axis", "_dtype", "_n_out", "_shapes")

    _axis: int
    _dtype: np.dtype[Any]
    _n_out: int  # a slot: the number of pieces, shadowing Node's class default of 1
    _shapes: list[tuple[int, ...]]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        # A single piece: the engine passes its gradient straight to backward().
        return self.backward_multi([g])

    def backward_multi(self, grads: list[np.ndarray | None]) -> tuple[np.ndarray | None, ...]:
        parts = [
            g if g is not None else np.zeros(shape, dtype=self._dtype)
            for g, shape in zip(grads, self._shapes)
        ]
        return (np.concatenate(parts, axis=self._axis),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (cat(self._graph_parts(grads), self._axis),)

    def _graph_parts(self, grads: list[Tensor | None]) -> list[Tensor]:
        """The pieces' gradients, zeros for those that got none."""
        return [
            g if g is not None else wrap(np.zeros(shape, dtype=self._dtype))
            for g, shape in zip(grads, self._shapes)
        ]


class SplitWithSizesBackward0(SplitBackward0):
    """split with a list of sizes."""

    __slots__ = ()


class UnbindBackward0(SplitBackward0):
    """unbind: the pieces lost the split dim, so the gradients are stacked back along it."""

    __slots__ = ()

    def backward_multi(self, grads: list[np.ndarray | None]) -> tuple[np.ndarray | None, ...]:
        parts = [
            g if g is not None else np.zeros(shape, dtype=self._dtype)
            for g, shape in zip(grads, self._shapes)
        ]
        return (np.stack(parts, axis=self._axis),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (stack(self._graph_parts(grads), self._axis),)


def _pieces(
    x: Tensor, arrays: list[np.ndarray], axis: int, cls: type[SplitBackward0]
) -> tuple[Tensor, ...]:
    # torch refuses to regenerate (or write in place) views an op returned several of
    kind = MULTI_OUTPUT if grad_state.enabled else None
    if not needs_grad(x):
        return tuple(_as_view(a, x, None, kind) for a in arrays)
    node = cls((edge(x),))
    node._n_out = len(arrays)
    node._axis = axis
    node._shapes = [a.shape for a in arrays]
    node._dtype = x._data.dtype
    outs = []
    for nr, a in enumerate(arrays):
        out = _as_view(a, x, node, kind)
        out._output_nr = nr
        outs.append(out)
    return tuple(outs)


def split(x: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into pieces of a given size (last may be smaller) or of the listed sizes."""
    d = x._data
    if d.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    (axis,) = normalize_dims(dim, d.ndim)
    length = d.shape[axis]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise RuntimeError(
                f"split_size can only be 0 if dimension size is 0, but got dimension size of {length}"
                if step == 0
                else f"split expects split_size be non-negative, but got split_size={step}"
            )
        bounds = list(range(step, length, step))
        return _pieces(x, np.split(d, bounds, axis=axis), axis, SplitBackward0)
    sizes = [int(size) for size in split_size_or_sections]
    if sum(sizes) != length:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {length} (input tensor's "
            f"size at dimension {axis}), but got split_sizes={sizes}"
        )
    bounds = list(np.cumsum(sizes)[:-1])
    return _pieces(x, np.split(d, bounds, axis=axis), axis, SplitWithSizesBackward0)


def split_with_sizes(x: Tensor, split_sizes: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into pieces of the listed sizes (``SplitWithSizesBackward0``)."""
    return split(x, list(split_sizes), dim)


def select(x: Tensor, dim: int, index: int) -> Tensor:
    """The view at ``index`` along ``dim``, one dim fewer (``SelectBackward0``)."""
    from .index import getitem

    d = x._data
    (axis,) = normalize_dims(dim, d.ndim)
    size = d.shape[axis]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(d.shape)} at "
            f"dimension {axis}"
        )
    return getitem(x, (slice(None),) * axis + (index,))


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    if x._data.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    length = x._data.shape[normalize_dims(dim, x._data.ndim)[0]]
    step = max(-(-length // chunks), 1)
    return split(x, step, dim)


def unbind(x: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along ``dim``, as views, sharing one UnbindBackward0 node."""
    d = x._data
    if d.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    (axis,) = normalize_dims(dim, d.ndim)
    moved = np.moveaxis(d, axis, 0)
    # moved[i, ...], not iteration: a 1-d input's entries must stay 0-d views, not copies
    return _pieces(x, [moved[i, ...] for i in range(len(moved))], axis, UnbindBackward0)


class CatBackward0(Node):
    __slots__ = ("_axis", "_bounds")

    _axis: int
    _bounds: list[int]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return tuple(np.split(g, self._bounds, axis=self._axis))

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        lead = (slice(None),) * self._axis
        bounds = [0, *self._bounds, g._data.shape[self._axis]]
        return tuple(
            g[(*lead, slice(lo, hi))] if e is not None else None
            for e, lo, hi in zip(self._next, bounds, bounds[1:])
        )


def _cat_error(arrays: list[np.ndarray], axis: int) -> RuntimeError:
    first = arrays[0]
    for i, a in enumerate(arrays[1:], start=1):
        if a.ndim != first.ndim:
            return RuntimeError(
                f"Tensors must have same number of dimensions: got {first.ndim} and {a.ndim}"
            )
        for d, (expected, got) in enumerate(zip(first.shape, a.shape)):
            if d != axis and expected != got:
                return RuntimeError(
                    f"Sizes of tensors must match except in dimension {axis}. Expected size "
                    f"{expected} but got size {got} for tensor number {i} in the list."
                )
    shapes = ", ".join(str(list(a.shape)) for a in arrays)
    return RuntimeError(f"cannot concatenate tensors of shapes {shapes} along dimension {axis}")


def cat(tensors: Any, dim: int = 0) -> Tensor:
    """Concatenate along an existing dim; shapes must agree elsewhere."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    arrays = [t._data for t in tensors]
    for i, a in enumerate(arrays):
        if a.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    (axis,) = normalize_dims(dim, arrays[0].ndim)
    try:
        out = np.concatenate(arrays, axis=axis)
    except ValueError:
        raise _cat_error(arrays, axis) from None
    if needs_grad(*tensors):
        node = CatBackward0(tuple(edge(t) for t in tensors))
        node._axis = axis
        node._bounds = list(np.cumsum([a.shape[axis] for a in arrays])[:-1])
        return record(out, node)
    return wrap(out)


class StackBackward0(Node):
    __slots__ = ("_axis",)

    _axis: int

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return tuple(np.moveaxis(g, self._axis, 0))

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        lead = (slice(None),) * self._axis
        return tuple(g[(*lead, i)] if e is not None else None for i, e in enumerate(self._next))


def stack(tensors: Any, dim: int = 0) -> Tensor:
    """Join along a new dim; every tensor must have the same shape."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    arrays = [t._data for t in tensors]
    for i, a in enumerate(arrays):
        if a.shape != arrays[0].shape:
            raise RuntimeError(
                "stack expects each tensor to be equal size, but got "
                f"{list(arrays[0].shape)} at entry 0 and {list(a.shape)} at entry {i}"
            )
    (axis,) = normalize_dims(dim, arrays[0].ndim + 1)
    out = np.stack(arrays, axis=axis)
    if needs_grad(*tensors):
        node = StackBackward0(tuple(edge(t) for t in tensors))
        node._axis = axis
        return record(out, node)
    return wrap(out)


class CloneBackward0(Node):
    __slots__ = ()

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (only(grads),)


def clone(x: Tensor) -> Tensor:
    out = x._data.copy()
    if needs_grad(x):
        return record(out, CloneBackward0((edge(x),)))
    return wrap(out)


class ToCopyBackward0(Node):
    __slots__ = ("_dtype",)

    _dtype: np.dtype[Any]

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g.astype(self._dtype),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (only(grads).to(self._dtype),)


def to(x: Tensor, *args: Any, dtype: Any = None, copy: bool = False, **kwargs: Any) -> Tensor:
    """Cast to a dtype; device arguments other than 'cpu' are refused."""
    from .._dtype import device
    from .._memory_format import check_memory_format

    check_memory_format(x._data.ndim, kwargs.get("memory_format"))
    target = resolve_dtype(dtype)
    for arg in (*args, kwargs.get("device")):
        if arg is None:
            continue
        if isinstance(arg, Tensor):
            target = arg._data.dtype
        elif isinstance(arg, (str, device)):
            device(arg)  # validates: raises for anything but the CPU
        else:
            target = resolve_dtype(arg)
    d = x._data
    if target is None or target == d.dtype:
        return clone(x) if copy else x
    with np.errstate(over="ignore", invalid="ignore"):  # torch casts overflow silently
        out = d.astype(target)
    if needs_grad(x) and is_floating(target):
        node = ToCopyBackward0((edge(x),))
        node._dtype = d.dtype
        return record(out, node)
    return wrap(out)
