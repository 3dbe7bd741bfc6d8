"""``HookBridge``: the engine's module hook points as pluggy hook calls.

The bridge registers at most four process-wide module hooks
(``hookgrad.nn.modules.module.register_module_*``) and dispatches each call to the plugins'
``hookgrad_forward_pre`` / ``hookgrad_forward`` / ``hookgrad_backward_pre`` /
``hookgrad_full_backward`` implementations, one by one in :func:`~hookgrad.hookspecs.call_order`
order, with the replacement rules of the torch-style hooks (see :mod:`hookgrad.hookspecs.specs`).

What is registered depends on what is listened to, evaluated by :meth:`HookBridge.refresh`:

* no implementation of any module spec: nothing, so module calls keep the engine's fast path;
* otherwise a global forward pre-hook and a global forward hook (``with_kwargs=True``,
  ``always_call=True``), even when only backward specs are implemented: they mark where calls
  begin and end, which is what gives a call its qualified name and call index
  (:mod:`._naming`); the forward specs are dispatched from them when implemented;
* a global full backward pre-hook if ``hookgrad_backward_pre`` is implemented, a global full
  backward hook if ``hookgrad_full_backward`` is. Registering the latter sets the process-wide
  sticky flag of SEMANTICS G-4: from then on ``register_module_backward_hook`` (the deprecated
  regular kind) raises ``RuntimeError`` for the rest of the process, even after :meth:`detach`.

Backward events belong to the forward call that built the graph. The engine captures the
global backward hook lists when a call starts, before any forward pre-hook runs (B-19), and
passes the backward hooks nothing but the module. So the table entries of the two backward
hooks are per-call records: the entry captured by call N is a fresh :class:`_CallRecord`,
which the bridge's forward pre-hook of call N fills with the name and call index before
putting a new, empty record in the tables for the next call. A record captured by a call
that failed before the bridge's pre-hook ran stays empty and in the tables, for the next call.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, Protocol, TypeVar

import pluggy

from ..hookspecs import (
    BackwardPreEvent,
    ForwardEvent,
    ForwardPreEvent,
    FullBackwardEvent,
    ModuleEvent,
    PluginAbort,
    PluginConfig,
    call_order,
)
from ..nn.modules._global_hooks import (
    GLOBAL_HOOKS,
    GlobalHookTable,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from ..utils.hooks import RemovableHandle
from ._naming import ModuleNamer

__all__ = ["MODULE_HOOKS", "HookBridge", "OnErrorLog", "PluginHookWarning"]

FORWARD_PRE: Final = "hookgrad_forward_pre"
FORWARD: Final = "hookgrad_forward"
BACKWARD_PRE: Final = "hookgrad_backward_pre"
FULL_BACKWARD: Final = "hookgrad_full_backward"
MODULE_HOOKS: Final = (FORWARD_PRE, FORWARD, BACKWARD_PRE, FULL_BACKWARD)
"""The module hook specs the bridge dispatches, in the order of one module call."""

_DEFAULT_CONFIG: Final = PluginConfig()
_E = TypeVar("_E", bound=ModuleEvent)


class OnErrorLog(Protocol):
    """What the bridge calls when a plugin with ``on_error`` "warn" or "disable" raised."""

    def __call__(
        self, *, plugin: str, hook: str, module: str, phase: str, error: BaseException
    ) -> None: ...


class PluginHookWarning(UserWarning):
    """A plugin raised inside a module hook and its ``on_error`` is "warn" or "disable"."""


class _Listener:
    """One implementation the bridge calls: the plugin's name, settings and ``call(event)``.

    ``call`` is the implementation itself when it takes the event (nearly always), so a
    dispatch costs one Python call; an implementation without arguments gets a wrapper.
    """

    __slots__ = ("call", "config", "name")

    def __init__(self, impl: pluggy.HookImpl, config: PluginConfig) -> None:
        self.name = impl.plugin_name
        self.config = config
        function: Callable[..., Any] = impl.function
        self.call: Callable[[ModuleEvent | Any], Any] = (
            function if "event" in impl.argnames else lambda event: function()
        )


# The listeners that select one module, per module hook, in MODULE_HOOKS order.
_Selection = tuple[tuple[_Listener, ...], ...]


class _CallRecord:
    """One module call as its backward events name it (filled by the forward pre-hook).

    The same object sits in both backward tables (one allocation per call, no bound methods):
    called with one gradient tuple it is the backward pre-hook, with two the full hook.
    """

    __slots__ = ("bridge", "call_index", "generation", "module_name", "module_type", "selection")

    def __init__(self, bridge: HookBridge) -> None:
        self.bridge = bridge
        self.module_name: str | None = None
        self.module_type = ""
        self.call_index = 0
        self.selection: _Selection = ()
        self.generation = -1

    def __call__(self, module: Any, *grads: tuple[Any, ...]) -> tuple[Any, ...] | None:
        name = self.module_name
        if name is None:
            return None
        bridge = self.bridge
        if self.generation != bridge._generation:  # listeners changed since forward
            self.selection = bridge._select(name, self.module_type)
            self.generation = bridge._generation
        if len(grads) == 1:
            return bridge._dispatch_backward_pre(self, name, grads[0])
        return bridge._dispatch_full_backward(self, name, grads[0], grads[1])


class HookBridge:
    """Turns module hook calls into calls of the plugins' module hook implementations.

    Args:
        pm: the plugin manager (project ``"hookgrad"``, :mod:`hookgrad.hookspecs.specs` added).
        configs: pluggy plugin name -> that plugin's validated settings; a plugin without an
            entry gets ``PluginConfig()`` defaults (every module, ``on_error="raise"``). Read by
            :meth:`refresh`. Plugins whose config has ``enabled=False`` are not called.
        on_error_log: called as ``on_error_log(plugin=, hook=, module=, phase=, error=)``
            when a plugin with ``on_error`` "warn" or "disable" raised.

    ``attach()`` registers the global hooks that someone listens to (see the module docstring),
    ``detach()`` removes them (idempotent); ``with bridge:`` does both. Call :meth:`refresh`
    after registering or unregistering plugins: the bridge caches who listens. ``step`` is the
    training step stamped on every event. Plugins run among the global hooks in registration
    order: after global hooks registered before :meth:`attach`, before later ones, and always
    before each module's own hooks (G-1). A detached bridge calls no plugin, not even for
    graphs built while it was attached. ``on_error="disable"`` stops this bridge from calling
    the plugin (listed in ``disabled``); the plugin stays registered with ``pm``.

    Attaching with a ``hookgrad_full_backward`` implementation registers a global full backward
    hook, after which ``register_module_backward_hook`` raises for the rest of the process
    (G-4, sticky even after :meth:`detach`).
    """

    def __init__(
        self,
        pm: pluggy.PluginManager,
        configs: Mapping[str, PluginConfig],
        *,
        on_error_log: OnErrorLog | None = None,
    ) -> None:
        self.pm = pm
        self.configs = configs
        self.on_error_log = on_error_log
        self.step = 0
        self.disabled: set[str] = set()
        self._namer = ModuleNamer()
        self._attached = False
        self._listeners: dict[str, tuple[_Listener, ...]] = dict.fromkeys(MODULE_HOOKS, ())
        # (module name, module type) -> the listeners of each hook that select that module
        self._selections: dict[tuple[str, str], _Selection] = {}
        self._generation = 0  # bumped whenever the listeners change
        self._handles: dict[str, RemovableHandle] = {}
        self._record = _CallRecord(self)
        # (table, key) of each registered backward hook: where the next call's record goes.
        self._record_slots: list[tuple[GlobalHookTable, int]] = []

    # ------------------------------------------------------------------ lifecycle
    @property
    def attached(self) -> bool:
        """Whether :meth:`attach` was called and :meth:`detach` not since."""
        return self._attached

    def naming_roots(self) -> list[Any]:
        """The live modules this bridge has seen called as outermost modules (naming roots)."""
        return self._namer.roots()

    def naming_roots_key(self) -> tuple[int, int]:
        """A value that changes whenever :meth:`naming_roots` does, cheap to read."""
        return self._namer.roots_key()

    def attach(self) -> HookBridge:
        """Register the global hooks someone listens to; returns the bridge."""
        self._attached = True
        self.refresh()
        return self

    def detach(self) -> None:
        """Remove every global hook this bridge registered; harmless when repeated."""
        self._attached = False
        self._set_listeners(dict.fromkeys(MODULE_HOOKS, ()))
        for name in tuple(self._handles):
            self._handles.pop(name).remove()
        self._record_slots.clear()
        self._namer.reset()

    def __enter__(self) -> HookBridge:
        return self.attach()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.detach()

    def refresh(self) -> None:
        """Re-read who implements which module spec; register and remove global hooks to match.

        Raises:
            pluggy.PluginValidationError: an implementation is a wrapper (see ``call_order``).
        """
        if not self._attached:
            return
        self._set_listeners({hook: self._listeners_of(hook) for hook in MODULE_HOOKS})
        listened = {hook for hook, listeners in self._listeners.items() if listeners}
        wanted = set(listened - {FORWARD_PRE, FORWARD})
        if listened:
            wanted |= {FORWARD_PRE, FORWARD}  # names and call ends come from these two
        for name in tuple(self._handles):
            if name not in wanted:
                self._handles.pop(name).remove()
                if name == FORWARD:
                    self._namer.reset()  # call ends are no longer reported
        for name in MODULE_HOOKS:
            if name in wanted and name not in self._handles:
                self._handles[name] = self._register(name)
        tables = {BACKWARD_PRE: GLOBAL_HOOKS.backward_pre, FULL_BACKWARD: GLOBAL_HOOKS.backward}
        self._record_slots = [
            (tables[name], handle.id) for name, handle in self._handles.items() if name in tables
        ]

    def _listeners_of(self, hook: str) -> tuple[_Listener, ...]:
        listeners = []
        for impl in call_order(self.pm, hook):
            config = self.configs.get(impl.plugin_name, _DEFAULT_CONFIG)
            if config.enabled and impl.plugin_name not in self.disabled:
                listeners.append(_Listener(impl, config))
        return tuple(listeners)

    def _set_listeners(self, listeners: dict[str, tuple[_Listener, ...]]) -> None:
        self._listeners = listeners
        self._selections = {}
        self._generation += 1

    def _register(self, name: str) -> RemovableHandle:
        if name == FORWARD_PRE:
            return register_module_forward_pre_hook(self._forward_pre_hook)
        if name == FORWARD:
            return register_module_forward_hook(
                self._forward_hook, with_kwargs=True, always_call=True
            )
        if name == BACKWARD_PRE:  # internal: no B-9 warning for hooks the user never added
            return register_module_full_backward_pre_hook(self._record, _internal=True)
        return register_module_full_backward_hook(self._record, _internal=True)

    # ------------------------------------------------------------------ global hooks
    def _forward_pre_hook(self, module: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        name, index = self._namer.enter(module)
        module_type = type(module).__name__
        selection = self._selections.get((name, module_type)) or self._select(name, module_type)
        if self._record_slots:
            self._bind_record(name, module_type, index, selection)
        listeners = selection[0]
        if not listeners:
            return None
        event = ForwardPreEvent.trusted(
            {
                "module_name": name,
                "module_type": module_type,
                "call_index": index,
                "step": self.step,
                "phase": "forward_pre",
                "args": args,
                "kwargs": {},
            }
        )
        final = self._chain(listeners, event, "args", _as_args)
        return None if final is event else final.__dict__["args"]  # as returned

    def _bind_record(self, name: str, module_type: str, index: int, selection: _Selection) -> None:
        """Fill the record this call captured; put a fresh one in the tables for the next."""
        record = self._record
        record.module_name, record.module_type, record.call_index = name, module_type, index
        record.selection, record.generation = selection, self._generation
        record = self._record = _CallRecord(self)
        for table, key in self._record_slots:
            table.replace(key, record)

    def _forward_hook(self, module: Any, args: tuple[Any, ...], *rest: Any) -> Any:
        ended = self._namer.exit(module)
        if ended is None or len(rest) != 2:  # len 1: always_call after a failure, no output
            return None
        name, index = ended
        module_type = type(module).__name__
        selection = self._selections.get((name, module_type)) or self._select(name, module_type)
        listeners = selection[1]
        if not listeners:
            return None
        kwargs, output = rest
        event = ForwardEvent.trusted(
            {
                "module_name": name,
                "module_type": module_type,
                "call_index": index,
                "step": self.step,
                "phase": "forward",
                "args": args,
                "kwargs": kwargs,
                "output": output,
            }
        )
        final = self._chain(listeners, event, "output", None)
        return None if final is event else final.__dict__["output"]  # as returned

    def _dispatch_backward_pre(
        self, record: _CallRecord, name: str, grad_output: tuple[Any, ...]
    ) -> tuple[Any, ...] | None:
        listeners = record.selection[2]
        if not listeners:
            return None
        event = BackwardPreEvent.trusted(
            {
                "module_name": name,
                "module_type": record.module_type,
                "call_index": record.call_index,
                "step": self.step,
                "phase": "backward_pre",
                "grad_output": grad_output,
            }
        )
        final = self._chain(listeners, event, "grad_output", tuple)
        return None if final is event else final.__dict__["grad_output"]  # as returned

    def _dispatch_full_backward(
        self,
        record: _CallRecord,
        name: str,
        grad_input: tuple[Any, ...],
        grad_output: tuple[Any, ...],
    ) -> tuple[Any, ...] | None:
        listeners = record.selection[3]
        if not listeners:
            return None
        event = FullBackwardEvent.trusted(
            {
                "module_name": name,
                "module_type": record.module_type,
                "call_index": record.call_index,
                "step": self.step,
                "phase": "backward",
                "grad_input": grad_input,
                "grad_output": grad_output,
            }
        )
        final = self._chain(listeners, event, "grad_input", tuple)
        return None if final is event else final.__dict__["grad_input"]  # as returned

    # ------------------------------------------------------------------ dispatch
    def _select(self, name: str, module_type: str) -> _Selection:
        """The listeners of each module hook that select the module; cached per (name, type)."""
        selection = self._selections[(name, module_type)] = tuple(
            tuple(
                listener
                for listener in self._listeners[hook]
                if listener.config.selects(name, module_type)
            )
            for hook in MODULE_HOOKS
        )
        return selection

    def _chain(
        self,
        listeners: tuple[_Listener, ...],
        event: _E,
        field: str,
        convert: Callable[[Any], Any] | None,
    ) -> _E:
        """Call each listener; a non-None return replaces ``field`` for the next one."""
        for listener in listeners:
            if listener.name in self.disabled:
                continue
            try:
                result = listener.call(event)
            except Exception as error:
                if listener.config.on_error == "raise" or isinstance(error, PluginAbort):
                    raise
                self._report(listener, event, error)
                continue
            if result is not None:
                value = result if convert is None else convert(result)
                event = event.model_copy(update={field: value})
        return event

    def _report(self, listener: _Listener, event: ModuleEvent, error: Exception) -> None:
        """on_error "warn" / "disable": warn, log, and for "disable" stop calling the plugin."""
        disable = listener.config.on_error == "disable"
        action = (
            "disabled it for the rest of this runtime" if disable else "went on without its result"
        )
        warnings.warn(
            PluginHookWarning(
                f"plugin {listener.name!r} raised {error!r} in {event.hook} for module "
                f"{event.module_name!r} ({event.module_type}, phase {event.phase!r}); "
                f"hookgrad {action} (on_error={listener.config.on_error!r})"
            ),
            stacklevel=2,
        )
        if self.on_error_log is not None:
            self.on_error_log(
                plugin=listener.name,
                hook=event.hook,
                module=event.module_name,
                phase=event.phase,
                error=error,
            )
        if disable:
            self.disabled.add(listener.name)
            self.refresh()


def _as_args(value: Any) -> tuple[Any, ...]:
    """A forward pre-hook's return as the new positional args (F-2)."""
    return value if isinstance(value, tuple) else (value,)
