"""Automatic differentiation, as ``torch.autograd``: backward, grad, Function, gradcheck."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .._tensor import Tensor, _wrap
from ..utils._warnings import is_warn_always_enabled, warn_unless_ignored
from . import functional, graph
from ._engine import run_backward
from ._observers import BACKWARD_OBSERVERS, notify_begin, notify_end
from .function import Function, FunctionCtx
from .gradcheck import gradcheck
from .variable import Variable

__all__ = [
    "Function",
    "FunctionCtx",
    "Variable",
    "backward",
    "enable_grad",
    "functional",
    "grad",
    "gradcheck",
    "graph",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
]


def _as_list(value: Tensor | Sequence[Any] | None) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, Tensor):
        return [value]
    return list(value)


def _root_edge(t: Tensor) -> tuple[Any, int]:
    from .._ops._base import edge

    root = edge(t)  # a view whose base was written in place since gets its new history first
    if root is None:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    return root


def _seed(t: Tensor, gradient: Any, index: int) -> np.ndarray:
    if gradient is None:
        if t._data.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        return np.ones(t._data.shape, dtype=t._data.dtype)
    data = (
        gradient._data
        if isinstance(gradient, Tensor)
        else np.asarray(gradient, dtype=t._data.dtype)
    )
    if data.shape != t._data.shape:
        raise RuntimeError(
            f"Mismatch in shape: grad_output[{index}] has a shape of "
            f"hookgrad.Size({list(data.shape)}) and output[{index}] has a shape of "
            f"hookgrad.Size({list(t._data.shape)})."
        )
    # The caller owns this array; the engine may store a gradient into .grad, so copy it.
    return np.array(data, copy=True)


def _non_empty(inputs: Tensor | Sequence[Tensor], caller: str) -> list[Tensor]:
    """``inputs`` as a list; torch refuses an empty one rather than differentiating nothing."""
    listed = _as_list(inputs)
    if not listed:
        raise RuntimeError(f"`inputs` argument to `{caller}()` cannot be empty.")
    return listed


_CYCLE_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this. If you have to use this function, "
    "make sure to reset the .grad fields of your parameters to None after use to break the "
    "cycle and avoid the leak."
)
# torch gives that warning once per process (TORCH_WARN_ONCE), every time under
# set_warn_always(True).
_cycle_warned = False


def _warn_cycle_once() -> None:
    global _cycle_warned
    if not _cycle_warned or is_warn_always_enabled():
        _cycle_warned = True
        warn_unless_ignored(_CYCLE_WARNING, UserWarning)


def _graph_seed(t: Tensor, gradient: Any, index: int) -> Tensor:
    """The seed of a ``create_graph`` backward: a Tensor, the caller's own when it is one
    (its graph carries on into the gradients, as in torch)."""
    seed = _seed(t, gradient, index)  # checks the shape
    return gradient if isinstance(gradient, Tensor) else _wrap(seed)


def _seeds(outputs: list[Tensor], seeds: list[Any], create_graph: bool) -> list[Any]:
    make = _graph_seed if create_graph else _seed
    return [make(t, g, i) for i, (t, g) in enumerate(zip(outputs, seeds))]


def backward(
    tensors: Tensor | Sequence[Tensor],
    grad_tensors: Tensor | Sequence[Any] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the graph's leaves.

    hookgrad only: observers registered with ``register_backward_observer`` (the runtime's
    ``hookgrad_backward_begin`` / ``hookgrad_backward_end``) are told before the walk, after
    the roots were checked, and may replace the seeds; and after the walk if it did not raise.
    """
    outputs = _as_list(tensors)
    seeds = _as_list(grad_tensors) or [None] * len(outputs)
    roots = [_root_edge(t) for t in outputs]
    observed = bool(BACKWARD_OBSERVERS)
    if observed:
        seeds = notify_begin(outputs, seeds)
    arrays = _seeds(outputs, seeds, create_graph)
    input_edges = None
    if inputs is not None:
        listed = _non_empty(inputs, "backward")
        input_edges = [_root_edge(t) for t in listed]
        for t in listed:  # as torch: a non-leaf input's gradient lands in its .grad
            if t.grad_fn is not None:
                t.retain_grad()
    if retain_graph is None:
        retain_graph = create_graph
    if create_graph:
        _warn_cycle_once()
    run_backward(
        roots, arrays, retain_graph=retain_graph, inputs=input_edges, create_graph=create_graph
    )
    if observed:
        notify_end(outputs)


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Tensor | Sequence[Any] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """Return the gradients of ``outputs`` with respect to ``inputs`` without touching ``.grad``.

    Backward observers (``hookgrad_backward_begin`` / ``_end``) are not notified: nothing is
    accumulated. ``only_inputs`` is accepted and ignored as in torch (which warns when it is
    False); ``is_grads_batched=True`` (vmap over ``grad_outputs``) is not supported.
    """
    if not only_inputs:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To "
            "accumulate gradient for other parts of the graph, please use "
            "torch.autograd.backward.",
            FutureWarning,
            stacklevel=2,
        )
    if is_grads_batched:
        raise NotImplementedError("torch.autograd.grad(is_grads_batched=True) is not supported")
    outs = _as_list(outputs)
    ins = _non_empty(inputs, "grad")
    seeds = _as_list(grad_outputs) or [None] * len(outs)
    roots = [_root_edge(t) for t in outs]
    arrays = _seeds(outs, seeds, create_graph)
    for i, t in enumerate(ins):
        if not t._requires_grad:
            raise RuntimeError(
                f"One of the differentiated Tensors (input {i}) does not require grad"
            )
    edges = [_root_edge(t) for t in ins]
    if retain_graph is None:
        retain_graph = create_graph
    found = run_backward(
        roots,
        arrays,
        retain_graph=retain_graph,
        inputs=edges,
        accumulate=False,
        create_graph=create_graph,
    )
    results: list[Tensor | None] = []
    for i, (t, g) in enumerate(zip(ins, found)):
        if g is None:
            if materialize_grads:
                g = np.zeros_like(t._data)
            elif not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior."
                )
        if g is None or isinstance(g, Tensor):  # create_graph: the recorded gradient itself
            results.append(g)
        else:
            results.append(_wrap(np.array(g, copy=True)))
    return tuple(results)
