"""Calling the hooks stored on graph nodes and leaf tensors during backward.

Each table is snapshotted before iterating (SEMANTICS H-5): a hook that adds or removes hooks
changes the next pass, not this one. Gradients are wrapped into Tensors for the hook and
unwrapped after, and every replacement is checked as PyTorch checks it (T-8).

One runner for both walks: the numpy walk (``_engine._drain``) hands arrays, the
``create_graph`` walk (``_graph_backward``) hands Tensors, which hooks see as they are and
whose replacements are kept as Tensors (still on the graph).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._dtype import scalar_type_name
from .._tensor import Tensor, _wrap

if TYPE_CHECKING:
    from .graph import Node, NodeHooks


def _as_tensor(grad: Any) -> Tensor | None:
    """What a hook sees of a gradient: the array wrapped, or the create_graph walk's Tensor."""
    if grad is None or isinstance(grad, Tensor):
        return grad
    return _wrap(grad)


def _hook_name(hook: Callable[..., Any]) -> str:
    return getattr(hook, "__name__", type(hook).__name__)


def check_same_type(hook_name: str, data: np.ndarray, like_dtype: np.dtype[Any]) -> None:
    """A hook's replacement must keep the gradient's dtype: torch's RuntimeError otherwise."""
    if data.dtype != like_dtype:
        raise RuntimeError(
            f"hook {hook_name!r} has changed the type of value (was "
            f"hookgrad.{scalar_type_name(like_dtype)}Tensor got "
            f"hookgrad.{scalar_type_name(data.dtype)}Tensor)"
        )


def _checked_replacement(
    hook: Callable[..., Any], value: Any, like: np.ndarray | None
) -> np.ndarray:
    """Validate a tensor hook's return value as PyTorch does and return its array (the
    Tensor itself when the gradient replaced is one: the create_graph walk)."""
    if like is None:
        return checked_hook_result(_hook_name(hook), value, None, None)
    if isinstance(like, Tensor):
        checked_hook_result(_hook_name(hook), value, like._data.shape, like._data.dtype)
        return value
    return checked_hook_result(_hook_name(hook), value, like.shape, like.dtype)


def checked_hook_result(
    name: str, value: Any, shape: tuple[int, ...] | None, dtype: np.dtype[Any] | None
) -> np.ndarray:
    """The array of a gradient a hook returned, checked as torch's engine checks it (T-8).

    A non-tensor is a TypeError; a tensor of another dtype, then of another shape, than the
    gradient it replaces (``shape``/``dtype``; None when that gradient was None) a
    RuntimeError with torch's text. Module backward hooks are checked here too, under torch's
    name ``'hook'``.
    """
    if not isinstance(value, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(value).__name__}'")
    data = value._data
    if dtype is not None:
        check_same_type(name, data, dtype)
    if shape is not None and data.shape != shape:
        raise RuntimeError(
            f"hook {name!r} has changed the size of value "
            f"(expected {list(shape)}, got {list(data.shape)})"
        )
    return data


def run_pre_hooks(
    node: Node, hooks: NodeHooks, grads: list[np.ndarray | None]
) -> list[np.ndarray | None]:
    """Tensor hooks, then retain_grad, then the node's own pre-hooks (torch's call order).

    ``grads`` is the engine's buffer for this node, already taken out of the graph task, so
    it is updated in place. Tensor hooks run in registration order, each seeing the previous
    one's result (T-6). A one-output node with tensor hooks only (a hooked parameter, the
    usual case) goes straight to :func:`run_tensor_hooks`.
    """
    tensor_pre = hooks.tensor_pre
    if len(grads) == 1 and tensor_pre and not hooks.retains_grad and not hooks.pre:
        grads[0] = run_tensor_hooks(tensor_pre[0].hooks, grads[0])
        return grads
    grads = run_tensor_pre_hooks(hooks, grads)
    if hooks.pre:
        for hook in tuple(hooks.pre.values()):
            result = hook(tuple(_as_tensor(g) for g in grads))
            if result is not None:
                grads = _replace_all(hook, result, grads)
    return grads


def run_tensor_pre_hooks(
    hooks: NodeHooks, grads: list[np.ndarray | None]
) -> list[np.ndarray | None]:
    """The tensor hooks of each output, then retain_grad: what torch runs of a node whose
    gradient ``autograd.grad`` captures without running the node."""
    if hooks.tensor_pre:
        for nr, table in tuple(hooks.tensor_pre.items()):  # a hook may add a table
            grads[nr] = run_tensor_hooks(table.hooks, grads[nr])
    if hooks.retains_grad:
        for nr, tensor in tuple(hooks.retains_grad.items()):
            _retain(tensor, grads[nr])
    return grads


def run_tensor_hooks(hooks: tuple[Callable[..., Any], ...], grad: Any) -> Any:
    """Each hook of one output's snapshot (H-5) sees the previous one's result (T-6)."""
    for hook in hooks:
        result = hook(_as_tensor(grad))
        if result is not None:
            grad = _checked_replacement(hook, result, grad)
    return grad


def _retain(tensor: Tensor, grad: Any) -> None:
    if grad is None:
        return
    if isinstance(grad, Tensor):  # create_graph: .grad stays on the graph, as torch's
        tensor._grad = grad.clone() if tensor._grad is None else tensor._grad + grad
        return
    if tensor._grad is None:
        tensor._grad = _wrap(np.array(grad, copy=True))
    else:
        tensor._grad = _wrap(tensor._grad._data + grad)


def run_post_hooks(
    node: Node,
    hooks: NodeHooks,
    outputs: Sequence[np.ndarray | None],
    grads: Sequence[np.ndarray | None],
) -> tuple[np.ndarray | None, ...]:
    """Node hooks ``hook(grad_inputs, grad_outputs)``; a non-None return replaces grad_inputs."""
    grad_outputs = tuple(_as_tensor(g) for g in grads)
    current = list(outputs)
    for hook in tuple(hooks.post.values()):
        result = hook(tuple(_as_tensor(g) for g in current), grad_outputs)
        if result is not None:
            current = _replace_all(hook, result, current)
    return tuple(current)


def _replace_all(
    hook: Callable[..., Any],
    result: Any,
    current: Sequence[np.ndarray | None],
) -> list[np.ndarray | None]:
    """A node hook's replacement of all its gradients, checked as torch checks it."""
    if len(result) != len(current):
        raise RuntimeError(
            f"hook {_hook_name(hook)!r} has returned an incorrect number of values "
            f"(got {len(result)}, but expected {len(current)})"
        )
    replaced: list[np.ndarray | None] = []
    for old, new in zip(current, result):
        if new is not None and old is None:
            raise RuntimeError("can't replace a None gradient with a non-None value")
        replaced.append(None if new is None else _checked_replacement(hook, new, old))
    return replaced


def run_post_accumulate_hooks(tensor: Tensor, hooks: dict[int, Callable[..., Any]]) -> None:
    """Post-accumulate hooks receive the leaf itself and must return None (T-9).

    As in torch, returning the tensor itself is tolerated, a non-tensor is a TypeError and
    any other tensor a RuntimeError; either way ``.grad`` was already updated.
    """
    for hook in tuple(hooks.values()):
        result = hook(tensor)
        if result is None or result is tensor:
            continue
        if not isinstance(result, Tensor):
            raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
        raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def capture_unneeded(captures: dict[Any, Any], node: Node, grads: list[Any]) -> None:
    """Capture for ``autograd.grad`` at a node that does not run: torch runs the tensor hooks
    (and retain_grad) of its captured outputs first, never the node's own hooks."""
    if not any((node, nr) in captures for nr in range(len(grads))):
        return
    hooks = node._hooks
    if hooks is not None:
        grads = run_tensor_pre_hooks(hooks, grads)
    capture(captures, node, grads)


def capture(captures: dict[Any, Any], node: Node, grads: list[Any]) -> None:
    """Keep the gradients reaching the captured outputs of ``node`` (``autograd.grad``)."""
    for nr, grad in enumerate(grads):
        if (node, nr) in captures:
            captures[(node, nr)] = grad
