"""The backward pass: a dependency-counted walk over the graph.

Among ready nodes the most recently created runs first (a max-heap on the sequence number),
and leaf accumulation runs as soon as its gradient is complete, which is what makes hook
order match PyTorch (SEMANTICS T-18). Gradients travel as numpy arrays; they are wrapped in
Tensors only when a hook must see them.

Two kinds of node skip the queue, because the queue would hand them out next anyway: a leaf
whose gradient just became complete (leaves outrank every other node; several made ready by
one node run in edge order, as the queue's tie-break would), and a hook-free pass-through
node (a module backward-hook wrapper) that the node just run made ready, unless a ready node
outranks it. Neither does when a node filter or a capture applies (``inputs=``,
``autograd.grad``).
"""

from __future__ import annotations

import heapq
import itertools
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING

import numpy as np

from .._dtype import scalar_type_name
from .._grad_mode import _state as _grad_state
from .._tensor import _wrap
from ..utils._warnings import first_frame_outside_hookgrad
from . import _hook_calls
from ._graph_backward import drain_graph
from ._saved import hooks_snapshot, restore_hooks, unpack_node
from .graph import AccumulateGrad, Node

if TYPE_CHECKING:
    from .._tensor import Tensor

Edge = tuple[Node, int]

_FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


class _RunningTasks(threading.local):
    """The backward calls under way in this thread, innermost last (hooks may nest backward)."""

    stack: list[_GraphTask]

    def __init__(self) -> None:
        self.stack = []


_running = _RunningTasks()


def current_graph_task() -> _GraphTask | None:
    """The backward call whose hooks are running now, or None outside backward."""
    stack = _running.stack
    return stack[-1] if stack else None


class _GraphTask:
    """State of one backward call: buffers, dependency counts, captured gradients."""

    __slots__ = (
        "_caller",
        "buffers",
        "captures",
        "deps",
        "id",
        "needed",
        "owned",
        "retain_graph",
    )

    _ids = itertools.count()

    def will_execute(self, node: Node) -> bool:
        """Whether ``node`` runs in this backward (torch's ``_will_engine_execute_node``)."""
        return node in self.deps and (self.needed is None or node in self.needed)

    def __init__(self, retain_graph: bool) -> None:
        self.retain_graph = retain_graph
        self.id = next(_GraphTask._ids)  # unique per backward call, as torch's graph task id
        self.buffers: dict[Node, list[np.ndarray | None]] = {}
        self.deps: dict[Node, int] = {}
        # Arrays already stored as some tensor's .grad in this pass: storing one twice would
        # alias two .grad tensors, so a second owner gets a copy.
        self.owned: dict[int, np.ndarray] = {}
        self.needed: set[Node] | None = None
        self.captures: dict[Edge, np.ndarray | None] | None = None
        self._caller: tuple[FrameType | None] | None = None  # (user frame,) once looked up

    def user_frame(self) -> FrameType | None:
        """The first frame outside hookgrad above this backward call (the user's
        ``loss.backward()``), where the engine's own warnings point.

        Found from the caller's frame at the first request, then kept for the rest of the
        call: a module call's warning (B-9) may come twice per backward, and the walk is most
        of its cost. Only for requests from the engine's own frames (no user code between the
        request and this backward call), for which every such walk ends at the same frame.
        """
        caller = self._caller
        if caller is None:
            caller = self._caller = (first_frame_outside_hookgrad(sys._getframe(1)),)
        return caller[0]


def run_backward(
    roots: Sequence[Edge],
    seeds: Sequence[np.ndarray],
    *,
    retain_graph: bool,
    inputs: Sequence[Edge] | None = None,
    accumulate: bool = True,
    create_graph: bool = False,
) -> list[np.ndarray | None]:
    """Propagate ``seeds`` from the ``roots`` edges back through the graph.

    With ``inputs``, only the part of the graph leading to those edges runs. When
    ``accumulate`` is False (``autograd.grad``) the gradients reaching ``inputs`` are returned
    instead of being accumulated into ``.grad``. With ``create_graph`` the seeds and the
    gradients are Tensors and the backward formulas record (``_graph_backward``).
    """
    task = _GraphTask(retain_graph)
    _count_dependencies(task, roots)
    if inputs is not None:
        # backward(inputs=) runs the inputs' own nodes; autograd.grad only captures what
        # reaches them, running just their tensor hooks (torch's exec_info "needed_").
        task.needed = _needed_nodes(task, roots, inputs, targets_run=accumulate)
        if not accumulate:
            task.captures = dict.fromkeys(inputs)
    ready: list[tuple[int, int, Node]] = []
    previous_mode = _grad_state.enabled
    # Hooks and formulas run without recording (T-16), unless asked to (create_graph).
    _grad_state.enabled = create_graph
    _running.stack.append(task)
    saved_hooks = hooks_snapshot()
    try:
        # Non-finite gradients are data here, not an error: torch stays silent, so does numpy.
        with np.errstate(all="ignore"):
            _seed_roots(task, ready, roots, seeds)
            if create_graph:
                drain_graph(task, ready)
            else:
                _drain(task, ready)
    finally:
        _running.stack.pop()
        _grad_state.enabled = previous_mode
        restore_hooks(saved_hooks)
    if task.captures is None:
        return []
    return [task.captures[edge] for edge in inputs or ()]


def _seed_roots(
    task: _GraphTask,
    ready: list[tuple[int, int, Node]],
    roots: Sequence[Edge],
    seeds: Sequence[np.ndarray],
) -> None:
    """Play the graph root: deliver each seed to its root edge."""
    buffers, deps = task.buffers, task.deps
    for (node, nr), seed in zip(roots, seeds):
        buffer = buffers.get(node)
        if buffer is None:
            buffer = buffers[node] = [None] * node._n_out
        current = buffer[nr]
        buffer[nr] = seed if current is None else current + seed
        deps[node] -= 1
        if deps[node] == 0:
            heapq.heappush(ready, (-node._seq, -len(ready), node))


def _drain(task: _GraphTask, ready: list[tuple[int, int, Node]]) -> None:
    """The main loop. Deliberately one function: it runs once per node of every backward."""
    buffers, deps, needed = task.buffers, task.deps, task.needed
    retain = task.retain_graph
    heappop, heappush = heapq.heappop, heapq.heappush
    run_pre_hooks = _hook_calls.run_pre_hooks
    counter = 0
    # Whether nodes may skip the queue (module docstring).
    shortcut = needed is None and task.captures is None
    while ready:
        node = heappop(ready)[2]
        grads = buffers.pop(node)
        if needed is not None and node not in needed:
            if task.captures is not None:
                _hook_calls.capture_unneeded(task.captures, node, grads)
            continue
        if task.captures is not None:  # a node that runs: torch captures before its hooks
            _hook_calls.capture(task.captures, node, grads)
        hooks = node._hooks
        if hooks is not None:
            grads = run_pre_hooks(node, hooks, grads)
        if type(node) is AccumulateGrad:
            if task.captures is None:
                _accumulate(task, node.variable, grads[0])
                if hooks is not None and hooks.post:
                    _hook_calls.run_post_hooks(node, hooks, (), grads)
            continue
        outputs = node.backward_multi(grads) if node._plain_identity else _compute(node, grads)
        if hooks is not None and hooks.post:
            outputs = _hook_calls.run_post_hooks(node, hooks, outputs, grads)
        if not retain and node._saved_fields:  # nothing saved, nothing to free or to misuse
            node._release()
        while True:
            # A hook-free pass-through child this node alone made ready (``after``), fed at
            # ``after_nr`` with ``after_grad``.
            after = None
            for edge, grad in zip(node._next, outputs):
                if edge is None:
                    continue
                child, nr = edge
                remaining = deps[child] - 1
                deps[child] = remaining
                if remaining == 0 and shortcut:
                    if type(child) is AccumulateGrad:
                        # A complete leaf gradient outranks every other node: the queue would
                        # run this leaf next, after the leaves before it here. So do it now.
                        buffer = buffers.pop(child, None)
                        if buffer is not None and buffer[0] is not None:
                            grad = buffer[0] if grad is None else buffer[0] + grad
                        _accumulate_leaf(task, child, grad)
                        continue
                    if (
                        after is None
                        and child._plain_identity
                        and child._hooks is None
                        and child not in buffers
                    ):
                        after, after_nr, after_grad = child, nr, grad
                        continue
                buffer = buffers.get(child)
                if buffer is None:
                    buffer = buffers[child] = [None] * child._n_out
                if grad is not None:
                    current = buffer[nr]
                    buffer[nr] = grad if current is None else current + grad
                if remaining == 0:
                    counter += 1
                    heappush(ready, (-child._seq, counter, child))
            if after is None:
                break
            # E.g. a Linear's input wrapper, just after the Linear's leaves: the next node run
            # unless a ready one outranks it.
            if after._n_out == 1:
                grads = [after_grad]
            else:
                grads = [None] * after._n_out
                grads[after_nr] = after_grad
            if ready and ready[0][0] < -after._seq:
                buffers[after] = grads
                counter += 1
                heappush(ready, (-after._seq, counter, after))
                break
            node = after
            outputs = node.backward_multi(grads)


def _accumulate_leaf(task: _GraphTask, leaf: AccumulateGrad, grad: np.ndarray | None) -> None:
    """Run a leaf's node as the main loop would: its pre-hooks, accumulation, post-hooks."""
    hooks = leaf._hooks
    if hooks is None:
        _accumulate(task, leaf.variable, grad)
        return
    # run_pre_hooks' own shortcut with run_tensor_hooks inlined, two frames less: every
    # hooked parameter comes this way (a no-op hook per parameter: -0.5% a step).
    tensor_pre = hooks.tensor_pre
    if tensor_pre and not hooks.retains_grad and not hooks.pre:
        for hook in tensor_pre[0].hooks:
            result = hook(None if grad is None else _wrap(grad))
            if result is not None:
                grad = _hook_calls._checked_replacement(hook, result, grad)
    else:
        grad = _hook_calls.run_pre_hooks(leaf, hooks, [grad])[0]
    _accumulate(task, leaf.variable, grad)
    if hooks.post:  # AccumulateGrad post-hooks: hook((), (grad,)), after post-accumulate hooks
        _hook_calls.run_post_hooks(leaf, hooks, (), [grad])


def _count_dependencies(task: _GraphTask, roots: Sequence[Edge]) -> None:
    deps = task.deps
    stack = []
    for node, _ in roots:
        if node not in deps:
            deps[node] = 0
            stack.append(node)
        deps[node] += 1
    while stack:
        for edge in stack.pop()._next:
            if edge is None:
                continue
            child = edge[0]
            count = deps.get(child)
            if count is None:
                deps[child] = 1
                stack.append(child)
            else:
                deps[child] = count + 1


def _needed_nodes(
    task: _GraphTask, roots: Sequence[Edge], inputs: Sequence[Edge], *, targets_run: bool
) -> set[Node]:
    """Nodes from which some input edge is reachable: the only ones worth executing.

    Without ``targets_run`` an input's own node is needed only if another input lies beyond it.
    """
    targets = {node for node, _ in inputs}
    memo: dict[Node, bool] = {}
    for node in task.deps:  # post-order without recursion
        stack = [(node, iter(node._next))]
        if node in memo:
            continue
        memo[node] = node in targets
        while stack:
            current, children = stack[-1]
            for edge in children:
                if edge is None:
                    continue
                child = edge[0]
                if child not in memo:
                    memo[child] = child in targets
                    stack.append((child, iter(child._next)))
                    break
            else:
                stack.pop()
                if not memo[current]:
                    memo[current] = any(
                        e is not None and memo.get(e[0], False) for e in current._next
                    )
    if targets_run:
        return {node for node, needed in memo.items() if needed}
    return {
        node for node in memo if any(e is not None and memo.get(e[0], False) for e in node._next)
    }


def _compute(node: Node, grads: list[np.ndarray | None]) -> Sequence[np.ndarray | None]:
    if node._freed and node._saved_fields:
        raise RuntimeError(_FREED_MESSAGE)
    for tensor, version in node._versions:
        if tensor._vbox[0] != version:
            raise RuntimeError(_modified_message(tensor, version))
    if node._packed is not None:  # saved-tensor hooks hold its values (autograd._saved)
        unpack_node(node)
    if node._materialize:  # the node fills in missing gradients itself
        return node.backward_multi(grads)
    if node._n_out == 1:
        grad = grads[0]
        if grad is None:
            return (None,) * len(node._next)
        return node.backward(grad)
    if all(g is None for g in grads):
        return (None,) * len(node._next)
    return node.backward_multi(grads)


def _modified_message(tensor: Tensor, version: int) -> str:
    fn = tensor.grad_fn
    origin = f", which is output {tensor._output_nr} of {fn.name()}," if fn is not None else ""
    kind = f"{scalar_type_name(tensor._data.dtype)}Tensor"
    shape = ", ".join(str(s) for s in tensor._data.shape)
    return (
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [hookgrad.{kind} [{shape}]]{origin} is at version {tensor._vbox[0]}; "
        f"expected version {version} instead. Hint: the backtrace further above shows the "
        "operation that failed to compute its gradient."
    )


def _accumulate(task: _GraphTask, variable: Tensor, grad: np.ndarray | None) -> None:
    """Add ``grad`` into ``variable.grad`` (in place after the first time), then post hooks."""
    if grad is None:
        return
    if grad.dtype != variable._data.dtype:
        grad = grad.astype(variable._data.dtype)
    current = variable._grad
    if current is None:
        variable._grad = _make_owned_tensor(task, grad, variable._data.shape)
    else:
        data = current._data
        if data.shape == grad.shape and data.flags.writeable:
            np.add(data, grad, out=data)
            current._vbox[0] += 1
        else:
            try:
                current._data = data + grad
            except ValueError:  # .grad kept its shape while `variable.data =` changed it
                from .._ops.arith import broadcast_error

                raise broadcast_error(data, grad) from None
    post = variable._post_acc_hooks
    if post:
        _hook_calls.run_post_accumulate_hooks(variable, post)


def _make_owned_tensor(task: _GraphTask, grad: np.ndarray, shape: tuple[int, ...]) -> Tensor:
    if grad.shape != shape:
        grad = np.broadcast_to(grad, shape)
    if grad.base is not None or id(grad) in task.owned or not grad.flags.writeable:
        grad = np.array(grad, copy=True)
    task.owned[id(grad)] = grad
    return _wrap(grad)
