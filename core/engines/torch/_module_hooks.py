"""Module backward events on torch, from tensor hooks, so in-place modules keep working.

torch's own module backward hooks (``register_module_full_backward_hook`` and its pre-hook)
wrap every hooked module's inputs and outputs in a ``BackwardHookFunction`` view, and an
in-place op on such a view fails in forward: "Output 0 of BackwardHookFunction is a view and is
being modified inplace". ``ReLU(inplace=True)`` and ``out += identity`` (torchvision's ResNet
blocks) do exactly that, so a runtime using those hooks could not run on ResNets.

Here the global forward hooks (which wrap nothing) note each hooked call's tensor inputs and
outputs, and one tensor hook per tensor and version (:class:`_Slot`) delivers the gradients:

* the gradient of a call's output is that call's ``grad_output``; once all its outputs that
  need a gradient have theirs, ``backward_pre`` runs, and a replacement it returns flows on;
* the gradient of a call's input is its ``grad_input``; once all have theirs, ``full_backward``
  runs. A call with no input needing a gradient gets ``full_backward`` right after
  ``backward_pre``, with ``grad_input`` all None, as in torch.

One hook per tensor dispatches in torch's order: first the calls that took the tensor as input
(newest first: an inner module's ``full_backward`` before its parent's), then the calls that
returned it (outermost first). An in-place op makes a new version of a tensor with a new
gradient: it gets a slot of its own. A call's events arrive once its gradients are all known;
any still missing when the backward ends are filled with None then.

Differences from torch's module hooks, by construction:

* an input tensor that also feeds other computations gets the *summed* gradient as its
  ``grad_input`` entry, where torch gives the module's own share;
* a replacement from ``backward_pre`` takes effect only for the output whose gradient arrived
  last (all of them for a one-output module), and one from ``full_backward`` only for the last
  input; a replacement that cannot take effect raises RuntimeError naming the module;
* a call's events fire in the first backward through it only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

import torch
from torch.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
)
from torch.utils.weak import WeakTensorKeyDictionary

from .._protocol import Grads, HandleGroup, ModuleCall, ModuleHooks, Removable
from . import _private
from ._compile import forget_compiled_code

__all__ = ["install_module_hooks", "observe_module_calls", "unwrap"]

_WRAPPERS: Final = (
    torch.nn.parallel.DistributedDataParallel,
    torch.nn.DataParallel,
)
"""Modules that stand for the model they hold as ``.module`` (see :func:`unwrap`)."""

_PLAIN: Final[set[type]] = set()
"""Module classes seen that are no wrapper and not torch.compile's: :func:`unwrap`'s fast path."""


class _CallGrads:
    """One hooked module call, gathering its gradients until its events can fire."""

    __slots__ = (
        "call",
        "done",
        "grad_input",
        "grad_output",
        "inputs_waiting",
        "module",
        "output_slots",
        "outputs_waiting",
        "pre_done",
    )

    def __init__(self, call: ModuleCall, module: Any, n_inputs: int) -> None:
        self.call: ModuleCall | None = call
        self.module = module
        self.grad_input: list[Any] = [None] * n_inputs
        self.grad_output: list[Any] = []
        self.output_slots: list[_Slot | None] = []
        self.inputs_waiting: set[int] = set()
        self.outputs_waiting: set[int] = set()
        self.pre_done = False
        self.done = False

    def output_grad(self, index: int, grad: Any) -> Any:
        """The gradient of output ``index``; returns what flows on (maybe replaced)."""
        if self.call is None or index not in self.outputs_waiting:
            return grad
        self.grad_output[index] = grad
        self.outputs_waiting.discard(index)
        if not self.outputs_waiting:
            grad = self._backward_pre(index, grad)
            if not self.inputs_waiting:
                self._full_backward(None, None)
        return grad

    def input_grad(self, index: int, grad: Any) -> Any:
        """The gradient of input ``index``; returns what flows on (maybe replaced)."""
        if self.call is None or index not in self.inputs_waiting:
            return grad
        self.grad_input[index] = grad
        if self.inputs_waiting == {index}:  # the last one: first hear of outputs without any
            self._outputs_without_gradient()
            self.inputs_waiting.clear()
            grad = self._full_backward(index, grad)
        else:
            self.inputs_waiting.discard(index)
        return grad

    def finish(self) -> None:
        """At the end of the backward: fire what is still due, with None for what is missing."""
        if (
            self.call is not None
            and not self.done
            and len(self.outputs_waiting) < len(self.output_slots)
        ):
            self._outputs_without_gradient()
            self._full_backward(None, None)

    def _outputs_without_gradient(self) -> None:
        """The outputs still waiting will get no gradient in this backward: autograd gives an
        input's gradient only after every contribution to it. Their slots fire with None, so
        the other calls that returned the same tensors (enclosing modules) hear it too, in
        order."""
        for index in sorted(self.outputs_waiting):
            slot = self.output_slots[index]
            if slot is not None:
                slot.no_gradient()
        if not self.pre_done:
            self._backward_pre(None, None)

    def _backward_pre(self, index: int | None, grad: Any) -> Any:
        assert self.call is not None
        self.pre_done = True
        given = tuple(self.grad_output)
        replacement = self.call.backward_pre(given)
        if replacement is None:
            return grad
        self.grad_output = list(replacement)
        return self._replaced("backward_pre", "grad_output", given, replacement, index, grad)

    def _full_backward(self, index: int | None, grad: Any) -> Any:
        assert self.call is not None
        self.done = True
        given = tuple(self.grad_input)
        replacement = self.call.full_backward(given, tuple(self.grad_output))
        if replacement is None:
            return grad
        return self._replaced("full_backward", "grad_input", given, replacement, index, grad)

    def _replaced(
        self, hook: str, what: str, given: Grads, replacement: Grads, index: int | None, grad: Any
    ) -> Any:
        """The replaced gradient of entry ``index``, or RuntimeError if one cannot take effect."""
        if len(replacement) != len(given):
            raise RuntimeError(
                f"{hook} of {type(self.module).__name__} returned {len(replacement)} {what} "
                f"entries for {len(given)}"
            )
        stuck = [i for i, (a, b) in enumerate(zip(given, replacement)) if i != index and a is not b]
        if stuck:
            raise RuntimeError(
                f"{hook} of {type(self.module).__name__} replaced {what}[{stuck[0]}], whose "
                "gradient had already flowed on: on torch models a replacement takes effect only "
                "for the entry whose gradient arrived last"
            )
        return grad if index is None else replacement[index]


class _Slot:
    """The one tensor hook of a tensor version: dispatches its gradient to the calls."""

    __slots__ = ("consumers", "fired", "handle", "producers", "version")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.version = tensor._version
        self.consumers: list[tuple[_CallGrads, int]] = []  # calls that took it as input
        self.producers: list[tuple[_CallGrads, int]] = []  # calls that returned it
        self.fired = False
        self.handle = tensor.register_hook(self)

    def __call__(self, grad: torch.Tensor) -> torch.Tensor:
        self.fired = True
        for frame, index in reversed(self.consumers):
            _finish_at_backward_end(frame)
            grad = frame.input_grad(index, grad)
        for frame, index in reversed(self.producers):
            _finish_at_backward_end(frame)
            grad = frame.output_grad(index, grad)
        return grad

    def no_gradient(self) -> None:
        """This tensor gets no gradient in this backward: its producers hear None."""
        for frame, index in reversed(self.producers):
            frame.output_grad(index, None)


_SLOTS: WeakTensorKeyDictionary = WeakTensorKeyDictionary()
_PENDING: dict[int, list[_CallGrads]] = {}  # graph task id -> calls it touched


def _slot(tensor: torch.Tensor) -> _Slot:
    """The slot of ``tensor`` as it is now: a new one after an in-place op or a past backward."""
    slot = _SLOTS.get(tensor)
    if slot is None or slot.version != tensor._version or slot.fired:
        if slot is not None and slot.fired:
            slot.handle.remove()  # a leaf's hook stays across backwards: not this one's
        slot = _SLOTS[tensor] = _Slot(tensor)
    return slot


def _finish_at_backward_end(frame: _CallGrads) -> None:
    task = _private.graph_task_id()
    frames = _PENDING.get(task)
    if frames is None:
        frames = _PENDING[task] = []
        _private.at_backward_end(lambda: _finish(_PENDING.pop(task, [])))
    frames.append(frame)


def _finish(frames: list[_CallGrads]) -> None:
    for frame in frames:
        frame.finish()


def _tensors(value: Any) -> tuple[Any, ...]:
    """A call's output as torch's module hooks see it: a tensor, or a tuple/list's entries."""
    if isinstance(value, torch.Tensor):
        return (value,)
    return tuple(value) if isinstance(value, tuple | list) else ()


def install_module_hooks(hooks: ModuleHooks, *, backward: bool) -> Removable:
    """Call ``hooks`` around every module call; with ``backward``, deliver the backward events
    of each call to the ModuleCall its ``forward_pre`` returned."""
    state = threading.local()

    def stack() -> list[_CallGrads | None]:
        frames: list[_CallGrads | None] | None = getattr(state, "frames", None)
        if frames is None:
            frames = state.frames = []
        return frames

    def forward_pre(module: torch.nn.Module, args: tuple[Any, ...]) -> Any:
        if torch.compiler.is_compiling():  # run, never traced, by torch.compile (._compile)
            return torch.compiler.disable(forward_pre)(module, args)
        call, new_args = hooks.forward_pre(module, args)
        if new_args is not None:
            args = new_args if isinstance(new_args, tuple) else (new_args,)
        frame = None
        if backward and call is not None and torch.is_grad_enabled():
            frame = _CallGrads(call, module, len(args))
            for index, arg in enumerate(args):
                if isinstance(arg, torch.Tensor) and arg.requires_grad:
                    _slot(arg).consumers.append((frame, index))
                    frame.inputs_waiting.add(index)
        stack().append(frame)
        return new_args

    def forward(module: torch.nn.Module, args: tuple[Any, ...], *rest: Any) -> Any:
        if torch.compiler.is_compiling():
            return torch.compiler.disable(forward)(module, args, *rest)
        frames = stack()
        frame = frames.pop() if frames else None  # empty: the call began before installing
        if len(rest) != 2:  # torch calls an always_call hook as (module, args, None) on failure
            if frame is not None:
                frame.call = None
            hooks.forward_failed(module)
            return None
        kwargs, output = rest
        replaced = hooks.forward(module, args, kwargs, output)
        if frame is not None:
            outputs = _tensors(output if replaced is None else replaced)
            frame.grad_output = [None] * len(outputs)
            frame.output_slots = [None] * len(outputs)
            for index, tensor in enumerate(outputs):
                if isinstance(tensor, torch.Tensor) and tensor.requires_grad:
                    slot = frame.output_slots[index] = _slot(tensor)
                    slot.producers.append((frame, index))
                    frame.outputs_waiting.add(index)
            if not frame.outputs_waiting:  # nothing of it reaches backward: no events
                frame.call = None
        return replaced

    forget_compiled_code()
    pre_handle = register_module_forward_pre_hook(forward_pre)
    post_handle = register_module_forward_hook(forward, with_kwargs=True, always_call=True)
    return HandleGroup((pre_handle, post_handle))


def observe_module_calls(begin: Callable[[Any], None], end: Callable[[Any], None]) -> Removable:
    """Call ``begin(module)`` before and ``end(module)`` after every module call (returned or
    raised), through torch's global forward hooks."""

    def pre(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if torch.compiler.is_compiling():
            return torch.compiler.disable(pre)(module, args)
        begin(module)

    def post(module: torch.nn.Module, args: tuple[Any, ...], output: Any = None) -> None:
        if torch.compiler.is_compiling():
            return torch.compiler.disable(post)(module, args, output)
        end(module)

    forget_compiled_code()
    return HandleGroup(
        (
            register_module_forward_pre_hook(pre),
            register_module_forward_hook(post, always_call=True),
        )
    )


def unwrap(module: Any) -> Any:
    """The model a DistributedDataParallel or DataParallel wrapper holds, or ``torch.compile``
    compiled (in any nesting), else ``module``. Called at every module call: a class once
    found to be neither is remembered, so its instances cost one set lookup."""
    if type(module) in _PLAIN:
        return module
    while True:
        if isinstance(module, _WRAPPERS):
            module = module.module
        elif (original := _private.compiled_original(module)) is not None:
            module = original
        else:
            _PLAIN.add(type(module))
            return module
