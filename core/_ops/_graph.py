"""Plumbing for the recorded backward formulas of ``create_graph=True`` (``Node.backward_graph``).

A node keeps the arrays its numpy formula reads. The recorded formula needs them as Tensors
joined to the graph, so that the gradient can be differentiated with respect to them too:
torch's ``SavedVariable.unpack()``. An input becomes a Tensor on the node's edge for it (the
leaf itself for a leaf), a saved output a Tensor whose ``grad_fn`` is the node itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._base import AccumulateGrad, Node, Tensor, edge, needs_grad, record, wrap

__all__ = [
    "LinearGradBackward",
    "SelectGradBackward",
    "SgnBackward0",
    "expand_back",
    "kept",
    "linear_grad",
    "only",
    "saved_input",
    "saved_output",
    "saved_tensor",
    "select_grad",
    "sign_of",
    "sum_to_tensor",
]


def saved_input(node: Node, index: int, data: np.ndarray) -> Tensor:
    """Input ``index`` of ``node``, whose array at forward time is ``data``, as a Tensor on the
    graph (a constant when that input needs no gradient)."""
    edge = node._next[index]
    if edge is None:
        return wrap(data)
    producer, nr = edge
    if type(producer) is AccumulateGrad and producer.variable._data is data:
        return producer.variable
    # a value from a saved-tensor unpack hook: its data, at the input's place in the graph
    return _on_graph(data, producer, nr)


def saved_tensor(node: Node, index: int) -> Tensor:
    """Tensor ``index`` of those ``node`` version-checks (``Node._save``): the input itself,
    for formulas whose node keeps no array of it."""
    return node._versions[index][0]


def saved_output(node: Node, data: np.ndarray, nr: int = 0) -> Tensor:
    """Output ``nr`` of ``node`` (a value its formula reads) as a Tensor on the graph."""
    return _on_graph(data, node, nr)


def _on_graph(data: np.ndarray, grad_fn: Node, nr: int) -> Tensor:
    t = wrap(data)
    t._requires_grad = True
    t.grad_fn = grad_fn
    t._output_nr = nr
    return t


def sum_to_tensor(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``_base.sum_to`` for a recorded gradient: undo broadcasting with Tensor ops."""
    have = grad._data.shape
    if have == shape:
        return grad
    lead = len(have) - len(shape)
    dims = tuple(range(lead)) + tuple(
        lead + i for i, size in enumerate(shape) if size == 1 and have[lead + i] != 1
    )
    summed = grad.sum(dim=dims, keepdim=True) if dims else grad
    return summed.reshape(shape)


def only(grads: list[Tensor | None]) -> Tensor:
    """The gradient of a one-output node (never None: the walk skips nodes that get none)."""
    grad = grads[0]
    assert grad is not None
    return grad


def expand_back(grad: Tensor, shape: tuple[int, ...], dims: tuple[int, ...]) -> Tensor:
    """A reduction's gradient broadcast back over the input ``shape`` (``dims`` reduced)."""
    kept = tuple(1 if i in dims else size for i, size in enumerate(shape))
    return grad.reshape(kept).expand(shape) if shape else grad.reshape(())


def kept(value: Tensor, shape: tuple[int, ...], dims: tuple[int, ...]) -> Tensor:
    """A reduction's output with its reduced ``dims`` kept as size 1, to broadcast."""
    return value.reshape(tuple(1 if i in dims else size for i, size in enumerate(shape)))


class LinearGradBackward(Node):
    """The node of a gradient that is a linear map of the incoming one and reads no input
    (scattering into zeros for indexing, max along a dim): its own gradient is the adjoint
    map, which is the forward op itself, given as a Tensor function. Named as torch names
    such nodes (``SliceBackward0`` -> ``SliceBackwardBackward0``)."""

    __slots__ = ("_adjoint", "_origin")

    _adjoint: Callable[[Tensor], Tensor]
    _origin: str

    def name(self) -> str:
        return self._origin.removesuffix("0") + "Backward0"

    def backward(self, grad: Any) -> tuple[np.ndarray | None, ...]:
        return (self._adjoint(wrap(grad))._data,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (self._adjoint(only(grads)),)


def linear_grad(
    origin: Node, grad: Tensor, value: np.ndarray, adjoint: Callable[[Tensor], Tensor]
) -> Tensor:
    """``value`` (``origin``'s numpy formula applied to ``grad``) as a recorded gradient."""
    if not needs_grad(grad):
        return wrap(value)
    node = LinearGradBackward((edge(grad),))
    node._adjoint = adjoint
    node._origin = origin.name()
    return record(value, node)


class _ReadsOnlyForMaskBackward(Node):
    """Base of the gradient nodes that read a saved value only to decide where the incoming
    gradient passes: their derivative with respect to that value is zero, but (as torch's
    ``ThresholdBackwardBackward0``, ``SgnBackward0``...) they stay on its graph, so a second
    gradient through them alone is zeros rather than an error."""

    __slots__ = ("_anchor", "_origin")

    _anchor: Tensor
    _origin: str

    def name(self) -> str:
        return self._origin

    def _zeros(self) -> np.ndarray:
        return np.zeros_like(self._anchor._data)


class SelectGradBackward(_ReadsOnlyForMaskBackward):
    """``where(keep, g, g * other)`` (``other`` 0 selects, so NaN stays out): relu's and
    leaky_relu's gradient. Edges: the incoming gradient, then the saved value."""

    __slots__ = ("_keep", "_other")

    _keep: np.ndarray
    _other: float

    def backward(self, grad: Any) -> tuple[np.ndarray | None, ...]:
        other = grad.dtype.type(0) if self._other == 0 else grad * self._other
        return (np.where(self._keep, grad, other), self._zeros())

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        grad = only(grads)
        again = select_grad(self._origin, grad, self._keep, self._other, self._anchor)
        return (again, wrap(self._zeros()))


def select_grad(
    origin: str, grad: Tensor, keep: np.ndarray, other: float, anchor: Tensor
) -> Tensor:
    """``where(keep, grad, grad * other)`` recorded as a node of ``grad`` and ``anchor``,
    named ``origin`` (torch's name for it)."""
    from .arith import where

    value = where(wrap(keep), grad, 0 if other == 0 else grad * other)
    if not needs_grad(grad, anchor):
        return value
    node = SelectGradBackward((edge(grad), edge(anchor)))
    node._keep, node._other, node._anchor, node._origin = keep, other, anchor, origin
    return record(value._data, node)


class SgnBackward0(_ReadsOnlyForMaskBackward):
    """``sign(anchor)``, whose derivative is zero (torch records it all the same)."""

    __slots__ = ()

    def backward(self, grad: Any) -> tuple[np.ndarray | None, ...]:
        return (self._zeros(),)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (wrap(self._zeros()),)


def sign_of(anchor: Tensor) -> Tensor:
    """``sign(anchor)`` on ``anchor``'s graph with a zero derivative, as torch's ``sgn`` (0 at
    NaN, the one sign every formula uses)."""
    from .unary import sgn  # unary builds on this module

    value = sgn(anchor._data)
    if not needs_grad(anchor):
        return wrap(value)
    node = SgnBackward0((edge(anchor),))
    node._anchor, node._origin = anchor, "SgnBackward0"
    return record(value, node)
