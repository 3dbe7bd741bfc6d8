"""Custom differentiable operations, as ``torch.autograd.Function``.

``MyOp.apply(*args)`` runs ``forward(ctx, *args)`` without recording and puts one node in the
graph whose backward calls ``MyOp.backward(ctx, *grads)``. Missing output gradients arrive as
zeros unless ``ctx.set_materialize_grads(False)``. An input returned unchanged comes back as
a new tensor object (a view), and modifying it in place is an error (SEMANTICS B-14, B-15).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .._grad_mode import _state as grad_state
from .._ops._base import sum_to
from .._ops._graph import sum_to_tensor
from .._ops.inplace import rebase_history
from .._tensor import Tensor, _wrap
from ._view import CUSTOM, make_view
from .graph import Node

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

__all__ = ["Function", "FunctionCtx"]


class FunctionCtx:
    """The ``ctx`` passed to forward and backward: saved tensors and flags."""

    def __init__(self) -> None:
        self._saved: tuple[Tensor, ...] = ()
        # The saved tensors as saved-tensor hooks packed them (autograd._saved), if any were
        # pushed when the Function ran.
        self._packed: list[Any] | None = None
        self.needs_input_grad: tuple[bool, ...] = ()
        self.materialize_grads = True
        self.non_differentiable: set[int] = set()
        self.dirty: set[int] = set()

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        self._saved = tuple(tensors)  # type: ignore[arg-type]

    @property
    def saved_tensors(self) -> tuple[Tensor, ...]:
        """The tensors given to ``save_for_backward``; unpacked by their unpack hook (each
        read, as torch) when saved-tensor hooks packed them."""
        if self._packed is None:
            return self._saved
        return tuple(None if p is None else p.tensor() for p in self._packed)  # type: ignore[misc]

    @saved_tensors.setter
    def saved_tensors(self, tensors: tuple[Tensor, ...]) -> None:
        self._saved = tuple(tensors)

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors: Tensor) -> None:
        self.dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class FunctionBackward(Node):
    """The graph node of one ``Function.apply`` call."""

    __slots__ = (
        "_function",
        "_in_meta",
        "_is_tensor",
        "_materialize",
        "_n_out",
        "_out_meta",
        "ctx",
    )

    _function: type[Function]
    # Per apply() argument: whether it is a Tensor, i.e. has an edge and gets a gradient.
    _is_tensor: tuple[bool, ...]
    # (shape, dtype) of each Tensor argument: what its gradient must fit (torch's metadata).
    _in_meta: list[tuple[tuple[int, ...], np.dtype[Any]]]
    # Slots set per node from the ctx and the outputs, shadowing Node's class defaults.
    _materialize: bool
    _n_out: int
    # (shape, dtype) of each output, for the zeros that stand in for a missing gradient.
    _out_meta: list[tuple[tuple[int, ...], DTypeLike]]
    ctx: FunctionCtx

    _function_class: ClassVar[type[Function]]

    def backward_multi(self, grads: list[np.ndarray | None]) -> tuple[np.ndarray | None, ...]:
        if self._materialize:
            grads = [
                np.zeros(shape, dtype=dtype) if g is None else g
                for g, (shape, dtype) in zip(grads, self._out_meta)
            ]
        results = self._user_backward([None if g is None else _wrap(g) for g in grads])
        return tuple(
            _grad_array(self, i, r, meta) for i, (r, meta) in enumerate(zip(results, self._in_meta))
        )

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        """``create_graph=True``: the user's backward runs with grad mode on, as in torch, so
        the gradients it computes with hookgrad ops are recorded."""
        if self._materialize:
            grads = [
                _wrap(np.zeros(shape, dtype=dtype)) if g is None else g
                for g, (shape, dtype) in zip(grads, self._out_meta)
            ]
        results = self._user_backward(grads)
        checked = []
        for i, (r, meta) in enumerate(zip(results, self._in_meta)):
            _grad_array(self, i, r, meta)  # the checks only
            if r is not None:
                r = r if r._data.shape == meta[0] else sum_to_tensor(r, meta[0])
                r = r if r._data.dtype == meta[1] else r.to(meta[1])
            checked.append(r)
        return tuple(checked)

    def _user_backward(self, grads: list[Tensor | None]) -> list[Any]:
        """The user's ``backward`` results for the Tensor arguments, their count checked."""
        ctx = self.ctx
        results = self._function.backward(ctx, *grads)
        if not isinstance(results, tuple):
            results = (results,)
        n_inputs = len(ctx.needs_input_grad)
        if len(results) != n_inputs:
            if len(results) > n_inputs and all(r is None for r in results[n_inputs:]):
                results = results[:n_inputs]
            else:
                raise RuntimeError(
                    f"function {type(self).__name__} returned an incorrect number of gradients "
                    f"(expected {n_inputs}, got {len(results)})"
                )
        return [r for r, is_tensor in zip(results, self._is_tensor) if is_tensor]

    def backward(self, grad: Any) -> tuple[np.ndarray | None, ...]:
        return self.backward_multi([grad])


def _grad_array(
    node: Node, index: int, value: Any, meta: tuple[tuple[int, ...], np.dtype[Any]]
) -> np.ndarray | None:
    """A gradient ``backward`` returned, checked against its input as torch's engine does.

    A shape the input expands to is summed down to the input's shape; any other shape is a
    RuntimeError, as is a value that is not a Tensor; another dtype is cast to the input's.
    """
    if value is None:
        return None
    if not isinstance(value, Tensor):
        raise RuntimeError(
            f"function {type(node).__name__} returned a gradient of type "
            f"{type(value).__name__}: expected Variable or None (got {type(value).__name__})"
        )
    data = value._data
    shape, dtype = meta
    if data.shape != shape:
        if not _expands_to(shape, data.shape):
            raise RuntimeError(
                f"Function {type(node).__name__} returned an invalid gradient at index {index} "
                f"- got {list(data.shape)} but expected shape compatible with {list(shape)}"
            )
        data = sum_to(data, shape)
    return data if data.dtype == dtype else data.astype(dtype)


def _expands_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether an array of ``shape`` broadcasts to exactly ``target``."""
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(shape[::-1], target[::-1]))


_node_classes: dict[type, type[FunctionBackward]] = {}


def _node_class(function: type[Function]) -> type[FunctionBackward]:
    """One node class per Function, named ``<Function>Backward`` as torch names them."""
    cls = _node_classes.get(function)
    if cls is None:
        cls = type(f"{function.__name__}Backward", (FunctionBackward,), {"__slots__": ()})
        _node_classes[function] = cls
    return cls


class Function:
    """Base class for custom ops: implement static ``forward(ctx, ...)`` and ``backward(ctx, ...)``."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement the backward function for custom autograd.Function."
        )

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        from .._ops._base import edge
        from ._saved import pack_tensors

        ctx = FunctionCtx()
        is_tensor = tuple(isinstance(a, Tensor) for a in args)
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        recording = grad_state.enabled and any(ctx.needs_input_grad)
        previous = grad_state.enabled
        grad_state.enabled = False
        try:
            outputs = cls.forward(ctx, *args, **kwargs)
        finally:
            grad_state.enabled = previous
        if not recording:
            return outputs
        single = not isinstance(outputs, tuple)
        items = (outputs,) if single else outputs
        node_cls = _node_class(cls)
        node = node_cls(tuple(edge(a) for a in args if isinstance(a, Tensor)))
        node.ctx = ctx
        node._function = cls
        node._is_tensor = is_tensor
        node._in_meta = [(a._data.shape, a._data.dtype) for a in args if isinstance(a, Tensor)]
        ctx._packed = pack_tensors(ctx._saved)
        if ctx._packed is None:  # under hooks the hooks own the values: no version check
            node._save(*(t for t in ctx._saved if t is not None))
        node._materialize = ctx.materialize_grads
        node._n_out = len(items)
        node._out_meta = [
            (o._data.shape, o._data.dtype) if isinstance(o, Tensor) else ((), np.float32)
            for o in items
        ]
        inputs_by_id = {id(a): a for a in args if isinstance(a, Tensor)}
        wrapped = tuple(
            _attach(o, node, nr, inputs_by_id, ctx) if isinstance(o, Tensor) else o
            for nr, o in enumerate(items)
        )
        return wrapped[0] if single else wrapped


def _attach(
    out: Tensor, node: FunctionBackward, nr: int, inputs: dict[int, Tensor], ctx: FunctionCtx
) -> Tensor:
    if id(out) in ctx.non_differentiable:
        return out
    if out._data.dtype.kind != "f":
        return out
    source = inputs.get(id(out))
    differentiable_view = out._base is not None
    if source is not None and id(out) not in ctx.dirty:
        # An input returned as-is becomes a new view object of that input.
        out = make_view(_wrap(out._data), source, CUSTOM)
    elif source is not None and differentiable_view:  # a view input written in place
        rebase_history(out, node)
        return out
    elif differentiable_view:  # a view made inside forward
        out._view_kind = CUSTOM
    out._requires_grad = True
    out.grad_fn = node
    out._output_nr = nr
    return out
