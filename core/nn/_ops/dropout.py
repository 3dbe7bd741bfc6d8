"""``F.dropout``: zero each element with probability ``p`` and scale the rest by ``1/(1-p)``.

The mask comes from ``hookgrad.default_generator``, so ``manual_seed`` makes it reproducible.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..._creation import default_generator
from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from ..._ops._graph import only
from ..._ops.inplace import apply_inplace

__all__ = ["NativeDropoutBackward0", "dropout", "dropout1d", "dropout2d"]


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
    # torch's CPU dropout: bernoulli_(1 - p) noise, divided by (1 - p) in the tensor's dtype
    keep = default_generator.stream.bernoulli(1.0 - p, x.shape).astype(dtype)
    return keep / dtype.type(1.0 - p)


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


# -- channel-wise dropout: one draw per (sample, channel), torch's feature_dropout -------------


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_dropout(
    input: Tensor, p: float, training: bool, inplace: bool, lead: int = 2
) -> Tensor:
    """Zero whole channels (the dims after the ``lead`` (sample, channel) ones) with
    probability ``p``, scale the rest by ``1/(1-p)``: a product with a constant mask,
    recorded as torch's MulBackward0."""
    if not training or p == 0:
        return input
    x = input._data
    mask_shape = x.shape[:lead] + (1,) * (x.ndim - lead)
    mask = wrap(_scaled_mask(np.empty(mask_shape, dtype=x.dtype), p))
    return input.mul_(mask) if inplace else input * mask


def dropout1d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` input."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
            "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
            "inputs)."
        )
    if input.ndim == 3:
        return _feature_dropout(input, p, training, inplace)
    if inplace:  # one draw per channel of the unbatched (C, L) input itself
        return _feature_dropout(input, p, training, True, lead=1)
    return _feature_dropout(input.unsqueeze(0), p, training, False).squeeze(0)


def dropout2d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of ``(N, C, H, W)`` input (3-D input: of ``(N, C, L)``, as torch)."""
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and "
            "will result in an error in a future release. To retain the behavior and silence "
            "this warning, please use dropout instead. Note that dropout2d exists to provide "
            "channel-wise dropout on inputs with 2 spatial dimensions, a channel dimension, and "
            "an optional batch dimension (i.e. 3D or 4D inputs).",
            stacklevel=2,
        )
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2,
        )
    return _feature_dropout(input, p, training, inplace)
