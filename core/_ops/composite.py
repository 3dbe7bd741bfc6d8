"""Shape ops torch code uses that compose exactly from ops hookgrad has: ``repeat``, ``tile``,
``roll``, ``outer``, ``movedim``/``moveaxis``, ``swapaxes``/``swapdims``, ``unflatten`` and
``masked_select``. Their gradients are those of the ops they are made of (exact: reshapes,
expands, indexing and products)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .._creation import arange
from .._tensor import Tensor

__all__ = ["COMPOSITE"]


def _sizes(sizes: tuple[Any, ...]) -> tuple[int, ...]:
    if len(sizes) == 1 and isinstance(sizes[0], list | tuple):
        return tuple(sizes[0])
    return tuple(sizes)


def repeat(input: Tensor, *sizes: Any) -> Tensor:
    """``Tensor.repeat``: the tensor tiled ``sizes[i]`` times along each dim (leading new dims
    when ``sizes`` is longer)."""
    reps = _sizes(sizes)
    if len(reps) < input.dim():
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions "
            "of tensor"
        )
    shape = (1,) * (len(reps) - input.dim()) + tuple(input.shape)
    spread = [d for s in shape for d in (1, s)]
    expanded = [d for r, s in zip(reps, shape, strict=True) for d in (r, s)]
    return (
        input.reshape(spread)
        .expand(expanded)
        .reshape([r * s for r, s in zip(reps, shape, strict=True)])
    )


def tile(input: Tensor, dims: Any) -> Tensor:
    """``torch.tile``: ``repeat`` with ``dims`` padded by leading ones to the tensor's rank."""
    reps = _sizes((dims,)) if not isinstance(dims, int) else (dims,)
    return repeat(input, (1,) * (input.dim() - len(reps)) + tuple(reps))


def roll(input: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """``torch.roll``: elements shifted along ``dims`` (the flattened tensor when None),
    wrapping around."""
    if dims is None:
        return roll(input.flatten(), shifts, 0).view(input.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(
            f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}"
        )
    out = input
    for shift, dim in zip(shifts, dims, strict=True):
        n = out.shape[dim]
        if n == 0:
            continue
        index = (arange(n) - shift) % n
        out = out.index_select(dim, index)
    return out


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """``torch.outer`` (``ger``): ``input[i] * vec2[j]``."""
    return input.reshape(-1, 1) * vec2.reshape(1, -1)


def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:
    """``torch.movedim``: the dims ``source`` moved to ``destination``, the others in order."""
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            "movedim: Invalid source or destination dims: source "
            f"({list(src)} dims) should contain the same number of dims as destination "
            f"({list(dst)} dims)"
        )
    n = input.dim()
    src = tuple(d % n if n else d for d in src)
    dst = tuple(d % n if n else d for d in dst)
    order = [-1] * n
    for s, d in zip(src, dst, strict=True):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o == -1 else o for o in order]
    return input.permute(*order)


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """``torch.swapaxes``: ``transpose`` under numpy's parameter names."""
    return input.transpose(axis0, axis1)


def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """``torch.swapdims``: ``transpose`` (torch names its parameters as transpose's)."""
    return input.transpose(dim0, dim1)


def unflatten(input: Tensor, dim: int, sizes: Any) -> Tensor:
    """``Tensor.unflatten``: dim ``dim`` split into ``sizes`` (one of them may be -1)."""
    shape = list(input.shape)
    dim = dim % len(shape)
    sizes = list(sizes)
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        sizes[sizes.index(-1)] = shape[dim] // known if known else 0
    if math.prod(sizes) != shape[dim]:
        raise RuntimeError(
            f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim "
            f"{dim} ({shape[dim]}) in the input tensor"
        )
    return input.reshape(shape[:dim] + sizes + shape[dim + 1 :])


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """``torch.masked_select``: the elements where ``mask`` (broadcast) holds, as 1-D."""
    from .broadcast import broadcast_tensors

    values, where = broadcast_tensors(input, mask)
    return values[where]


COMPOSITE: dict[str, Callable[..., Tensor]] = {
    "repeat": repeat,
    "tile": tile,
    "roll": roll,
    "outer": outer,
    "ger": outer,
    "movedim": movedim,
    "moveaxis": movedim,
    "swapaxes": swapaxes,
    "swapdims": swapdims,
    "unflatten": unflatten,
    "masked_select": masked_select,
}
"""Each by torch's name: ``Tensor.X`` and (except ``repeat``) ``torch.X``."""
