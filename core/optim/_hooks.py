"""Optimizer hooks as ``torch.optim.optimizer`` (PyTorch 2.13), plus hookgrad's step gates.

What runs around one ``optimizer.step(*args, **kwargs)``, in this order:

1. hookgrad's step gates (``register_optimizer_step_gate``), in registration order, stopping at
   the first that returns False. A vetoed call returns None and does nothing else: no
   torch-named hook fires, the closure is not evaluated, no parameter or state changes. Torch
   code therefore sees exactly the steps that were taken, as when ``GradScaler.step`` skips
   ``optimizer.step()`` on inf/NaN gradients. Gates are the one place where the runtime may sit
   in front of user hooks; they are hookgrad-only and torch has no equivalent.
2. Global step pre-hooks, then the optimizer's own, each ``hook(optimizer, args, kwargs)``;
   ``args`` starts with the optimizer itself. A hook returning ``(new_args, new_kwargs)``
   replaces what the step and every later hook receives; any other non-None return raises
   torch's RuntimeError. A pre-hook cannot skip the step: torch has no such return value. The
   torch-compatible ways out are raising (which aborts the call and the caller's loop) or
   setting every ``p.grad`` to None (the built-in optimizers then leave those parameters alone,
   but a closure recomputes the gradients and the post hooks still fire); hence the gates.
3. The step itself, then the optimizer's post hooks, then the global ones (torch runs the
   global post hooks **last**), each ``hook(optimizer, args, kwargs)`` with the final args; the
   return value is ignored. An exception in the step skips the post hooks.

As in torch, ``step`` is wrapped per class, lazily: ``Optimizer.__init__`` and ``__setstate__``
replace ``type(self).step`` by the wrapper unless the step found there is already wrapped
(``step.hooked``). A subclass step that calls ``super().step()`` therefore runs the hooks twice
if the parent class was instantiated first, once otherwise; torch 2.13 behaves the same way.
With no gate and no step hook anywhere, the wrapper costs one Python call and five dict checks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeAlias, TypeVar, cast

import numpy as np

from ..utils.hooks import HookDict, RemovableHandle, new_args_and_kwargs

if TYPE_CHECKING:
    from .optimizer import Optimizer, StateDict

__all__ = [
    "Args",
    "GlobalOptimizerPostHook",
    "GlobalOptimizerPreHook",
    "Kwargs",
    "OptimizerHooksMixin",
    "StepGate",
    "StepGateError",
    "register_optimizer_step_gate",
    "register_optimizer_step_post_hook",
    "register_optimizer_step_pre_hook",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

Args: TypeAlias = tuple[Any, ...]
Kwargs: TypeAlias = dict[str, Any]
GlobalOptimizerPreHook: TypeAlias = Callable[
    ["Optimizer", Args, Kwargs], tuple[Args, Kwargs] | None
]
GlobalOptimizerPostHook: TypeAlias = Callable[["Optimizer", Args, Kwargs], None]
StepGate: TypeAlias = Callable[["Optimizer"], bool]
StateDictPreHook: TypeAlias = Callable[["Optimizer"], None]
StateDictPostHook: TypeAlias = Callable[["Optimizer", "StateDict"], "StateDict | None"]
LoadStateDictPreHook: TypeAlias = Callable[["Optimizer", "StateDict"], "StateDict | None"]
LoadStateDictPostHook: TypeAlias = Callable[["Optimizer"], None]

# The global state torch.optim.optimizer defines, under torch's names; the gates are hookgrad's.
_global_optimizer_pre_hooks: HookDict = HookDict()
_global_optimizer_post_hooks: HookDict = HookDict()
_optimizer_step_gates: HookDict = HookDict()

_HOOK_TABLES = (
    "_optimizer_step_pre_hooks",
    "_optimizer_step_post_hooks",
    "_optimizer_state_dict_pre_hooks",
    "_optimizer_state_dict_post_hooks",
    "_optimizer_load_state_dict_pre_hooks",
    "_optimizer_load_state_dict_post_hooks",
)


class StepGateError(RuntimeError):
    """A step gate returned something other than a bool; carries the gate and its answer."""

    def __init__(self, gate: StepGate, verdict: object) -> None:
        super().__init__(f"optimizer step gate {gate!r} must return True or False, got {verdict!r}")
        self.gate = gate
        self.verdict = verdict


def _add(table: HookDict, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
    handle = RemovableHandle(table)
    table[handle.id] = hook
    if prepend:
        entries = list(table.items())
        table.clear()
        table[handle.id] = hook
        table.update(entries)
    return handle


# ---------------------------------------------------------------------- global registration
def register_optimizer_step_pre_hook(hook: GlobalOptimizerPreHook) -> RemovableHandle:
    """Register ``hook(optimizer, args, kwargs) -> None | (new_args, new_kwargs)`` on all optimizers.

    It runs before every optimizer's step, ahead of that optimizer's own pre-hooks.
    """
    return _add(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook: GlobalOptimizerPostHook) -> RemovableHandle:
    """Register ``hook(optimizer, args, kwargs) -> None`` on all optimizers.

    It runs after every optimizer's step, after that optimizer's own post hooks.
    """
    return _add(_global_optimizer_post_hooks, hook)


def register_optimizer_step_gate(gate: StepGate) -> RemovableHandle:
    """hookgrad only: let ``gate(optimizer) -> bool`` veto steps of every optimizer.

    Gates run before any step hook, in registration order. The first False makes that
    ``step()`` call return None without running hooks, closure or update; a return value that
    is not a bool (numpy's included) raises :class:`StepGateError`. Torch has no such hook.
    """
    return _add(_optimizer_step_gates, gate)


# ---------------------------------------------------------------------- the step wrapper
def _gate_allows(gate: StepGate, optimizer: Optimizer) -> bool:
    verdict = gate(optimizer)
    if isinstance(verdict, (bool, np.bool_)):
        return bool(verdict)
    raise StepGateError(gate, verdict)


def _step_with_hooks(
    func: Callable[..., _R], optimizer: Optimizer, args: Args, kwargs: Kwargs
) -> _R | None:
    """The slow path of a step: gates, pre-hooks, step, post hooks (torch's order).

    Each kind runs from a snapshot of its tables (as module hooks do, SEMANTICS H-5): a hook
    that adds or removes hooks, or another thread doing so, changes the next step only.
    """
    for gate in tuple(_optimizer_step_gates.values()):
        if not _gate_allows(gate, optimizer):
            return None
    for pre_hook in (
        *_global_optimizer_pre_hooks.values(),
        *optimizer._optimizer_step_pre_hooks.values(),
    ):
        result = pre_hook(optimizer, args, kwargs)
        if result is not None:
            args, kwargs = new_args_and_kwargs(result, str(func))
    out = func(*args, **kwargs)
    for post_hook in (
        *optimizer._optimizer_step_post_hooks.values(),
        *_global_optimizer_post_hooks.values(),
    ):
        post_hook(optimizer, args, kwargs)
    return out


class OptimizerHooksMixin:
    """The hook tables of one optimizer, their registration API and the step wrapper."""

    _optimizer_step_pre_hooks: HookDict
    _optimizer_step_post_hooks: HookDict
    _optimizer_state_dict_pre_hooks: HookDict
    _optimizer_state_dict_post_hooks: HookDict
    _optimizer_load_state_dict_pre_hooks: HookDict
    _optimizer_load_state_dict_post_hooks: HookDict

    def _init_hook_tables(self) -> None:
        """Create the tables this optimizer lacks (all of them, unless unpickled or reloaded)."""
        d = self.__dict__
        for name in _HOOK_TABLES:
            if name not in d:
                d[name] = HookDict()

    @staticmethod
    def profile_hook_step(func: Callable[_P, _R]) -> Callable[_P, _R]:
        """Wrap a ``step`` so that it runs the gates and step hooks (torch's name)."""

        @functools.wraps(func)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            self: Optimizer = args[0]  # type: ignore[assignment]  # no cast() on the hot path
            if not (
                _optimizer_step_gates
                or _global_optimizer_pre_hooks
                or _global_optimizer_post_hooks
                or self._optimizer_step_pre_hooks
                or self._optimizer_step_post_hooks
            ):
                return func(*args, **kwargs)
            return cast(_R, _step_with_hooks(func, self, args, kwargs))

        return wrapper

    def _patch_step_function(self) -> None:
        """Wrap ``type(self).step`` unless the step it resolves to is wrapped already."""
        cls = type(self)
        if not getattr(cls.step, "hooked", None):  # type: ignore[attr-defined]
            wrapped = self.profile_hook_step(cls.step)  # type: ignore[attr-defined]
            wrapped.hooked = True  # type: ignore[attr-defined]
            cls.step = wrapped  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ registration
    def register_step_pre_hook(self, hook: GlobalOptimizerPreHook) -> RemovableHandle:
        """Run ``hook(optimizer, args, kwargs)`` before each step; it may return new args/kwargs."""
        return _add(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: GlobalOptimizerPostHook) -> RemovableHandle:
        """Run ``hook(optimizer, args, kwargs)`` after each step; its return value is ignored."""
        return _add(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(
        self, hook: StateDictPreHook, prepend: bool = False
    ) -> RemovableHandle:
        """Run ``hook(optimizer)`` before ``state_dict`` builds the dict."""
        return _add(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(
        self, hook: StateDictPostHook, prepend: bool = False
    ) -> RemovableHandle:
        """Run ``hook(optimizer, state_dict)`` on the built dict; a returned dict replaces it."""
        return _add(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(
        self, hook: LoadStateDictPreHook, prepend: bool = False
    ) -> RemovableHandle:
        """Run ``hook(optimizer, state_dict)`` on a shallow copy of the dict being loaded.

        The hook may edit that copy in place or return a replacement to load instead.
        """
        return _add(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(
        self, hook: LoadStateDictPostHook, prepend: bool = False
    ) -> RemovableHandle:
        """Run ``hook(optimizer)`` after ``load_state_dict`` has loaded the state."""
        return _add(self._optimizer_load_state_dict_post_hooks, hook, prepend)
