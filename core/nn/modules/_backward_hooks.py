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

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._grad_mode import _state as grad_state
from ..._ops._base import edge
from ..._tensor import Tensor, _wrap
from ...autograd.graph import Node, next_sequence_nr

__all__ = ["BackwardHook", "BackwardHookFunctionBackward"]

Hook = Callable[..., Any]

_NO_INPUT_GRAD_WARNING = (
    "Full backward hook is firing when gradients are computed with respect to module outputs "
    "since no inputs require gradients. See "
    "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
    "#torch.nn.Module.register_full_backward_hook for more details."
)


class BackwardHookFunctionBackward(Node):
    """Identity over a module's tensors; its backward is where the module hooks run."""

    __slots__ = ("_hook", "_is_output", "_meta", "_n_out")
    _materialize = True
    _outputs_are_views = True

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

    def backward_multi(self, grads: list[np.ndarray | None]) -> tuple[np.ndarray | None, ...]:
        if self._is_output:
            return self._hook._on_output_grads(grads)
        for i, g in enumerate(grads):  # missing input gradients become zeros (B-7, B-18)
            if g is None:
                shape, dtype = self._meta[i]
                grads[i] = np.zeros(shape, dtype=dtype)
        return self._hook._on_input_grads(grads)  # type: ignore[arg-type]


def _array(value: Any, like: tuple[tuple[int, ...], np.dtype[Any]], what: str) -> np.ndarray | None:
    """Validate one replacement gradient the way torch's engine validates node outputs."""
    if value is None:
        return None
    if not isinstance(value, Tensor):
        raise TypeError(f"{what} must be a Tensor or None, got {type(value).__name__}")
    shape, dtype = like
    data = value._data
    if data.shape != shape:
        raise RuntimeError(
            f"Function BackwardHookFunctionBackward returned an invalid gradient - got "
            f"{list(data.shape)} but expected shape compatible with {list(shape)}"
        )
    return data if data.dtype == dtype else data.astype(dtype)


def _packed(index: list[int], size: int, grads: Sequence[np.ndarray | None]) -> tuple[Any, ...]:
    """Tensors at the tensor positions, None elsewhere (torch's ``_pack_with_none``)."""
    if size == 1:
        g = grads[0]
        return (None if g is None else _wrap(g),)
    packed: list[Any] = [None] * size
    for i, g in zip(index, grads):
        if g is not None:
            packed[i] = _wrap(g)
    return tuple(packed)


class BackwardHook:
    """The backward hooks of one module call, captured when the call happened (B-19)."""

    __slots__ = (
        "grad_outputs",
        "input_index",
        "module",
        "n_inputs",
        "n_outputs",
        "output_index",
        "output_meta",
        "user_hooks",
        "user_pre_hooks",
    )

    def __init__(
        self, module: Any, user_hooks: Sequence[Hook], user_pre_hooks: Sequence[Hook]
    ) -> None:
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs: tuple[Any, ...] | None = None
        self.n_inputs = -1
        self.n_outputs = -1
        self.input_index: list[int] | None = None
        self.output_index: list[int] | None = None
        self.output_meta: list[tuple[tuple[int, ...], np.dtype[Any]]] = []

    # -- forward time --------------------------------------------------------------------------
    def setup_input_hook(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        self.n_inputs = len(args)
        wrapped, self.input_index = self._wrap_tensors(args, False)
        return wrapped

    def setup_output_hook(self, result: Any) -> Any:
        if isinstance(result, tuple):
            self.n_outputs = len(result)
            wrapped, self.output_index = self._wrap_tensors(result, True)
            return wrapped
        self.n_outputs = 1
        wrapped, self.output_index = self._wrap_tensors((result,), True)
        return wrapped[0]

    def _wrap_tensors(
        self, values: tuple[Any, ...], is_output: bool
    ) -> tuple[tuple[Any, ...], list[int] | None]:
        """Route the tensors among ``values`` through one identity node (if any needs grad)."""
        if len(values) == 1:  # the common case, one tensor in or out, without the lists
            t = values[0]
            if not (isinstance(t, Tensor) and t._requires_grad and grad_state.enabled):
                return values, None
            d = t._data
            meta = [(d.shape, d.dtype)]
            node = BackwardHookFunctionBackward((edge(t),), self, is_output, meta)
            if is_output:
                self.output_meta = meta
            return (_identity_view(t, node, 0),), [0]
        index = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
        if not grad_state.enabled or not any(values[i]._requires_grad for i in index):
            return values, None
        tensors = [values[i] for i in index]
        meta = [(t._data.shape, t._data.dtype) for t in tensors]
        node = BackwardHookFunctionBackward(
            tuple([edge(t) for t in tensors]), self, is_output, meta
        )
        if is_output:
            self.output_meta = meta
        replaced = list(values)
        for nr, i in enumerate(index):
            replaced[i] = _identity_view(values[i], node, nr)
        return tuple(replaced), index

    # -- backward time -------------------------------------------------------------------------
    def _on_output_grads(self, grads: list[np.ndarray | None]) -> tuple[np.ndarray | None, ...]:
        """Pre-hooks may replace grad_output; with no input needing grad, full hooks fire here."""
        assert self.output_index is not None
        packed = _packed(self.output_index, self.n_outputs, grads)
        grad_outputs = _chain(
            self.user_pre_hooks, (self.module,), packed, (), "Backward pre hook", "grad_output"
        )
        replaced = grad_outputs is not packed
        self.grad_outputs = grad_outputs
        if self.input_index is None:
            self._fire_without_input_grads(grad_outputs)
        if not replaced:
            return tuple(grads)
        return tuple(
            _array(grad_outputs[i], meta, "grad_output")
            for i, meta in zip(self.output_index, self.output_meta)
        )

    def _fire_without_input_grads(self, grad_outputs: tuple[Any, ...]) -> None:
        warnings.warn(_NO_INPUT_GRAD_WARNING, UserWarning, stacklevel=2)
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

    def _on_input_grads(self, grads: list[np.ndarray]) -> tuple[np.ndarray | None, ...]:
        """Full hooks see grad_input (zeros where no gradient arrived) and may replace it."""
        grad_outputs = self.grad_outputs
        if grad_outputs is None or not self.user_hooks:
            return tuple(grads)
        assert self.input_index is not None
        packed = _packed(self.input_index, self.n_inputs, grads)
        grad_inputs = _chain(
            self.user_hooks, (self.module,), packed, (grad_outputs,), "Backward hook", "grad_input"
        )
        self.grad_outputs = None
        if grad_inputs is packed:
            return tuple(grads)
        return tuple(
            _array(grad_inputs[i], (g.shape, g.dtype), "grad_input")
            for i, g in zip(self.input_index, grads)
        )


def _chain(
    hooks: Sequence[Hook],
    leading: tuple[Any, ...],
    current: Any,
    trailing: tuple[Any, ...],
    who: str,
    what: str,
) -> Any:
    """Call each hook as ``hook(*leading, current, *trailing)``; a non-None result of the
    same length replaces ``current`` for the next one (B-16, B-17). Returns ``current``
    itself when no hook replaced it."""
    for hook in hooks:
        result = hook(*leading, current, *trailing)
        if result is None:
            continue
        if len(result) != len(current):
            raise RuntimeError(
                f"{who} returned an invalid number of {what}, "
                f"got {len(result)}, but expected {len(current)}"
            )
        current = result
    return current


def _identity_view(t: Tensor, node: BackwardHookFunctionBackward, nr: int) -> Tensor:
    """A new tensor object over the same memory, produced by ``node`` (B-14, B-15)."""
    out = _wrap(t._data)
    out._vbox = t._vbox
    out._base = t if t._base is None else t._base
    if t._requires_grad:
        out._requires_grad = True
        out.grad_fn = node
        out._output_nr = nr
    return out
