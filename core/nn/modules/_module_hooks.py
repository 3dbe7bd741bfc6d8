"""Per-module hooks and the slow path of a module call, as ``torch.nn.Module._call_impl``.

:class:`ModuleHooksMixin` holds the registration API; :func:`call_with_hooks` runs one call when
some hook, local or global, may be registered (SEMANTICS F-1..F-11, B-1..B-23, G-1..G-4). The
order is torch's: global then local forward pre-hooks, backward-hook setup around the final
args, ``forward``, global then local forward hooks, backward-hook setup around the final output,
then the deprecated regular hooks on the output's ``grad_fn``.
"""

from __future__ import annotations

import functools
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ..._tensor import Tensor
from ...utils.hooks import HookDict, RemovableHandle, new_args_and_kwargs
from ._backward_hooks import hook_inputs
from ._global_hooks import GLOBAL_HOOKS, ForwardHookEntry, ForwardPreHookEntry, forward_plan

__all__ = ["ModuleHooksMixin", "call_general", "call_with_hooks"]

Hook = Callable[..., Any]

_MIXED_LOCAL = (
    "Cannot use both regular backward hooks and full backward hooks on a single Module. Please "
    "use only one of them."
)
_HOOK_TABLES = (
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_backward_pre_hooks",
    "_backward_hooks",
)


def _move_to_front(table: HookDict, key: int) -> None:
    entries = list(table.items())
    table.clear()
    table[key] = dict(entries)[key]
    table.update((k, v) for k, v in entries if k != key)


class ModuleHooksMixin:
    """Registration of forward, backward-pre, full-backward and regular backward hooks."""

    _forward_pre_hooks: HookDict
    _forward_pre_hooks_with_kwargs: HookDict
    _forward_hooks: HookDict
    _forward_hooks_with_kwargs: HookDict
    _forward_hooks_always_called: HookDict
    _backward_pre_hooks: HookDict
    _backward_hooks: HookDict
    _is_full_backward_hook: bool | None
    _hooks_maybe: bool
    _hooks_complex: bool

    def _init_hook_tables(self) -> None:
        d = self.__dict__
        for name in _HOOK_TABLES:
            d[name] = HookDict()
        d["_is_full_backward_hook"] = None
        # "Maybe" flags read by Module._call_impl and call_with_hooks: some hook may exist;
        # some hook may need the general path (see _global_hooks for the global pair).
        d["_hooks_maybe"] = False
        d["_hooks_complex"] = False

    def _add_hook(
        self,
        table: HookDict,
        hook: Hook,
        extra: tuple[HookDict, ...],
        prepend: bool,
        complex: bool = True,
    ) -> RemovableHandle:
        handle = RemovableHandle(table, extra_dict=extra)
        table[handle.id] = hook
        if prepend:
            _move_to_front(table, handle.id)
        d = self.__dict__
        d["_hooks_maybe"] = True
        d["_hooks_complex"] = d["_hooks_complex"] or complex
        return handle

    def register_forward_pre_hook(
        self, hook: Hook, *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """Run ``hook(module, args)`` (or ``(module, args, kwargs)``) before every forward."""
        handle = self._add_hook(
            self._forward_pre_hooks,
            hook,
            (self._forward_pre_hooks_with_kwargs,),
            prepend,
            complex=with_kwargs,
        )
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(
        self,
        hook: Hook,
        *,
        prepend: bool = False,
        with_kwargs: bool = False,
        always_call: bool = False,
    ) -> RemovableHandle:
        """Run ``hook(module, args, output)`` after every forward; a return replaces output."""
        extra = (self._forward_hooks_with_kwargs, self._forward_hooks_always_called)
        handle = self._add_hook(
            self._forward_hooks, hook, extra, prepend, complex=with_kwargs or always_call
        )
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        return handle

    def register_full_backward_pre_hook(self, hook: Hook, prepend: bool = False) -> RemovableHandle:
        """Run ``hook(module, grad_output)`` before the module's backward; may replace it."""
        return self._add_hook(self._backward_pre_hooks, hook, (), prepend)

    def register_full_backward_hook(self, hook: Hook, prepend: bool = False) -> RemovableHandle:
        """Run ``hook(module, grad_input, grad_output)`` once grad_input is known."""
        if self._is_full_backward_hook is False:
            raise RuntimeError(_MIXED_LOCAL)
        self.__dict__["_is_full_backward_hook"] = True
        return self._add_hook(self._backward_hooks, hook, (), prepend)

    def register_backward_hook(self, hook: Hook) -> RemovableHandle:
        """Deprecated: hook the last op of forward (its gradients, not the module's; B-22)."""
        if self._is_full_backward_hook is True:
            raise RuntimeError(_MIXED_LOCAL)
        self.__dict__["_is_full_backward_hook"] = False
        return self._add_hook(self._backward_hooks, hook, (), False)

    def _has_local_hooks(self) -> bool:
        return bool(
            self._forward_pre_hooks
            or self._forward_hooks
            or self._backward_pre_hooks
            or self._backward_hooks
        )


class _WrappedHook:
    """A regular backward hook bound to its module (held weakly, as torch does).

    Fused nodes list in ``_torch_transposed`` the gradients torch's own graph would show
    transposed (Linear's weight goes through TBackward0 there): the hook sees those as torch
    shows them, and a replacement is transposed back.
    """

    __slots__ = ("__dict__", "hook", "module", "transposed")

    def __init__(self, hook: Hook, module: Any, transposed: tuple[int, ...]) -> None:
        self.hook = hook
        self.module = weakref.ref(module)
        self.transposed = transposed
        functools.update_wrapper(self, hook)

    def __call__(self, grad_input: tuple[Any, ...], grad_output: Any) -> Any:
        module = self.module()
        if module is None:
            raise RuntimeError("You are trying to call the hook of a dead Module!")
        result = self.hook(module, self._flip(grad_input), grad_output)
        return None if result is None else self._flip(tuple(result))

    def _flip(self, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        if not self.transposed:
            return grads
        return tuple(
            g.t() if i in self.transposed and g is not None else g for i, g in enumerate(grads)
        )


def _backward_hook_lists(
    module: Any,
) -> tuple[Sequence[Hook], Sequence[Hook], Sequence[Hook], bool]:
    """(full hooks, regular hooks, pre-hooks), globals first, captured now (B-19), and
    whether the user registered any of the full or pre-hooks (a module's own always are).

    Immutable snapshots: with no local backward hooks (the usual case) the global ones,
    prepared when the global tables last changed.
    """
    g = GLOBAL_HOOKS
    local, local_pre = module._backward_hooks, module._backward_pre_hooks
    lists = g.backward_lists or g.build_backward_lists()
    if not (local or local_pre):
        return lists
    full, regular, pre, user = lists
    if local_pre:
        pre = (*pre, *local_pre.values())
        user = True
    if local:
        if module._is_full_backward_hook:
            full = (*full, *local.values())
            user = True
        else:
            regular = (*regular, *local.values())
    return full, regular, pre, user


def _local_forward_pre_plan(module: Any) -> tuple[ForwardPreHookEntry, ...]:
    """The module's own forward pre-hooks with their with_kwargs flags, built per call."""
    marks = module._forward_pre_hooks_with_kwargs
    return tuple(
        (hook_id, hook, hook_id in marks) for hook_id, hook in module._forward_pre_hooks.items()
    )


def _local_forward_plan(module: Any) -> tuple[ForwardHookEntry, ...]:
    """The module's own forward hooks, built per call (the global ones are prepared)."""
    return forward_plan(
        module._forward_hooks,
        module._forward_hooks_with_kwargs,
        module._forward_hooks_always_called,
    )


def _full_call(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Every hook kind, in torch's order; after a failure, the always_call forward hooks that
    have not run yet do (F-9..F-11) and see the args, kwargs and result of that moment."""
    g = GLOBAL_HOOKS
    full, regular, pre, user = _backward_hook_lists(module)  # captured before any hook (B-19)
    result = None
    called: list[int] = []  # always_call forward hooks that ran
    try:
        local = module._forward_pre_hooks
        if g.forward_pre or local:
            # Snapshots of both tables with each hook's with_kwargs flag (H-5); global
            # pre-hooks take kwargs only through hookgrad's own registration (plugin bridge).
            pre_plan = (
                (*g.forward_pre_plan, *_local_forward_pre_plan(module))
                if local
                else g.forward_pre_plan
            )
            for _, hook, takes_kwargs in pre_plan:
                if takes_kwargs:
                    changed = hook(module, args, kwargs)
                    if changed is not None:
                        args, kwargs = new_args_and_kwargs(changed, "forward pre-hook")
                else:
                    changed = hook(module, args)
                    if changed is not None:
                        args = changed if isinstance(changed, tuple) else (changed,)
        bw_hook = None
        if full or pre:
            bw_hook, args = hook_inputs(module, full, pre, user, args)
        result = module.forward(*args, **kwargs)
        local = module._forward_hooks
        plan = (*g.forward_plan, *_local_forward_plan(module)) if local else g.forward_plan
        for hook_id, hook, hook_kwargs, always in plan:
            if always:
                called.append(hook_id)
            changed = (
                hook(module, args, kwargs, result) if hook_kwargs else hook(module, args, result)
            )
            if changed is not None:
                result = changed
        if bw_hook is not None:
            result = bw_hook.setup_output_hook(result)
        if regular:
            _attach_regular_hooks(module, regular, args, result)
        return result
    except Exception:
        _run_always_called_hooks(module, args, kwargs, result, called)
        raise


def _backward_hooked_call(
    module: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    full: Sequence[Hook],
    pre: Sequence[Hook],
    user: bool,
) -> Any:
    """A call whose only hooks are full backward and backward pre-hooks: no forward hook can
    run, so there is no call state to track for the exception path."""
    bw_hook, args = hook_inputs(module, full, pre, user, args)
    return bw_hook.setup_output_hook(module.forward(*args, **kwargs))


def call_with_hooks(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """One module call with hooks; see the module docstring for the order.

    Plain forward and forward pre-hooks (no kwargs, no always_call, no backward hooks) take
    a short path; everything else the general one, which tracks what the exception path needs.
    When every global hook is one owner's (the plugin bridge) and the module has none of its
    own, the owner runs the call (``_global_hooks``' module docstring).
    """
    g = GLOBAL_HOOKS
    if g.complex or module._hooks_complex:
        owner = g.sole_owner  # only ever set with a complex global hook
        if owner is not None and not module._hooks_maybe:
            return owner.module_call(module, args, kwargs)
        if g.backward_only and not module._hooks_maybe:  # global full/pre hooks, nothing else
            full, _, pre, user = g.backward_lists or g.build_backward_lists()
            bw_hook, args = hook_inputs(module, full, pre, user, args)  # _backward_hooked_call
            return bw_hook.setup_output_hook(module.forward(*args, **kwargs))
        return call_general(module, args, kwargs)
    hooked = False
    table, local = g.forward_pre.hooks, module._forward_pre_hooks
    if table or local:
        hooked = True
        # Snapshots (H-5: a hook that registers or removes hooks changes the next call only);
        # with no local hooks, the global snapshot itself.
        for hook in (*table, *local.values()) if local else table:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    output = module.forward(*args, **kwargs)
    table, local = g.forward.hooks, module._forward_hooks
    if table or local:
        hooked = True
        for hook in (*table, *local.values()) if local else table:
            result = hook(module, args, output)
            if result is not None:
                output = result
    if not hooked:  # every local handle was removed: let the next call take the fast path
        module.__dict__["_hooks_maybe"] = module._has_local_hooks()
    return output


def call_general(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A module call on the general path: every hook kind, local and global, in torch's order."""
    g = GLOBAL_HOOKS
    if not (g.forward_pre or g.forward or module._forward_pre_hooks or module._forward_hooks):
        full, regular, pre, user = _backward_hook_lists(module)
        if regular:
            return _full_call(module, args, kwargs)
        if full or pre:
            return _backward_hooked_call(module, args, kwargs, full, pre, user)
        d = module.__dict__
        d["_hooks_maybe"] = d["_hooks_complex"] = False  # every handle was removed
        return module.forward(*args, **kwargs)
    if not _needs_general_path(module):  # the hooks that set the flag were removed since
        module.__dict__["_hooks_complex"] = False
        return call_with_hooks(module, args, kwargs)
    return _full_call(module, args, kwargs)


def _needs_general_path(module: Any) -> bool:
    """Whether some hook registered now, global or local, is one the short path cannot run."""
    return bool(
        GLOBAL_HOOKS.complex  # exact for the global tables; the module's flag may be stale
        or module._backward_hooks
        or module._backward_pre_hooks
        or module._forward_pre_hooks_with_kwargs
        or module._forward_hooks_with_kwargs
        or module._forward_hooks_always_called
    )


def _run_always_called_hooks(
    module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any, called: list[int]
) -> None:
    """F-9..F-11: unrun always_call hooks run after a failure; their errors become warnings.

    Global hooks get no kwargs here even when registered with them, as in torch.
    """
    unrun = [
        ("global module", hook_id, hook, False)
        for hook_id, hook, _, always in GLOBAL_HOOKS.forward_plan
        if always and hook_id not in called
    ]
    unrun += [
        ("module", hook_id, hook, hook_kwargs)
        for hook_id, hook, hook_kwargs, always in _local_forward_plan(module)
        if always and hook_id not in called
    ]
    for scope, _, hook, hook_kwargs in unrun:
        try:
            changed = (
                hook(module, args, kwargs, result) if hook_kwargs else hook(module, args, result)
            )
            if changed is not None:
                result = changed
        except Exception as error:
            warnings.warn(
                f"{scope} forward hook with ``always_call=True`` raised an exception that was "
                f"silenced as another error was raised in forward: {error}",
                UserWarning,
                stacklevel=5,  # Module._call_impl, as torch points into its module.py
            )


def _first_tensor(value: Any) -> Tensor:
    while not isinstance(value, Tensor):
        if isinstance(value, dict):
            value = next(v for v in value.values() if isinstance(v, Tensor))
        else:
            value = value[0]
    return value


def _attach_regular_hooks(
    module: Any, hooks: Sequence[Hook], args: tuple[Any, ...], result: Any
) -> None:
    """Deprecated regular hooks go on the grad_fn of the first output tensor (B-22)."""
    grad_fn = _first_tensor(result).grad_fn
    if grad_fn is None:
        return
    transposed = getattr(grad_fn, "_torch_transposed", ())
    for hook in hooks:
        grad_fn.register_hook(_WrappedHook(hook, module, transposed))
    _warn_regular_hook_misuse(args, result, grad_fn)


_DEPRECATED = " is deprecated and will be removed in future versions. This hook will be missing "
_USE_FULL = "Please use register_full_backward_hook to get the documented behavior."
# torch's texts, word for word, for each way a regular hook misses gradients.
_MISUSE = {
    "outputs": "Using non-full backward hooks on a Module that does not return a single Tensor "
    "or a tuple of Tensors" + _DEPRECATED + "some of the grad_output. " + _USE_FULL,
    "inputs": "Using non-full backward hooks on a Module that does not take as input a single "
    "Tensor or a tuple of Tensors" + _DEPRECATED + "some of the grad_input. " + _USE_FULL,
    "nested": "Using a non-full backward hook when outputs are nested in python data structure"
    + _DEPRECATED
    + "some grad_output.",
    "nodes": "Using a non-full backward hook when outputs are generated by different autograd "
    "Nodes" + _DEPRECATED + "some grad_output. " + _USE_FULL,
    "forward": "Using a non-full backward hook when the forward contains multiple autograd Nodes"
    + _DEPRECATED
    + "some grad_input. "
    + _USE_FULL,
}


def _warn_regular_hook_misuse(inputs: Any, result: Any, grad_fn: Any) -> None:
    """torch's FutureWarnings for the cases where a regular hook misses gradients."""
    kind = None
    outputs = (result,) if isinstance(result, Tensor) else result
    if not (isinstance(outputs, tuple) and all(isinstance(r, Tensor) for r in outputs)):
        kind = "outputs"
    elif not (isinstance(inputs, tuple) and all(isinstance(i, Tensor) for i in inputs)):
        kind = "inputs"
    else:
        out_fns = {r.grad_fn for r in outputs if r.grad_fn is not None}
        in_fns = {i.grad_fn for i in inputs if i.grad_fn is not None}
        if not out_fns or (len(out_fns) == 1 and grad_fn not in out_fns):
            kind = "nested"
        elif len(out_fns) > 1:
            kind = "nodes"
        elif in_fns != {n for n, _ in grad_fn.next_functions}:
            kind = "forward"
    if kind is not None:
        warnings.warn(_MISUSE[kind], FutureWarning, stacklevel=5)
