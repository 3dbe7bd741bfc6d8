"""The backward walk of ``create_graph=True``: gradients are Tensors and the formulas record.

The same dependency-counted walk as ``_engine._drain`` (most recent ready node first, leaves
first of all), run with grad mode on, as torch runs it. Each node computes its input gradients
with :meth:`Node.backward_graph`, which uses public hookgrad ops, so the gradients have a
``grad_fn`` and can be differentiated again. A node without such a formula raises a
RuntimeError naming it rather than hand on a gradient cut off from the graph. Kept apart from
``_drain`` so that the usual numpy walk pays nothing for it.

Hooks see what torch's see under ``create_graph``: Tensors that require grad. Their results
are checked by the same checks as in the numpy walk (``_hook_calls.checked_hook_result``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import _hook_calls
from .graph import AccumulateGrad, Node, NodeHooks

if TYPE_CHECKING:
    from .._tensor import Tensor
    from ._engine import _GraphTask

Grads = list["Tensor | None"]


def drain_graph(task: _GraphTask, ready: list[tuple[int, int, Node]]) -> None:
    """Run every ready node in ``_drain``'s order, with Tensor gradients, capturing and
    running hooks where ``_drain`` does."""
    from ._engine import _capture  # the engine imports this module

    buffers, deps, needed, captures = task.buffers, task.deps, task.needed, task.captures
    counter = 0
    while ready:
        node = heapq.heappop(ready)[2]
        grads: Grads = buffers.pop(node)  # type: ignore[assignment]
        hooks = node._hooks
        if needed is not None and node not in needed:
            # autograd.grad captures here without running the node: its tensor hooks only
            if captures is not None and any((node, nr) in captures for nr in range(len(grads))):
                if hooks is not None:
                    grads = _run_pre_hooks(hooks, grads, node_hooks=False)
                _capture(captures, node, grads)  # type: ignore[arg-type]
            continue
        if captures is not None:  # a node that runs: torch captures before its hooks
            _capture(captures, node, grads)  # type: ignore[arg-type]
        if hooks is not None:
            grads = _run_pre_hooks(hooks, grads)
        if type(node) is AccumulateGrad:
            if captures is None:
                _accumulate(node.variable, grads[0])
                if hooks is not None and hooks.post:
                    _run_post_hooks(hooks, (), grads)
            continue
        outputs = _compute(node, grads)
        if hooks is not None and hooks.post:
            outputs = _run_post_hooks(hooks, outputs, grads)
        if not task.retain_graph and node._saved_fields:
            node._release()
        for edge, grad in zip(node._next, outputs):
            if edge is None:
                continue
            child, nr = edge
            deps[child] -= 1
            buffer = buffers.get(child)
            if buffer is None:
                buffer = buffers[child] = [None] * child._n_out
            if grad is not None:
                current = buffer[nr]
                buffer[nr] = grad if current is None else current + grad  # type: ignore[assignment]
            if deps[child] == 0:
                counter += 1
                heapq.heappush(ready, (-child._seq, counter, child))


def _compute(node: Node, grads: Grads) -> Sequence[Tensor | None]:
    """``_engine._compute`` for Tensor gradients: the same checks, then the recorded formula."""
    from ._engine import _FREED_MESSAGE, _modified_message

    if node._freed and node._saved_fields:
        raise RuntimeError(_FREED_MESSAGE)
    for tensor, version in node._versions:
        if tensor._vbox[0] != version:
            raise RuntimeError(_modified_message(tensor, version))
    if not node._materialize and all(g is None for g in grads):
        return (None,) * len(node._next)
    return node.backward_graph(grads)


def _accumulate(variable: Tensor, grad: Tensor | None) -> None:
    """torch's AccumulateGrad under grad mode: ``.grad`` becomes a graph-connected Tensor
    (a clone the first time, then ``.grad + grad`` out of place), then post hooks."""
    if grad is None:
        return
    if grad._data.dtype != variable._data.dtype:
        grad = grad.to(variable._data.dtype)
    current = variable._grad
    variable._grad = grad.clone() if current is None else current + grad
    post = variable._post_acc_hooks
    if post:
        _hook_calls.run_post_accumulate_hooks(variable, post)


def _checked(hook: Callable[..., Any], value: Any, like: Tensor | None) -> Tensor:
    """A hook's replacement gradient, checked as in the numpy walk; the Tensor itself kept."""
    name = _hook_calls._hook_name(hook)
    if like is None:
        _hook_calls.checked_hook_result(name, value, None, None)
    else:
        _hook_calls.checked_hook_result(name, value, like._data.shape, like._data.dtype)
    return value


def _run_tensor_hooks(hooks: tuple[Callable[..., Any], ...], grad: Tensor | None) -> Any:
    for hook in hooks:
        result = hook(grad)
        if result is not None:
            grad = _checked(hook, result, grad)
    return grad


def _run_pre_hooks(hooks: NodeHooks, grads: Grads, node_hooks: bool = True) -> Grads:
    """Tensor hooks, then retain_grad, then (``node_hooks``) the node's pre-hooks
    (``run_pre_hooks``' order)."""
    for nr, table in tuple(hooks.tensor_pre.items()):
        grads[nr] = _run_tensor_hooks(table.hooks, grads[nr])
    for nr, tensor in tuple(hooks.retains_grad.items()):
        grad = grads[nr]
        if grad is not None:
            current = tensor._grad
            tensor._grad = grad.clone() if current is None else current + grad
    for hook in tuple(hooks.pre.values()) if node_hooks else ():
        result = hook(tuple(grads))
        if result is not None:
            grads = _replace_all(hook, result, grads)
    return grads


def _run_post_hooks(
    hooks: NodeHooks, outputs: Sequence[Tensor | None], grads: Grads
) -> Sequence[Tensor | None]:
    grad_outputs = tuple(grads)
    current = list(outputs)
    for hook in tuple(hooks.post.values()):
        result = hook(tuple(current), grad_outputs)
        if result is not None:
            current = _replace_all(hook, result, current)
    return current


def _replace_all(hook: Callable[..., Any], result: Any, current: Sequence[Tensor | None]) -> Grads:
    if len(result) != len(current):
        raise RuntimeError(
            f"hook {_hook_calls._hook_name(hook)!r} has returned an incorrect number of values "
            f"(got {len(result)}, but expected {len(current)})"
        )
    replaced: Grads = []
    for old, new in zip(current, result):
        if new is not None and old is None:
            raise RuntimeError("can't replace a None gradient with a non-None value")
        replaced.append(None if new is None else _checked(hook, new, old))
    return replaced
