"""Shape operations. Views share storage and the version counter with their base."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._dtype import resolve_dtype
from ._base import Node, Tensor, edge, needs_grad, record, sum_to, wrap
from .reduce import normalize_dims

__all__ = [
    "cat",
    "chunk",
    "clone",
    "expand",
    "flatten",
    "permute",
    "reshape",
    "split",
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


def _as_view(out: np.ndarray, x: Tensor, node: Node | None) -> Tensor:
    result = record(out, node) if node is not None else wrap(out)
    result._base = x if x._base is None else x._base
    result._vbox = x._vbox
    return result


class ViewBackward0(Node):
    """reshape/view/flatten/squeeze/unsqueeze: the gradient takes the input's shape back."""

    __slots__ = ("_shape",)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g.reshape(self._shape),)


def _reshaped(x: Tensor, out: np.ndarray) -> Tensor:
    node = None
    if needs_grad(x):
        node = ViewBackward0((edge(x),))
        node._shape = x._data.shape
    return _as_view(out, x, node)


def reshape(x: Tensor, *shape: Any) -> Tensor:
    d = x._data
    target = _sizes(shape)
    try:
        out = d.reshape(target)
    except ValueError:
        raise RuntimeError(
            f"shape '{list(target)}' is invalid for input of size {d.size}"
        ) from None
    return _reshaped(x, out)


def view(x: Tensor, *shape: Any) -> Tensor:
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        return to(x, shape[0])  # x.view(dtype) is a reinterpretation in torch; a cast here
    return reshape(x, *shape)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    d = x._data
    if d.ndim == 0:
        return reshape(x, (1,))
    start, end = normalize_dims((start_dim, end_dim), d.ndim)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = (*d.shape[:start], int(np.prod(d.shape[start:end + 1])), *d.shape[end + 1:])
    return _reshaped(x, d.reshape(shape))


def squeeze(x: Tensor, dim: Any = None) -> Tensor:
    d = x._data
    if dim is None:
        return _reshaped(x, np.squeeze(d))
    dims = normalize_dims(dim, d.ndim)
    keep = tuple(i for i in dims if d.ndim and d.shape[i] == 1)
    return _reshaped(x, np.squeeze(d, axis=keep) if keep else d.reshape(d.shape))


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    d = x._data
    span = d.ndim + 1
    if not -span <= dim < span:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-span}, {span - 1}], but got {dim})"
        )
    return _reshaped(x, np.expand_dims(d, dim % span))


class PermuteBackward0(Node):
    __slots__ = ("_inverse",)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (np.transpose(g, self._inverse),)


def permute(x: Tensor, *dims: Any) -> Tensor:
    d = x._data
    order = normalize_dims(_sizes(dims), d.ndim) if d.ndim else ()
    if sorted(order) != list(range(d.ndim)):
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {d.ndim} is not "
            f"equal to len(dims) = {len(order)}"
        )
    node = None
    if needs_grad(x):
        node = PermuteBackward0((edge(x),))
        node._inverse = tuple(np.argsort(order))
    return _as_view(np.transpose(d, order), x, node)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    nd = x._data.ndim
    if nd == 0:
        return x
    a, b = normalize_dims((dim0, dim1), nd)
    order = list(range(nd))
    order[a], order[b] = order[b], order[a]
    return permute(x, tuple(order))


def t(x: Tensor) -> Tensor:
    nd = x._data.ndim
    if nd > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {nd}D")
    return x if nd < 2 else permute(x, (1, 0))


class ExpandBackward0(Node):
    __slots__ = ("_shape",)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (sum_to(g, self._shape),)


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
        raise RuntimeError(
            f"The expanded size of the tensor ({target[-1]}) must match the existing size "
            f"({d.shape[-1] if d.ndim else 1}) at non-singleton dimension. Target sizes: "
            f"{target}.  Tensor sizes: {list(d.shape)}"
        ) from None
    node = None
    if needs_grad(x):
        node = ExpandBackward0((edge(x),))
        node._shape = d.shape
    return _as_view(out, x, node)


class SplitBackward0(Node):
    """One node for all pieces; missing piece gradients count as zeros."""

    __slots__ = ("_axis", "_dtype", "_n_out", "_shapes")

    def backward_multi(self, grads: list[np.ndarray | None]) -> tuple[np.ndarray | None, ...]:
        parts = [
            g if g is not None else np.zeros(shape, dtype=self._dtype)
            for g, shape in zip(grads, self._shapes)
        ]
        return (np.concatenate(parts, axis=self._axis),)


def _pieces(x: Tensor, bounds: list[int], axis: int) -> tuple[Tensor, ...]:
    d = x._data
    arrays = np.split(d, bounds, axis=axis)
    if not needs_grad(x):
        return tuple(_as_view(a, x, None) for a in arrays)
    node = SplitBackward0((edge(x),))
    node._n_out = len(arrays)
    node._axis = axis
    node._shapes = [a.shape for a in arrays]
    node._dtype = d.dtype
    outs = []
    for nr, a in enumerate(arrays):
        out = _as_view(a, x, node)
        out._output_nr = nr
        outs.append(out)
    return tuple(outs)


def split(x: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into pieces of a given size (last may be smaller) or of the listed sizes."""
    d = x._data
    (axis,) = normalize_dims(dim, d.ndim)
    length = d.shape[axis]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got {step}")
        bounds = list(range(step, length, step))
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != length:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {length} (input tensor's "
                f"size at dimension {axis}), but got split_sizes={sizes}"
            )
        bounds = list(np.cumsum(sizes)[:-1])
    return _pieces(x, bounds, axis)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    length = x._data.shape[normalize_dims(dim, x._data.ndim)[0]]
    step = max(-(-length // chunks), 1)
    return split(x, step, dim)


def unbind(x: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    (axis,) = normalize_dims(dim, x._data.ndim)
    return tuple(squeeze(piece, axis) for piece in split(x, 1, axis))


class CatBackward0(Node):
    __slots__ = ("_axis", "_bounds")

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return tuple(np.split(g, self._bounds, axis=self._axis))


def cat(tensors: Any, dim: int = 0) -> Tensor:
    """Concatenate along an existing dim; shapes must agree elsewhere."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    arrays = [t._data for t in tensors]
    (axis,) = normalize_dims(dim, arrays[0].ndim)
    try:
        out = np.concatenate(arrays, axis=axis)
    except ValueError:
        shapes = ", ".join(str(list(a.shape)) for a in arrays)
        raise RuntimeError(
            f"Sizes of tensors must match except in dimension {axis}: got {shapes}"
        ) from None
    if needs_grad(*tensors):
        node = CatBackward0(tuple(edge(t) for t in tensors))
        node._axis = axis
        node._bounds = list(np.cumsum([a.shape[axis] for a in arrays])[:-1])
        return record(out, node)
    return wrap(out)


def stack(tensors: Any, dim: int = 0) -> Tensor:
    """Join along a new dim; every tensor must have the same shape."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shapes = {t._data.shape for t in tensors}
    if len(shapes) > 1:
        raise RuntimeError(f"stack expects each tensor to be equal size, but got {sorted(shapes)}")
    span = tensors[0]._data.ndim + 1
    axis = dim % span
    return cat([unsqueeze(t, axis) for t in tensors], axis)


class CloneBackward0(Node):
    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g,)


def clone(x: Tensor) -> Tensor:
    out = x._data.copy()
    if needs_grad(x):
        return record(out, CloneBackward0((edge(x),)))
    return wrap(out)


class ToCopyBackward0(Node):
    __slots__ = ("_dtype",)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g.astype(self._dtype),)


def to(x: Tensor, *args: Any, dtype: Any = None, copy: bool = False, **kwargs: Any) -> Tensor:
    """Cast to a dtype; device arguments other than 'cpu' are refused."""
    from .._dtype import device

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
    out = d.astype(target)
    if needs_grad(x) and target.kind == "f":
        node = ToCopyBackward0((edge(x),))
        node._dtype = d.dtype
        return record(out, node)
    return wrap(out)
