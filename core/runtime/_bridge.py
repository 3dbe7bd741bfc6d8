"""``HookBridge``: the engine's module hook points as pluggy hook calls.

The bridge registers at most four process-wide module hooks
(``hookgrad.nn.modules.module.register_module_*``) and dispatches each call to the plugins'
``hookgrad_forward_pre`` / ``hookgrad_forward`` / ``hookgrad_backward_pre`` /
``hookgrad_full_backward`` implementations, one by one in :func:`~hookgrad.hookspecs.call_order`
order, with the replacement rules of the torch-style hooks (see :mod:`hookgrad.hookspecs.specs`).

What is registered depends on what is listened to, evaluated by :meth:`HookBridge.refresh`:

* no implementation of any module spec: nothing, so module calls keep the engine's fast path;
* otherwise a global forward pre-hook and a global forward hook (both with the call's
  kwargs, the forward hook ``always_call=True``; torch's global pre-hooks take no kwargs, so
  the pre-hook uses hookgrad's ``register_module_forward_pre_hook_with_kwargs``), even when
  only backward specs are implemented: they mark where calls
  begin and end, which is what gives a call its qualified name and call index
  (:mod:`._naming`); the forward specs are dispatched from them when implemented;
* a global full backward pre-hook if ``hookgrad_backward_pre`` is implemented, a global full
  backward hook if ``hookgrad_full_backward`` is. Registering the latter sets the process-wide
  sticky flag of SEMANTICS G-4: from then on ``register_module_backward_hook`` (the deprecated
  regular kind) raises ``RuntimeError`` for the rest of the process, even after :meth:`detach`.

Engines (``engines``): the above is hookgrad's numpy engine, whose global hooks the bridge
registers itself (its fast path). An engine that installs module hooks itself
(:class:`hookgrad.engines.ModuleHookSource`: torch) gets an :class:`_EngineHooks` through
``install_module_hooks`` while someone listens, ``backward=True`` only while someone listens to
a backward spec. It runs the same owner check, naming and dispatch; each call's ModuleCall is a
fresh :class:`_CallRecord`, which the engine calls in whatever thread runs backward. On torch
``hookgrad_forward_pre`` gets ``kwargs={}`` (torch's global pre-hook has none), and a wrapper
module (DDP) is no call of its own (``Engine.unwrap``).

Backward events belong to the forward call that built the graph. The engine captures the
global backward hook lists when a call starts, before any forward pre-hook runs (B-19), and
passes the backward hooks nothing but the module. So the table entries of the two backward
hooks are per-call records: the entry captured by call N is a fresh :class:`_CallRecord`,
which the bridge's forward pre-hook of call N fills with the name and call index before
putting a new, empty record in the tables for the next call. A record captured by a call
that failed before the bridge's pre-hook ran stays empty and in the tables, for the next call.

Threads (:mod:`._threads`): every hook begins with the owner check, a lookup of the calling
thread in the bridge's per-thread state (:class:`_Thread`). With ``threads="starter"`` only
the thread that attached the bridge has one; the hooks return at once in any other. With
``threads="all"`` a thread gets its own state at its first module call: its own call stack
(names, call indices) and its own entries in the backward tables, so the record a call
captures is swapped only by that thread's next call. The engine captures a call's record
before the pre-hook runs, so a thread not yet seen captures the *spare* entries registered
in advance, and the oldest becomes its own; a new spare replaces it. Only when more than
``_SPARES`` threads make their first module call at the same moment does one of those first
calls miss its backward events (never a wrong name). A record runs only in the thread that
bound it: one captured by another thread's call (every entry is in every call's snapshot)
does nothing there. Swapping a thread's records and building the engine's backward lists
share one lock (``GLOBAL_HOOKS.replace_backward``), so no call captures a half-swapped table.

While the bridge's hooks are the only global ones, the engine hands it each call of a module
without hooks of its own (:meth:`HookBridge.module_call`, ``GLOBAL_HOOKS.sole_owner``): the
same events from one frame, with the call's record made for it rather than swapped in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar

import pluggy

from ..engines import Engine, ModuleHookSource, Removable, engine_named
from ..hookspecs import ModuleEvent, PluginConfig, call_order
from ..nn.modules._backward_hooks import hook_inputs
from ..nn.modules._global_hooks import (
    GLOBAL_HOOKS,
    GlobalHookTable,
    register_module_forward_hook,
    register_module_forward_pre_hook_with_kwargs,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from ..nn.modules._module_hooks import call_general
from ..utils.hooks import RemovableHandle
from ._failures import OnErrorLog, PluginFailures, PluginHookWarning
from ._module_events import (
    backward_pre_event,
    forward_event,
    forward_pre_event,
    full_backward_event,
)
from ._naming import CallStack, ModuleNamer
from ._replacements import as_args, checked_gradients
from ._threads import ThreadPolicy, check_policy, current_thread

__all__ = ["MODULE_HOOKS", "HookBridge", "OnErrorLog", "PluginHookWarning"]

FORWARD_PRE: Final = "hookgrad_forward_pre"
FORWARD: Final = "hookgrad_forward"
BACKWARD_PRE: Final = "hookgrad_backward_pre"
FULL_BACKWARD: Final = "hookgrad_full_backward"
MODULE_HOOKS: Final = (FORWARD_PRE, FORWARD, BACKWARD_PRE, FULL_BACKWARD)
"""The module hook specs the bridge dispatches, in the order of one module call."""

_DEFAULT_CONFIG: Final = PluginConfig()
_SPARES: Final = 4
"""threads="all": how many new threads may make their first module call at the same moment
and still have the backward events of that call (see the module docstring)."""
_BACKWARD_TABLES: Final = {
    BACKWARD_PRE: GLOBAL_HOOKS.backward_pre,
    FULL_BACKWARD: GLOBAL_HOOKS.backward,
}
_E = TypeVar("_E", bound=ModuleEvent)


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


# Stands for the missing third argument of a backward pre-hook call (module, grad_output).
_PRE_HOOK_CALL: Final = object()

# The listeners that select one module, per module hook, in MODULE_HOOKS order.
_Selection = tuple[tuple[_Listener, ...], ...]


class _CallRecord:
    """One module call as its backward events name it (filled by the forward pre-hook).

    The same object sits in both backward tables (one allocation per call, no bound methods):
    called with one gradient tuple it is the backward pre-hook, with two the full hook. Made
    empty for the tables (filled by ``bind``) or filled at once (the owned call).
    """

    __slots__ = (
        "bridge",
        "call_index",
        "generation",
        "module_name",
        "module_type",
        "selection",
        "thread",
    )

    def __init__(
        self,
        bridge: HookBridge,
        thread: int | None = None,
        name: str = "",
        module_type: str = "",
        index: int = 0,
        selection: _Selection = (),
        generation: int = -1,
    ) -> None:
        self.bridge = bridge
        self.thread = thread  # the thread whose call filled it; None: still empty
        self.module_name = name
        self.module_type = module_type
        self.call_index = index
        self.selection = selection
        self.generation = generation

    def bind(
        self, thread: int | None, name: str, module_type: str, index: int, selection: _Selection
    ) -> None:
        """Make this the record of the call of module ``name`` the forward pre-hook sees."""
        self.module_name, self.module_type, self.call_index = name, module_type, index
        self.selection, self.generation = selection, self.bridge._generation
        self.thread = thread

    def listeners(self, hook: int) -> tuple[_Listener, ...]:
        """The listeners of MODULE_HOOKS[hook] selecting the call's module, as of now."""
        bridge = self.bridge
        if self.generation != bridge._generation:  # listeners changed since forward
            self.selection = bridge._select(self.module_name, self.module_type)
            self.generation = bridge._generation
        return self.selection[hook]

    def __call__(
        self, module: Any, grads: tuple[Any, ...], grad_output: Any = _PRE_HOOK_CALL
    ) -> tuple[Any, ...] | None:
        """The engine's call: ``(module, grad_output)`` as the backward pre-hook,
        ``(module, grad_input, grad_output)`` as the full hook. ``listeners`` inlined: this
        runs twice per module call."""
        if self.thread != current_thread():  # empty, or filled by another thread's call
            return None
        bridge = self.bridge
        if self.generation != bridge._generation:  # listeners changed since forward
            self.selection = bridge._select(self.module_name, self.module_type)
            self.generation = bridge._generation
        if grad_output is _PRE_HOOK_CALL:
            listeners = self.selection[2]
            return bridge._dispatch_backward_pre(self, listeners, grads) if listeners else None
        listeners = self.selection[3]
        if not listeners:
            return None
        return bridge._dispatch_full_backward(self, listeners, grads, grad_output)

    # ModuleCall (hookgrad.engines): how an engine installing the hooks itself calls it. The
    # engine routes each call's gradients to its own record, in whatever thread runs backward
    # (torch runs CUDA backward on worker threads), so no thread is checked here.
    def backward_pre(self, grad_output: tuple[Any, ...]) -> tuple[Any, ...] | None:
        listeners = self.listeners(2)
        if not listeners:
            return None
        return self.bridge._dispatch_backward_pre(self, listeners, grad_output)

    def full_backward(
        self, grad_input: tuple[Any, ...], grad_output: tuple[Any, ...]
    ) -> tuple[Any, ...] | None:
        listeners = self.listeners(3)
        if not listeners:
            return None
        return self.bridge._dispatch_full_backward(self, listeners, grad_input, grad_output)


class _Thread:
    """What a bridge keeps for one thread it acts for (see the module docstring).

    ``calls`` are the thread's module calls in progress; ``record`` the record its next module
    call captures, sitting in the thread's own backward-table entries (``handles``, and as
    (table, key) pairs in ``slots``; ``wants`` says which of the two tables it is in).
    ``ident`` is None for the spare, not yet any thread's.
    """

    __slots__ = ("calls", "handles", "ident", "record", "slots", "wants")

    def __init__(self, ident: int | None, calls: CallStack, record: _CallRecord) -> None:
        self.ident = ident
        self.calls = calls
        self.record = record
        self.handles: dict[str, RemovableHandle] = {}
        self.slots: tuple[tuple[GlobalHookTable, int], ...] = ()
        # whether it has an entry in the backward pre-hook table, in the full hook table
        self.wants = (False, False)


class _EngineHooks:
    """The bridge's module hooks as an engine that installs them itself calls them
    (:class:`hookgrad.engines.ModuleHooks`; torch): the same dispatch as hookgrad's global
    hooks, with a fresh record per call as its ModuleCall (``backward``: someone listens to a
    backward spec). A wrapper module (DDP) is not a call of its own: the model it wraps is.
    torch's global forward pre-hook gets no kwargs, so ``hookgrad_forward_pre`` has ``{}``."""

    __slots__ = ("backward", "bridge", "engine")

    def __init__(self, bridge: HookBridge, engine: Engine, backward: bool) -> None:
        self.bridge = bridge
        self.engine = engine
        self.backward = backward

    def forward_pre(self, module: Any, args: tuple[Any, ...]) -> tuple[_CallRecord | None, Any]:
        if self.engine.unwrap(module) is not module:
            return None, None
        bridge = self.bridge
        begun = bridge._enter(module)
        if begun is None:  # another thread's call
            return None, None
        thread, name, module_type, index, selection = begun
        record = None
        if self.backward:
            record = _CallRecord(bridge)
            record.bind(thread.ident, name, module_type, index, selection)
        listeners = selection[0]
        if not listeners:
            return record, None
        return record, bridge._dispatch_forward_pre(listeners, name, module_type, index, args, {})

    def forward(
        self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
    ) -> Any:
        return self.bridge._forward_hook(module, args, kwargs, output)

    def forward_failed(self, module: Any) -> None:
        self.bridge._forward_hook(module, ())


class HookBridge:
    """Turns module hook calls into calls of the plugins' module hook implementations.

    Args:
        pm: the plugin manager (project ``"hookgrad"``, :mod:`hookgrad.hookspecs.specs` added).
        configs: pluggy plugin name -> that plugin's validated settings; a plugin without an
            entry gets ``PluginConfig()`` defaults (every module, ``on_error="raise"``). Read by
            :meth:`refresh`. Plugins whose config has ``enabled=False`` are not called.
        on_error_log: called as ``on_error_log(plugin=, hook=, module=, phase=, error=)``
            when a plugin with ``on_error`` "warn" or "disable" failed (:mod:`._failures`).
        threads: ``"starter"`` (default): act only on the module calls of the thread that
            calls :meth:`attach`; ``"all"``: on every thread's (see :mod:`._threads`).
        engines: whose module calls to act on (default: hookgrad's numpy engine); read by
            :meth:`refresh`. hookgrad's through its global hooks (the module docstring), an
            engine that installs module hooks itself (torch) through its
            ``install_module_hooks``.

    ``attach()`` registers the global hooks that someone listens to (see the module docstring),
    ``detach()`` removes them (idempotent); ``with bridge:`` does both. Call :meth:`refresh`
    after registering or unregistering plugins: the bridge caches who listens. ``step`` is the
    training step stamped on every event. Plugins run among the global hooks in registration
    order: after global hooks registered before :meth:`attach`, before later ones, and always
    before each module's own hooks (G-1); with ``threads="all"``, the backward entries of a
    thread seen later may sit after global hooks registered meanwhile. A detached bridge calls
    no plugin, not even for graphs built while it was attached. A plugin that fails is handled
    by ``failures`` (:mod:`._failures`), shared with the loop points and the runtime:
    ``on_error="disable"`` stops this bridge from calling the plugin (listed in ``disabled``);
    the plugin stays registered with ``pm``.

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
        threads: ThreadPolicy = "starter",
        engines: Sequence[Engine] | None = None,
    ) -> None:
        self.pm = pm
        self.engines = tuple(engines) if engines is not None else (engine_named("hookgrad"),)
        self.configs = configs
        self.threads = check_policy(threads)
        self.step = 0
        # How plugin failures are handled, here, at the loop points and in the lifecycle.
        self.failures = PluginFailures(on_error_log)
        self.failures.on_disable.append(self.refresh)
        self._namer = ModuleNamer()
        # thread key -> its state; replaced, never changed in place (readers need no lock)
        self._threads: dict[int, _Thread] = {}
        # threads="all": the states the next new threads take, oldest first
        self._spares: list[_Thread] = []
        self._adopting = threading.Lock()
        self._attached = False
        self._listeners: dict[str, tuple[_Listener, ...]] = dict.fromkeys(MODULE_HOOKS, ())
        # (module name, module type) -> the listeners of each hook that select that module
        self._selections: dict[tuple[str, str], _Selection] = {}
        self._generation = 0  # bumped whenever the listeners change
        self._handles: dict[str, RemovableHandle] = {}  # the forward hooks, shared
        # engine name -> (whether backward events are routed, the engine's hooks)
        self._installed: dict[str, tuple[bool, Removable]] = {}

    # ------------------------------------------------------------------ lifecycle
    @property
    def disabled(self) -> set[str]:
        """The plugins disabled by their ``on_error="disable"``: no longer called."""
        return self.failures.disabled

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
        """Register the global hooks someone listens to; returns the bridge.

        The calling thread becomes the one whose work the bridge acts on (``threads``).
        """
        if not self._attached:
            self._attached = True
            starter = self._new_thread(current_thread())
            self._threads = {starter.ident: starter}  # type: ignore[dict-item]
            if self.threads == "all":
                self._spares = [self._new_thread(None) for _ in range(_SPARES)]
        self.refresh()
        return self

    def detach(self) -> None:
        """Remove every global hook this bridge registered; harmless when repeated."""
        self._attached = False
        self._set_listeners(dict.fromkeys(MODULE_HOOKS, ()))
        for name in tuple(self._handles):
            self._handles.pop(name).remove()
        for thread in self._all_threads():
            _sync(thread.handles, set(), self._register)
        self._sync_engines(set())
        self._threads, self._spares = {}, []

    def acts_here(self) -> bool:
        """The owner check: whether the bridge acts on the calling thread's work."""
        return current_thread() in self._threads or self._adopt() is not None

    def _new_thread(self, ident: int | None) -> _Thread:
        return _Thread(ident, self._namer.calls(), _CallRecord(self))

    def _all_threads(self) -> tuple[_Thread, ...]:
        return (*self._threads.values(), *self._spares)

    def _adopt(self) -> _Thread | None:
        """threads="all": the calling thread's first work; it takes the oldest spare state."""
        if not self._spares:
            return None
        with self._adopting:
            ident = current_thread()
            thread = self._threads.get(ident)
            if thread is None and self._spares:
                thread = self._spares.pop(0)  # the oldest: in the snapshot of this call
                thread.ident = ident
                self._threads = {**self._threads, ident: thread}
                spare = self._new_thread(None)
                self._sync_records(spare)
                self._spares.append(spare)
            return thread

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
        if (FORWARD in self._handles or self._installed) and not listened:
            for thread in self._all_threads():
                thread.calls.reset()  # call ends are no longer reported
        # names and call ends come from the two forward hooks
        forward = {FORWARD_PRE, FORWARD} if listened and self._drives_hookgrad() else set()
        _sync(self._handles, forward, self._register)
        for thread in self._all_threads():
            self._sync_records(thread)
        self._sync_engines(listened)

    def _drives_hookgrad(self) -> bool:
        """Whether hookgrad's engine is one of ``engines`` (its hooks are the bridge's own)."""
        return any(engine.name == "hookgrad" for engine in self.engines)

    def _sync_engines(self, listened: set[str]) -> None:
        """Install the module hooks of each engine that installs them itself (torch) while
        someone listens, routing backward events only if someone listens to those."""
        backward = bool(listened & set(_BACKWARD_TABLES))
        wanted = {
            engine.name: engine
            for engine in self.engines
            if listened and isinstance(engine, ModuleHookSource)
        }
        for name in tuple(self._installed):
            if name not in wanted or self._installed[name][0] != backward:
                self._installed.pop(name)[1].remove()
        for name, engine in wanted.items():
            if name not in self._installed:
                hooks = _EngineHooks(self, engine, backward)
                handle = engine.install_module_hooks(hooks, backward=backward)
                self._installed[name] = (backward, handle)

    def _sync_records(self, thread: _Thread) -> None:
        """Give ``thread`` an entry in each backward table someone listens to, and no other."""
        native = self._drives_hookgrad()
        wanted = {name for name in _BACKWARD_TABLES if self._listeners[name] and native}
        record = thread.record
        # internal: the engine's B-9 warning is for hooks the user added, not these
        _sync(
            thread.handles,
            wanted,
            lambda name: _BACKWARD_REGISTER[name](record, _internal=True, _owner=self),
        )
        thread.slots = tuple(
            (_BACKWARD_TABLES[name], handle.id) for name, handle in thread.handles.items()
        )
        thread.wants = (BACKWARD_PRE in thread.handles, FULL_BACKWARD in thread.handles)

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
            return register_module_forward_pre_hook_with_kwargs(self._forward_pre_hook, _owner=self)
        return register_module_forward_hook(
            self._forward_hook, with_kwargs=True, always_call=True, _owner=self
        )

    # ------------------------------------------------------------------ the owned call
    def module_call(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One module call while the bridge's hooks are the only global ones and the module
        has none of its own (``GLOBAL_HOOKS.sole_owner``): what the general path makes of the
        bridge's four hooks, in one frame.

        The general path captures the thread's record from the backward tables, has the
        forward pre-hook fill it and swap in a fresh one (under the tables' lock), dispatches
        through the always_call bookkeeping, and looks the thread up twice. Here the call's
        record is made, filled and handed to its ``BackwardHook`` directly, which the
        backward events cannot tell apart: the other entries of the tables are inert in this
        call (another thread's, or empty). A call the bridge does not act for (another
        thread; a thread ``threads="all"`` has not adopted yet) takes the general path.
        """
        thread = self._threads.get(current_thread())
        if thread is None:
            return call_general(module, args, kwargs)
        calls = thread.calls
        name, index = calls.enter(module)
        module_type = type(module).__name__
        selection = self._selections.get((name, module_type)) or self._select(name, module_type)
        generation = self._generation
        wants_pre, wants_full = thread.wants
        try:
            listeners = selection[0]
            if listeners:
                final = self._dispatch_forward_pre(
                    listeners, name, module_type, index, args, kwargs
                )
                if final is not None:
                    args = final
            bw_hook = None
            if wants_pre or wants_full:
                hooks = (
                    _CallRecord(
                        self, thread.ident, name, module_type, index, selection, generation
                    ),
                )
                bw_hook, args = hook_inputs(
                    module, hooks if wants_full else (), hooks if wants_pre else (), False, args
                )
            output = module.forward(*args, **kwargs)
        except Exception:
            calls.exit(module)  # the forward hook's always_call run after a failure
            raise
        ended = calls.exit(module)
        if ended is not None:  # the innermost call of the module: this one
            if self._generation != generation:  # listeners changed during forward
                selection = self._select(name, module_type)
            if selection[1]:
                replaced = self._dispatch_forward(
                    selection[1], name, module_type, index, args, kwargs, output
                )
                if replaced is not None:
                    output = replaced
        return output if bw_hook is None else bw_hook.setup_output_hook(output)

    # ------------------------------------------------------------------ global hooks
    def _forward_pre_hook(
        self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        begun = self._enter(module)
        if begun is None:  # another thread's call
            return None
        thread, name, module_type, index, selection = begun
        if thread.slots:
            self._bind_record(thread, name, module_type, index, selection)
        listeners = selection[0]
        if not listeners:
            return None
        final = self._dispatch_forward_pre(listeners, name, module_type, index, args, kwargs)
        return None if final is None else (final, kwargs)

    def _enter(self, module: Any) -> tuple[_Thread, str, str, int, _Selection] | None:
        """A module call begins: the owner check, then (thread, name, module type, call
        index, selection); None for a call of a thread the bridge does not act for."""
        thread = self._threads.get(current_thread()) or self._adopt()
        if thread is None:
            return None
        name, index = thread.calls.enter(module)
        module_type = type(module).__name__
        selection = self._selections.get((name, module_type)) or self._select(name, module_type)
        return thread, name, module_type, index, selection

    def _dispatch_forward_pre(
        self,
        listeners: tuple[_Listener, ...],
        name: str,
        module_type: str,
        index: int,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[Any, ...] | None:
        """``hookgrad_forward_pre`` to ``listeners``: the replacement args, or None."""
        event = forward_pre_event(name, module_type, index, self.step, args, kwargs)
        final = self._chain(listeners, event, "args", as_args)
        return None if final is event else final.__dict__["args"]  # as returned

    def _bind_record(
        self, thread: _Thread, name: str, module_type: str, index: int, selection: _Selection
    ) -> None:
        """Fill the record this call captured; put a fresh one in the tables for the next."""
        thread.record.bind(thread.ident, name, module_type, index, selection)
        record = thread.record = _CallRecord(self)
        GLOBAL_HOOKS.replace_backward(thread.slots, record)

    def _forward_hook(self, module: Any, args: tuple[Any, ...], *rest: Any) -> Any:
        thread = self._threads.get(current_thread())
        if thread is None:  # another thread's call
            return None
        if len(rest) != 2:  # always_call after a failure: no output
            thread.calls.exit(module)
            return None
        kwargs, output = rest
        ended = thread.calls.exit(module)
        if ended is None:
            return None
        name, index = ended
        module_type = type(module).__name__
        selection = self._selections.get((name, module_type)) or self._select(name, module_type)
        listeners = selection[1]
        if not listeners:
            return None
        return self._dispatch_forward(listeners, name, module_type, index, args, kwargs, output)

    def _dispatch_forward(
        self,
        listeners: tuple[_Listener, ...],
        name: str,
        module_type: str,
        index: int,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        output: Any,
    ) -> Any:
        """``hookgrad_forward`` to ``listeners``: the replacement output, or None."""
        event = forward_event(name, module_type, index, self.step, args, kwargs, output)
        final = self._chain(listeners, event, "output", None)
        return None if final is event else final.__dict__["output"]  # as returned

    def _dispatch_backward_pre(
        self,
        record: _CallRecord,
        listeners: tuple[_Listener, ...],
        grad_output: tuple[Any, ...],
    ) -> tuple[Any, ...] | None:
        """``hookgrad_backward_pre`` to ``listeners``: the replacement grad_output, or None."""
        event = backward_pre_event(
            record.module_name, record.module_type, record.call_index, self.step, grad_output
        )
        final = self._chain(listeners, event, "grad_output", checked_gradients)
        return None if final is event else final.__dict__["grad_output"]  # as returned

    def _dispatch_full_backward(
        self,
        record: _CallRecord,
        listeners: tuple[_Listener, ...],
        grad_input: tuple[Any, ...],
        grad_output: tuple[Any, ...],
    ) -> tuple[Any, ...] | None:
        """``hookgrad_full_backward`` to ``listeners``: the replacement grad_input, or None."""
        event = full_backward_event(
            record.module_name,
            record.module_type,
            record.call_index,
            self.step,
            grad_input,
            grad_output,
        )
        final = self._chain(listeners, event, "grad_input", checked_gradients)
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
        check: Callable[[Any, Any], Any] | None,
    ) -> _E:
        """Call each listener; a non-None return, once ``check``-ed against the current value,
        replaces ``field`` for the next one. A raise or a bad return is the plugin's failure."""
        failures = self.failures
        for listener in listeners:
            if listener.name in failures.disabled:
                continue
            try:
                result = listener.call(event)
                if result is not None:
                    value = result if check is None else check(result, getattr(event, field))
                    event = event.replaced(field, value)
            except Exception as error:
                failures.event_failed(listener.name, listener.config.on_error, error, event)
        return event


_BACKWARD_REGISTER: Final = {
    BACKWARD_PRE: register_module_full_backward_pre_hook,
    FULL_BACKWARD: register_module_full_backward_hook,
}


def _sync(
    handles: dict[str, RemovableHandle],
    wanted: set[str],
    register: Callable[[str], RemovableHandle],
) -> None:
    """Remove the hooks in ``handles`` not ``wanted``; register the missing ones (in order)."""
    for name in tuple(handles):
        if name not in wanted:
            handles.pop(name).remove()
    for name in MODULE_HOOKS:
        if name in wanted and name not in handles:
            handles[name] = register(name)
