"""``F.dropout``: zero each element with probability ``p`` and scale the rest by ``1/(1-p)``.

The mask comes from ``hookgrad.default_generator``, so ``manual_seed`` makes it reproducible.
"""

from __future__ import annotations

import numpy as np

from ..._creation import default_generator
from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from ..._ops._graph import only
from ..._ops.inplace import apply_inplace

__all__ = ["NativeDropoutBackward0", "dropout"]


class NativeDropoutBackward0(Node):
    """``grad * mask / (1 - p)``; the scaled mask is the only saved value."""

    __slots__ = ("mask",)

    mask: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        return (g * self.mask,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (only(grads) * wrap(self.mask),)


def _scaled_mask(x: np.ndarray, p: float) -> np.ndarray:
    """``1/(1-p)`` where an element is kept (probability ``1 - p``), else 0, in ``x``'s dtype."""
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
    if p == 1:
        return np.zeros(x.shape, dtype=dtype)
    keep = default_generator.numpy.random(x.shape, dtype=np.float32) >= p
    return keep.astype(dtype) * dtype.type(1.0 / (1.0 - p))


def _dropout(input: Tensor, mask: np.ndarray) -> Tensor:
    out = input._data * mask
    if needs_grad(input):
        node = NativeDropoutBackward0((edge(input),))
        node.mask = mask
        return record(out, node)
    return wrap(out)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Randomly zero elements during training; the identity when not training or ``p == 0``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    mask = _scaled_mask(input._data, p)
    if inplace:
        return apply_inplace(input, lambda source: _dropout(source, mask), None)
    return _dropout(input, mask)
