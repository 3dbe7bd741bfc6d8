"""The process-wide module hooks PyTorch defines (``torch.nn.modules.module.register_module_*``).

They are the only global state hookgrad keeps besides grad mode and the default generator,
and exactly the state torch keeps. ``active`` is a cheap "maybe" flag for the module-call fast
path: set on every registration, cleared by the slow path once it sees every table empty
(handles remove entries without telling anyone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...utils.hooks import HookDict, RemovableHandle

__all__ = [
    "GLOBAL_HOOKS",
    "register_module_backward_hook",
    "register_module_forward_hook",
    "register_module_forward_pre_hook",
    "register_module_full_backward_hook",
    "register_module_full_backward_pre_hook",
]

_MIXED_GLOBAL = (
    "Cannot use both regular backward hooks and full backward hooks as a global Module hook. "
    "Please use only one of them."
)


class _GlobalHooks:
    """The global hook tables and flags, one instance per process."""

    __slots__ = (
        "active",
        "backward",
        "backward_pre",
        "complex",
        "forward",
        "forward_always_called",
        "forward_pre",
        "forward_with_kwargs",
        "is_full_backward_hook",
    )

    def __init__(self) -> None:
        self.forward_pre = HookDict()
        self.forward = HookDict()
        self.forward_with_kwargs = HookDict()
        self.forward_always_called = HookDict()
        self.backward_pre = HookDict()
        self.backward = HookDict()
        # None until the first global backward hook; then True (full) or False (regular),
        # never reset, even after removal (SEMANTICS G-4).
        self.is_full_backward_hook: bool | None = None
        # "Maybe" flags for the call fast paths: any global hook at all; any that needs the
        # general path (backward hooks, with_kwargs or always_call forward hooks).
        self.active = False
        self.complex = False

    def any_registered(self) -> bool:
        """Recompute the flags from the tables themselves."""
        self.complex = bool(
            self.backward_pre
            or self.backward
            or self.forward_with_kwargs
            or self.forward_always_called
        )
        self.active = bool(self.forward_pre or self.forward or self.complex)
        return self.active


GLOBAL_HOOKS = _GlobalHooks()


def _register(
    table: HookDict,
    hook: Callable[..., Any],
    extra: tuple[HookDict, ...] = (),
    complex: bool = True,
) -> RemovableHandle:
    handle = RemovableHandle(table, extra_dict=extra)
    table[handle.id] = hook
    GLOBAL_HOOKS.active = True
    GLOBAL_HOOKS.complex |= complex
    return handle


def register_module_forward_pre_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Run ``hook(module, args)`` before every module's forward, ahead of its own pre-hooks."""
    return _register(GLOBAL_HOOKS.forward_pre, hook, complex=False)


def register_module_forward_hook(
    hook: Callable[..., Any], *, with_kwargs: bool = False, always_call: bool = False
) -> RemovableHandle:
    """Run ``hook(module, args, output)`` after every module's forward, ahead of its own hooks."""
    g = GLOBAL_HOOKS
    extra = (g.forward_with_kwargs, g.forward_always_called)
    handle = _register(g.forward, hook, extra, complex=with_kwargs or always_call)
    if with_kwargs:
        g.forward_with_kwargs[handle.id] = True
    if always_call:
        g.forward_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Run ``hook(module, grad_output)`` for every module call before its backward."""
    return _register(GLOBAL_HOOKS.backward_pre, hook)


def register_module_full_backward_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Run ``hook(module, grad_input, grad_output)`` for every module call (full semantics)."""
    g = GLOBAL_HOOKS
    if g.is_full_backward_hook is False:
        raise RuntimeError(_MIXED_GLOBAL)
    g.is_full_backward_hook = True
    return _register(g.backward, hook)


def register_module_backward_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Deprecated global regular backward hook: every module's last-op gradients (B-22, G-4)."""
    g = GLOBAL_HOOKS
    if g.is_full_backward_hook is True:
        raise RuntimeError(_MIXED_GLOBAL)
    g.is_full_backward_hook = False
    return _register(g.backward, hook)
