"""Shared plumbing for ops: graph edges, result wrapping, broadcasting undone in one place."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._grad_mode import _state as grad_state
from .._tensor import Tensor, _wrap
from ..autograd.graph import AccumulateGrad, Node

__all__ = [
    "Node",
    "Tensor",
    "as_array",
    "edge",
    "grad_state",
    "needs_grad",
    "record",
    "sum_to",
    "wrap",
]

wrap = _wrap


def edge(t: Tensor) -> tuple[Node, int] | None:
    """The graph edge a gradient for ``t`` travels along, or None if ``t`` needs none."""
    fn = t.grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    if t._requires_grad:
        acc = t._acc
        if acc is None:
            acc = t._acc = AccumulateGrad(t)
        return (acc, 0)
    return None


def needs_grad(*tensors: Tensor) -> bool:
    """True when grad mode is on and some input requires grad: the op must record a node."""
    if not grad_state.enabled:
        return False
    for t in tensors:  # noqa: SIM110 - a plain loop beats any() with a generator here
        if t._requires_grad:
            return True
    return False


def record(data: np.ndarray, node: Node) -> Tensor:
    """Wrap ``data`` as the (only) output of ``node``."""
    out = _wrap(data)
    out._requires_grad = True
    out.grad_fn = node
    return out


def sum_to(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Undo broadcasting: sum ``grad`` down to ``shape``. The one place this happens."""
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, size in enumerate(shape) if size == 1 and grad.shape[lead + i] != 1
    )
    summed = grad.sum(axis=axes, keepdims=True) if axes else grad
    return summed.reshape(shape)


def as_array(value: Any, like: np.ndarray | None = None) -> np.ndarray:
    """Turn a Tensor, array or Python number into an array (for non-differentiable operands)."""
    if isinstance(value, Tensor):
        return value._data
    if like is not None and isinstance(value, (int, float, bool)):
        return np.asarray(value, dtype=like.dtype if like.dtype.kind == "f" else None)
    return np.asarray(value)
