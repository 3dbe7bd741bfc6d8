"""The process-wide module hooks PyTorch defines (``torch.nn.modules.module.register_module_*``).

They are the only global state hookgrad keeps besides grad mode and the default generator,
and exactly the state torch keeps. Each table tells :data:`GLOBAL_HOOKS` when it changes
(registration, a handle's ``remove()``, or direct edits such as ``_global_forward_hooks.clear()``),
which then recomputes its flags for the module-call fast path and its snapshots of the hooks:
a module call reads ready-made tuples instead of copying the tables on every call.

An *owner* is an object that registers several global hooks as one unit (the plugin bridge,
``_owner=``). While every global hook is one owner's, ``GLOBAL_HOOKS.sole_owner`` names it and
a module call without hooks of its own runs through ``owner.module_call(module, args,
kwargs)``: one Python call in place of the general path's per-hook dispatch and bookkeeping.
The owner must make that call exactly what the general path (``call_general``) would make of
its hooks, and hands any call it does not handle itself back to ``call_general``.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable, Mapping
from typing import Any

from ...utils.hooks import HookDict, RemovableHandle, SnapshotHookDict

__all__ = [
    "GLOBAL_HOOKS",
    "GlobalHookTable",
    "bind_table_names",
    "register_module_backward_hook",
    "register_module_forward_hook",
    "register_module_forward_pre_hook",
    "register_module_forward_pre_hook_with_kwargs",
    "register_module_full_backward_hook",
    "register_module_full_backward_pre_hook",
]

_MIXED_GLOBAL = (
    "Cannot use both regular backward hooks and full backward hooks as a global Module hook. "
    "Please use only one of them."
)


Hook = Callable[..., Any]
# A forward hook as a call runs it: (handle id, hook, with_kwargs, always_call).
ForwardHookEntry = tuple[int, Hook, bool, bool]
# A forward pre-hook as a call runs it: (handle id, hook, with_kwargs).
ForwardPreHookEntry = tuple[int, Hook, bool]
_NO_HOOKS: tuple[Hook, ...] = ()
# (full backward hooks, regular backward hooks, backward pre-hooks, whether the user registered
# any of the full or pre-hooks: only then does a call whose inputs need no grad warn, B-9)
_BackwardLists = tuple[tuple[Hook, ...], tuple[Hook, ...], tuple[Hook, ...], bool]


class GlobalHookTable(SnapshotHookDict):
    """A global hook table that also reports every change to its owner (module docstring)."""

    __slots__ = ("_owner",)

    def __init__(self, owner: _GlobalHooks) -> None:
        self._owner = owner
        super().__init__()

    def _changed(self) -> None:
        # Under the owner's lock: a snapshot read from the table here must not overwrite one a
        # ``_replace`` in another thread made meanwhile (a stale per-call record would then be
        # captured by the next module call, and its backward events named after another call).
        with self._owner.lock:
            super()._changed()
            self._owner._table_changed(self)

    def _replace(self, key: int, hook: Callable[..., Any]) -> None:
        """``hook`` in place of the one under ``key`` if still registered (see ``replace_backward``)."""
        if key in self:
            dict.__setitem__(self, key, hook)
            self.hooks = tuple(self.values())  # the snapshot; the owner's flags stay as they are


class _GlobalHooks:
    """The global hook tables, and flags and snapshots derived from them, one per process."""

    __slots__ = (
        "active",
        "backward",
        "backward_lists",
        "backward_only",
        "backward_pre",
        "complex",
        "forward",
        "forward_always_called",
        "forward_plan",
        "forward_pre",
        "forward_pre_plan",
        "forward_pre_with_kwargs",
        "forward_with_kwargs",
        "internal",
        "is_full_backward_hook",
        "lock",
        "owners",
        "sole_owner",
        "user_backward",
    )

    def __init__(self) -> None:
        # None until the first global backward hook; then True (full) or False (regular),
        # never reset, even after removal (SEMANTICS G-4).
        self.is_full_backward_hook: bool | None = None
        self.forward_pre = GlobalHookTable(self)
        self.forward_pre_with_kwargs = GlobalHookTable(self)  # hookgrad only: see below
        self.forward = GlobalHookTable(self)
        self.forward_with_kwargs = GlobalHookTable(self)
        self.forward_always_called = GlobalHookTable(self)
        self.backward_pre = GlobalHookTable(self)
        self.backward = GlobalHookTable(self)
        self.forward_pre_plan: tuple[ForwardPreHookEntry, ...] = ()
        # Ids of the backward hooks hookgrad registered for itself (``_internal=True``): the
        # B-9 warning is about the user's hooks, so those alone never raise it.
        self.internal = HookDict()
        # hook id -> the owner that registered it (module docstring); ``sole_owner``: the
        # owner of every global hook, or None (no hook, or hooks of several or no owners).
        self.owners = HookDict()
        self.sole_owner: Any = None
        self.user_backward = False
        self.forward_plan: tuple[ForwardHookEntry, ...] = ()
        self.backward_lists: _BackwardLists | None = None
        self.active = self.complex = self.backward_only = False
        # Held while a table changes (its snapshot and the flags) and while backward_lists is
        # built, so a thread never stores snapshots or lists made from tables another thread
        # changed meanwhile. Reentrant: a table's change recomputes the owner's state under it.
        self.lock = threading.RLock()

    def _table_changed(self, table: GlobalHookTable) -> None:
        """Recompute the flags and what depends on ``table``; tables change rarely, calls
        read the results always.

        ``active``: some global hook exists, so module calls leave the fast path; ``complex``:
        some needs the general path (backward hooks, with_kwargs or always_call forward hooks);
        ``backward_only``: the global hooks are full backward and backward pre-hooks only, so
        a module without hooks of its own needs nothing but the backward-hook wrapping.
        The snapshots are immutable, so a call that captured one keeps it (B-19, H-5).
        ``backward_lists`` is None until the next call rebuilds it: the plugin bridge swaps a
        backward-table entry on every module call, which must stay cheap.
        """
        if table is self.forward_pre or table is self.forward_pre_with_kwargs:
            marks = self.forward_pre_with_kwargs
            self.forward_pre_plan = tuple(
                (hook_id, hook, hook_id in marks)
                for hook_id, hook in tuple(self.forward_pre.items())
            )
        elif table is self.backward or table is self.backward_pre:
            internal = self.internal
            user_pre = any(key not in internal for key in tuple(self.backward_pre))
            user_full = self.is_full_backward_hook is not False and any(
                key not in internal for key in tuple(self.backward)
            )  # regular (deprecated) hooks sit in the same table but build no BackwardHook
            with self.lock:
                self.user_backward = user_pre or user_full
                self.backward_lists = None
        else:  # the forward hooks or their with_kwargs / always_call marks
            self.forward_plan = forward_plan(
                self.forward, self.forward_with_kwargs, self.forward_always_called
            )
        self.complex = bool(
            self.backward_pre
            or self.backward
            or self.forward_pre_with_kwargs
            or self.forward_with_kwargs
            or self.forward_always_called
        )
        self.active = bool(self.forward_pre or self.forward or self.complex)
        # Only with a hook the short path cannot run: call_general then never hands the
        # call back to call_with_hooks, hence to the owner.
        self.sole_owner = self._sole_owner() if self.complex else None
        self.backward_only = bool(
            (self.backward or self.backward_pre)
            and self.is_full_backward_hook is not False
            and not (self.forward_pre or self.forward)
        )

    def _sole_owner(self) -> Any:
        """The owner of every hook in the tables a module call runs, or None."""
        owners = self.owners
        owner = None
        for table in (self.forward_pre, self.forward, self.backward_pre, self.backward):
            for key in tuple(table):
                found = owners.get(key)
                if found is None or (owner is not None and found is not owner):
                    return None
                owner = found
        return owner

    def build_backward_lists(self) -> _BackwardLists:
        """``backward_lists`` after a change: (full, regular, pre-hooks) as immutable tuples,
        and whether the user registered any of them."""
        with self.lock:
            return self._build_backward_lists()

    def _build_backward_lists(self) -> _BackwardLists:
        backward, pre = self.backward.hooks, self.backward_pre.hooks
        if self.is_full_backward_hook is False:
            lists = self.backward_lists = (_NO_HOOKS, backward, pre, self.user_backward)
        else:
            lists = self.backward_lists = (backward, _NO_HOOKS, pre, self.user_backward)
        return lists

    def reset_table(self, table: GlobalHookTable, entries: Mapping[int, Hook]) -> None:
        """Make ``table`` hold ``entries``: torch code resets its state by assigning a fresh
        dict to ``torch.nn.modules.module._global_*_hooks`` (see :func:`bind_table_names`).

        Hooks hookgrad registered for itself (an owner's, or ``_internal``) stay: the user
        reset torch's hooks, not hookgrad's plugin dispatch, which torch does not have.
        """
        with self.lock:
            kept = [(k, h) for k, h in table.items() if k in self.owners or k in self.internal]
            dict.clear(table)
            dict.update(table, kept)
            dict.update(table, entries)
            table._changed()

    def replace_backward(
        self, entries: tuple[tuple[GlobalHookTable, int], ...], hook: Callable[..., Any]
    ) -> None:
        """Put ``hook`` in place of each backward-table entry ``(table, key)`` still registered.

        The plugin bridge does this on every module call, so it skips what cannot change (the
        keys, hence every flag) and builds the next call's lists at once, all under ``lock``:
        a call in another thread captures the lists from before or from after, never a mix.
        """
        with self.lock:
            for table, key in entries:
                table._replace(key, hook)
            self._build_backward_lists()


def forward_plan(
    hooks: HookDict, with_kwargs: HookDict, always_called: HookDict
) -> tuple[ForwardHookEntry, ...]:
    """The forward hooks of one table in order, each with how it is called.

    ``tuple(items())`` copies the table in one step, so a registration in another thread
    meanwhile cannot break the walk (it recomputes the plan itself).
    """
    return tuple(
        (hook_id, hook, hook_id in with_kwargs, hook_id in always_called)
        for hook_id, hook in tuple(hooks.items())
    )


GLOBAL_HOOKS = _GlobalHooks()


class _TableNamespace(types.ModuleType):
    """A module whose attributes named in ``_table_names`` are views of GLOBAL_HOOKS tables:
    assigning one of them resets that table instead of rebinding the name."""

    _table_names: dict[str, GlobalHookTable]

    def __setattr__(self, name: str, value: Any) -> None:
        table = self.__dict__.get("_table_names", {}).get(name)
        if table is None:
            super().__setattr__(name, value)
        elif value is not table:
            GLOBAL_HOOKS.reset_table(table, value)


def bind_table_names(module_name: str, names: dict[str, GlobalHookTable]) -> None:
    """Expose ``names`` on module ``module_name`` as torch's global hook dicts.

    ``module._global_forward_hooks = OrderedDict()`` then empties the live table (keeping
    hookgrad's own hooks), as the same assignment drops every global hook in torch; reading
    the name always gives the live table.
    """
    module = sys.modules[module_name]
    for name, table in names.items():
        module.__dict__[name] = table
    module.__dict__["_table_names"] = dict(names)
    module.__class__ = _TableNamespace


def _register(
    table: HookDict,
    hook: Callable[..., Any],
    extra: tuple[HookDict, ...] = (),
    marks: tuple[HookDict, ...] = (),
    *,
    internal: bool = False,
    owner: object = None,
) -> RemovableHandle:
    """Add ``hook`` to ``table``, first marking it in ``marks`` (with_kwargs, always_call), as
    internal and with its owner: a module call in another thread never sees the hook without
    its marks."""
    g = GLOBAL_HOOKS
    if internal:
        extra = (*extra, g.internal)
        marks = (*marks, g.internal)
    if owner is not None:
        extra = (*extra, g.owners)
    handle = RemovableHandle(table, extra_dict=extra)
    for mark in marks:
        mark[handle.id] = True
    if owner is not None:
        g.owners[handle.id] = owner
    table[handle.id] = hook
    return handle


def register_module_forward_pre_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Run ``hook(module, args)`` before every module's forward, ahead of its own pre-hooks."""
    return _register(GLOBAL_HOOKS.forward_pre, hook)


def register_module_forward_pre_hook_with_kwargs(
    hook: Callable[..., Any], *, _owner: object = None
) -> RemovableHandle:
    """hookgrad only: a global forward pre-hook called as ``hook(module, args, kwargs)``.

    Torch's global pre-hooks never see keyword arguments; the plugin bridge needs them for
    ``ForwardPreEvent.kwargs``. A non-None return must be ``(new_args, new_kwargs)``, as for
    a module's own pre-hook registered ``with_kwargs=True``. ``_owner``: see the module
    docstring.
    """
    g = GLOBAL_HOOKS
    marks = (g.forward_pre_with_kwargs,)
    return _register(g.forward_pre, hook, marks, marks, owner=_owner)


def register_module_forward_hook(
    hook: Callable[..., Any],
    *,
    with_kwargs: bool = False,
    always_call: bool = False,
    _owner: object = None,
) -> RemovableHandle:
    """Run ``hook(module, args, output)`` after every module's forward, ahead of its own hooks.

    ``_owner`` (hookgrad only): see the module docstring.
    """
    g = GLOBAL_HOOKS
    extra = (g.forward_with_kwargs, g.forward_always_called)
    marks = tuple(mark for mark, on in zip(extra, (with_kwargs, always_call)) if on)
    return _register(g.forward, hook, extra, marks, owner=_owner)


def register_module_full_backward_pre_hook(
    hook: Callable[..., Any], *, _internal: bool = False, _owner: object = None
) -> RemovableHandle:
    """Run ``hook(module, grad_output)`` for every module call before its backward.

    ``_internal`` (hookgrad only, for its plugin runtime): the hook is hookgrad's own, so a call
    whose inputs need no grad does not warn for it (B-9's warning concerns user hooks).
    ``_owner`` (hookgrad only): see the module docstring.
    """
    return _register(GLOBAL_HOOKS.backward_pre, hook, internal=_internal, owner=_owner)


def register_module_full_backward_hook(
    hook: Callable[..., Any], *, _internal: bool = False, _owner: object = None
) -> RemovableHandle:
    """Run ``hook(module, grad_input, grad_output)`` for every module call (full semantics).

    ``_internal`` and ``_owner`` as for :func:`register_module_full_backward_pre_hook`.
    """
    g = GLOBAL_HOOKS
    if g.is_full_backward_hook is False:
        raise RuntimeError(_MIXED_GLOBAL)
    g.is_full_backward_hook = True
    return _register(g.backward, hook, internal=_internal, owner=_owner)


def register_module_backward_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Deprecated global regular backward hook: every module's last-op gradients (B-22, G-4)."""
    g = GLOBAL_HOOKS
    if g.is_full_backward_hook is True:
        raise RuntimeError(_MIXED_GLOBAL)
    g.is_full_backward_hook = False
    return _register(g.backward, hook)
