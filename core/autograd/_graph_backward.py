"""The backward walk of ``create_graph=True``: gradients are Tensors and the formulas record.

The same dependency-counted walk as ``_engine._drain`` (most recent ready node first, leaves
first of all), run with grad mode on, as torch runs it. Each node computes its input gradients
with :meth:`Node.backward_graph`, which uses public hookgrad ops, so the gradients have a
``grad_fn`` and can be differentiated again. A node without such a formula raises a
RuntimeError naming it rather than hand on a gradient cut off from the graph. Kept apart from
``_drain`` so that the usual numpy walk pays nothing for it.

Hooks see what torch's see under ``create_graph``: Tensors that require grad. They are run by
the numpy walk's own runner (``_hook_calls``), so both walks follow one set of hook rules.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import _hook_calls
from ._saved import unpack_node
from .graph import AccumulateGrad, Node

if TYPE_CHECKING:
    from .._tensor import Tensor
    from ._engine import _GraphTask

Grads = list["Tensor | None"]


def drain_graph(task: _GraphTask, ready: list[tuple[int, int, Node]]) -> None:
    """Run every ready node in ``_drain``'s order, with Tensor gradients and ``_drain``'s hook
    runner (``_hook_calls``): captures, tensor and node hooks, AccumulateGrad post-hooks."""
    buffers, deps, needed, captures = task.buffers, task.deps, task.needed, task.captures
    counter = 0
    while ready:
        node = heapq.heappop(ready)[2]
        grads: Grads = buffers.pop(node)  # type: ignore[assignment]
        if needed is not None and node not in needed:
            if captures is not None:
                _hook_calls.capture_unneeded(captures, node, grads)
            continue
        if captures is not None:  # a node that runs: torch captures before its hooks
            _hook_calls.capture(captures, node, grads)
        hooks = node._hooks
        if hooks is not None:
            grads = _hook_calls.run_pre_hooks(node, hooks, grads)  # type: ignore[arg-type, assignment]
        if type(node) is AccumulateGrad:
            if captures is None:
                _accumulate(node.variable, grads[0])
                if hooks is not None and hooks.post:
                    _hook_calls.run_post_hooks(node, hooks, (), grads)  # type: ignore[arg-type]
            continue
        outputs = _compute(node, grads)
        if hooks is not None and hooks.post:
            outputs = _hook_calls.run_post_hooks(node, hooks, outputs, grads)  # type: ignore[arg-type, assignment]
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
    if node._saved_fields and node._packed is not None:  # saved-tensor hooks hold its values
        unpack_node(node)
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
