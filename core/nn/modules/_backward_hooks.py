"""Module full backward hooks and backward pre-hooks, as ``torch.utils.hooks.BackwardHook``.

At call time the module's tensor inputs and outputs are passed through identity nodes
(``BackwardHookFunctionBackward``, as in torch). The output node runs the backward pre-hooks
and remembers ``grad_output``; the input node runs when every gradient with respect to the
inputs is known and calls the full hooks. That placement is what produces torch's observable
behaviour: zeros for inputs that need no gradient (B-7), a full hook that never fires when
forward ignores its inputs (B-10), views and the in-place error (B-14, B-15), and the hook
list fixed at forward time (B-19). The nodes do the hook work themselves rather than through
generic node hooks, so gradients are wrapped into Tensors once per module call.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

import numpy as np

from ..._grad_mode import _state as grad_state
from ..._ops._base import edge
from ..._tensor import Tensor, _wrap
from ...autograd._engine import current_graph_task
from ...autograd._hook_calls import checked_hook_result
from ...autograd._view import CUSTOM, make_view
from ...autograd.graph import Node, next_sequence_nr
from ...utils._warnings import warn_at_frame

__all__ = ["BackwardHook", "BackwardHookFunctionBackward", "hook_inputs"]

Hook = Callable[..., Any]

_NO_INPUT_GRAD_WARNING = (
    "Full backward hook is firing when gradients are computed with respect to module outputs "
    "since no inputs require gradients. See "
    "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
    "#torch.nn.Module.register_full_backward_hook for more details."
)


class BackwardHookFunctionBackward(Node):
    """Identity over a module's tensors; its backward is where the module hooks run.

    The output node is reached first: pre-hooks may replace grad_output, which is kept for
    the full hooks (fired there when no input needs grad, B-9). The input node is reached
    when every gradient with respect to the inputs is known: the full hooks see grad_input
    (zeros where no gradient arrived, B-7, B-18) and may replace it. Both sides are spelled
    out in ``backward_multi``, one frame less per node than a call into the BackwardHook;
    and both are one class, so the engine's calls of ``backward_multi`` see a single type.
    """

    __slots__ = ("_hook", "_is_output", "_meta", "_n_out")
    _materialize = True
    _plain_identity = True

    def __init__(
        self, edges: tuple[Any, ...], hook: BackwardHook, is_output: bool, meta: list[Any]
    ) -> None:
        # One constructor instead of Node.__init__ plus attribute writes: built every call.
        self._next = edges
        self._seq = next_sequence_nr()
        self._hooks = None
        self._versions = ()
        self._freed = False
        self._hook = hook
        self._is_output = is_output
        self._meta = meta
        self._n_out = len(meta)

    def backward_multi(self, grads: list[np.ndarray | None]) -> Sequence[np.ndarray | None]:
        hook = self._hook
        if self._is_output:
            if hook.n_outputs == 1:
                g = grads[0]
                packed = grad_outputs = (None if g is None else _wrap(g),)
            else:
                packed = grad_outputs = _packed(hook.output_index, hook.n_outputs, grads)
            if hook.user_pre_hooks:
                module = hook.module
                for pre_hook in hook.user_pre_hooks:
                    result = pre_hook(module, grad_outputs)
                    if result is not None:
                        grad_outputs = _checked_count(
                            result, grad_outputs, "Backward pre hook", "grad_output"
                        )
            hook.grad_outputs = grad_outputs
            if hook.input_index is None:
                hook._fire_without_input_grads(grad_outputs)
            if grad_outputs is packed:
                return grads
            return _replacements(grad_outputs, hook.output_index, self._meta)
        for i, g in enumerate(grads):
            if g is None:
                shape, dtype = self._meta[i]
                grads[i] = np.zeros(shape, dtype=dtype)
        kept = hook.grad_outputs  # grad_output, kept by the output node
        if kept is None or not hook.user_hooks:
            return grads
        hook.grad_outputs = None
        if hook.n_inputs == 1:
            packed = grad_inputs = (_wrap(grads[0]),)  # type: ignore[arg-type]
        else:
            packed = grad_inputs = _packed(hook.input_index, hook.n_inputs, grads)
        module = hook.module
        for full_hook in hook.user_hooks:
            result = full_hook(module, grad_inputs, kept)
            if result is not None:
                grad_inputs = _checked_count(result, grad_inputs, "Backward hook", "grad_input")
        if grad_inputs is packed:
            return grads
        arrived = [(g.shape, g.dtype) for g in grads]  # type: ignore[union-attr]
        return _replacements(grad_inputs, hook.input_index, arrived)

    def backward_graph(self, grads: list[Tensor | None]) -> Sequence[Tensor | None]:
        """``create_graph=True``: the hooks of ``backward_multi``, called with the recorded
        gradients themselves (they require grad, as in torch); a replacement a hook returns
        is checked as there and handed on as it is, graph and all."""
        hook, module = self._hook, self._hook.module
        if self._is_output:
            packed = grad_outputs = _packed_graph(hook.output_index, hook.n_outputs, grads)
            for pre_hook in hook.user_pre_hooks:
                result = pre_hook(module, grad_outputs)
                if result is not None:
                    grad_outputs = _checked_count(
                        result, grad_outputs, "Backward pre hook", "grad_output"
                    )
            hook.grad_outputs = grad_outputs
            if hook.input_index is None:
                hook._fire_without_input_grads(grad_outputs)
            return _graph_replacements(grad_outputs, packed, hook.output_index, grads, self._meta)
        grads = [
            _wrap(np.zeros(shape, dtype=dtype)) if g is None else g
            for g, (shape, dtype) in zip(grads, self._meta)
        ]
        kept = hook.grad_outputs
        if kept is None or not hook.user_hooks:
            return grads
        hook.grad_outputs = None
        packed = grad_inputs = _packed_graph(hook.input_index, hook.n_inputs, grads)
        for full_hook in hook.user_hooks:
            result = full_hook(module, grad_inputs, kept)
            if result is not None:
                grad_inputs = _checked_count(result, grad_inputs, "Backward hook", "grad_input")
        arrived = [(g._data.shape, g._data.dtype) for g in grads]  # type: ignore[union-attr]
        return _graph_replacements(grad_inputs, packed, hook.input_index, grads, arrived)


def _packed_graph(
    index: list[int] | None, size: int, grads: Sequence[Tensor | None]
) -> tuple[Any, ...]:
    """:func:`_packed` for recorded gradients: the Tensors themselves."""
    assert index is not None
    packed: list[Any] = [None] * size
    for i, g in zip(index, grads):
        packed[i] = g
    return tuple(packed)


def _graph_replacements(
    replaced: tuple[Any, ...],
    packed: tuple[Any, ...],
    index: list[int] | None,
    grads: Sequence[Tensor | None],
    meta: list[Any],
) -> Sequence[Tensor | None]:
    """:func:`_replacements` for recorded gradients: each checked, then kept as it is."""
    if replaced is packed:
        return grads
    _replacements(replaced, index, meta)  # the checks only
    assert index is not None
    return tuple(replaced[i] for i in index)


def _array(value: Any, like: tuple[tuple[int, ...], np.dtype[Any]]) -> np.ndarray | None:
    """Validate one replacement gradient as torch does: a tensor of the same shape and dtype.

    torch runs the module's hooks inside one tensor hook named ``hook``, so its errors name
    that; hookgrad's say the same.
    """
    if value is None:
        return None
    return checked_hook_result("hook", value, *like)


def _packed(
    index: list[int] | None, size: int, grads: Sequence[np.ndarray | None]
) -> tuple[Any, ...]:
    """Tensors at the tensor positions, None elsewhere (torch's ``_pack_with_none``)."""
    assert index is not None
    packed: list[Any] = [None] * size
    for i, g in zip(index, grads):
        if g is not None:
            packed[i] = _wrap(g)
    return tuple(packed)


def _replacements(
    replaced: tuple[Any, ...], index: list[int] | None, meta: list[Any]
) -> tuple[np.ndarray | None, ...]:
    """The arrays of the gradients hooks returned at the tensor positions ``index``, each
    checked against the shape and dtype in ``meta``."""
    assert index is not None
    return tuple(_array(replaced[i], like) for i, like in zip(index, meta))


def _checked_count(result: Any, current: tuple[Any, ...], who: str, what: str) -> Any:
    """A hook's replacement must have as many entries as what it replaces (B-16, B-17)."""
    if len(result) != len(current):
        raise RuntimeError(
            f"{who} returned an invalid number of {what}, "
            f"got {len(result)}, but expected {len(current)}"
        )
    return result


class BackwardHook:
    """The backward hooks of one module call, captured when the call happened (B-19).

    Forward wraps the call's tensor inputs and outputs through one identity node each
    (:func:`hook_inputs` makes the BackwardHook and wraps the inputs, ``setup_output_hook``
    wraps the output); backward reaches the output node first (pre-hooks, remember
    grad_output), then the input node (full hooks). The one-tensor case is spelled out
    because it is nearly every module call.
    """

    __slots__ = (
        "grad_outputs",
        "input_index",
        "module",
        "n_inputs",
        "n_outputs",
        "output_index",
        "user_hooks",
        "user_pre_hooks",
        "warns",
    )

    grad_outputs: tuple[Any, ...] | None
    input_index: list[int] | None
    module: Any
    n_inputs: int
    n_outputs: int
    output_index: list[int] | None
    user_hooks: Sequence[Hook]
    user_pre_hooks: Sequence[Hook]
    warns: bool

    # -- forward time --------------------------------------------------------------------------

    def setup_output_hook(self, result: Any) -> Any:
        """The module's output routed through the output node; anything but a Tensor or a
        tuple is returned as is, with torch's warning that no backward hook will fire."""
        if isinstance(result, Tensor):
            self.n_outputs = 1
            if result._requires_grad and grad_state.enabled:
                self.output_index = _ONLY_FIRST
                return self._wrap_one(result, True)
            return result
        if isinstance(result, tuple):
            self.n_outputs = len(result)
            wrapped, self.output_index = self._wrap_tensors(result, True)
            return wrapped
        warn_at_frame(
            "For backward hooks to be called, module output should be a Tensor or a tuple of "
            f"Tensors but received {type(result)}",
            UserWarning,
            _module_call_frame,  # as torch's points into its module.py
        )
        return result

    def _wrap_one(self, t: Tensor, is_output: bool) -> Tensor:
        """The one-tensor call, nearly every module call: no index lists.

        Runs twice per hooked module call, so the node and the view are built here field by
        field (as ``BackwardHookFunctionBackward.__init__``, ``_identity_view`` and
        ``make_view(out, t, CUSTOM)`` would, for a tensor that requires grad) rather than
        through three more calls.
        """
        d = t._data
        fn = t.grad_fn
        node = _new_node(BackwardHookFunctionBackward)
        node._next = ((fn, t._output_nr) if fn is not None else edge(t),)
        node._seq = next_sequence_nr()
        node._hooks = None
        node._versions = ()
        node._freed = False
        node._hook = self
        node._is_output = is_output
        node._meta = [(d.shape, d.dtype)]
        node._n_out = 1
        out = _new_tensor(Tensor)
        out._data = d
        out._grad = None
        out._requires_grad = True
        out._grad_fn = node
        out._output_nr = 0
        out._acc = None
        out._hooks = None
        base = t._base
        out._base = t if base is None else base
        vbox = out._vbox = t._vbox
        out._view_version = vbox[0]
        out._view_kind = CUSTOM
        return out

    def _wrap_tensors(
        self, values: tuple[Any, ...], is_output: bool
    ) -> tuple[tuple[Any, ...], list[int] | None]:
        """Route the tensors among ``values`` through one identity node (if any needs grad)."""
        if not grad_state.enabled:
            return values, None
        index: list[int] = []
        edges: list[Any] = []
        meta: list[Any] = []
        needed = False
        for i, v in enumerate(values):
            if isinstance(v, Tensor):
                index.append(i)
                edges.append(edge(v))
                meta.append((v._data.shape, v._data.dtype))
                needed = needed or v._requires_grad
        if not needed:
            return values, None
        node = BackwardHookFunctionBackward(tuple(edges), self, is_output, meta)
        replaced = list(values)
        for nr, i in enumerate(index):
            replaced[i] = _identity_view(values[i], node, nr)
        if type(values) is tuple:
            return tuple(replaced), index
        return type(values)(*replaced), index  # a namedtuple keeps its type, as in torch

    # -- backward time -------------------------------------------------------------------------
    def _fire_without_input_grads(self, grad_outputs: tuple[Any, ...]) -> None:
        if self.warns:  # at the backward() call
            task = current_graph_task()
            assert task is not None  # backward nodes run inside a backward call
            warn_at_frame(_NO_INPUT_GRAD_WARNING, UserWarning, task.user_frame)
        grad_inputs = (None,) * self.n_inputs
        for hook in self.user_hooks:
            result = hook(self.module, grad_inputs, grad_outputs)
            if result is not None and not (
                isinstance(result, tuple) and all(r is None for r in result)
            ):
                raise RuntimeError(
                    "Backward hook for Modules where no input requires gradient should always "
                    "return None or None for all gradients."
                )
        self.grad_outputs = None


def _module_call_frame() -> FrameType | None:
    """The frame of the innermost ``Module._call_impl`` running: the module call, however
    many of hookgrad's frames the call path has put below it."""
    from .module import Module  # module.py imports this module

    code = Module._call_impl.__code__
    frame = sys._getframe(1)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back  # type: ignore[assignment]
    return frame


def hook_inputs(
    module: Any,
    user_hooks: Sequence[Hook],
    user_pre_hooks: Sequence[Hook],
    warns: bool,
    args: tuple[Any, ...],
) -> tuple[BackwardHook, tuple[Any, ...]]:
    """The BackwardHook of one module call and the call's args routed through its input node.

    One function in place of a constructor and a setup method: it runs once per hooked
    module call. ``warns`` is False when every hook is hookgrad's own (the plugin runtime's):
    B-9's warning is torch's word to the user about the user's hooks.
    """
    hook: BackwardHook = _new_node(BackwardHook)
    hook.module = module
    hook.user_hooks = user_hooks
    hook.user_pre_hooks = user_pre_hooks
    hook.warns = warns
    hook.grad_outputs = hook.output_index = None
    n = hook.n_inputs = len(args)
    if n == 1:
        t = args[0]
        if isinstance(t, Tensor) and t._requires_grad and grad_state.enabled:
            hook.input_index = _ONLY_FIRST
            return hook, (hook._wrap_one(t, False),)
        hook.input_index = None
        return hook, args
    wrapped, hook.input_index = hook._wrap_tensors(args, False)
    return hook, wrapped


# The index list of a call with exactly one tensor: shared, never mutated.
_ONLY_FIRST = [0]

_new_tensor = _new_node = object.__new__


def _identity_view(t: Tensor, node: BackwardHookFunctionBackward, nr: int) -> Tensor:
    """A new tensor object over the same memory, produced by ``node`` (B-14, B-15).

    Every field is written once here (rather than ``_wrap`` then overwrites): this runs twice
    per hooked module call.
    """
    out = _new_tensor(Tensor)
    out._data = t._data
    out._grad = None
    if t._requires_grad:
        out._requires_grad = True
        out._grad_fn = node
        out._output_nr = nr
    else:  # a multi-tensor call's input that needs no gradient: same memory, no node
        out._requires_grad = False
        out._grad_fn = None
        out._output_nr = 0
    out._acc = None
    out._hooks = None
    return make_view(out, t, CUSTOM)
