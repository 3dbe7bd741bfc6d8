"""``hookgrad.tap``: a model's module events by name, for a while, and no hook left behind.

A :class:`Tap` hands plain library code what plugins get from the runtime, for the modules of
one model that a selector names: the same payloads (:mod:`hookgrad.hookspecs.events`, built
by :mod:`hookgrad.runtime._module_events` as the runtime's bridge builds them), sampled by
step, optionally with host copies of their tensors. It never replaces a value.

Where the hooks sit, per engine:

* hookgrad's numpy engine: hooks on the selected modules themselves (and a forward pre-hook
  on the model, which restarts the call indices). The backward events of a call belong to
  the forward call that built the graph, and the engine captures a module's backward hooks
  when a call starts (SEMANTICS B-19); so the backward hook is an :class:`_Entry`, and each
  call's forward pre-hook binds the entry that call captured to the call and puts a fresh
  one in the module's tables for the next call (as the bridge does with the global tables).
* torch: the engine's own module hooks (:meth:`hookgrad.engines.ModuleHookSource
  .install_module_hooks`), which deliver backward events from tensor hooks, so modules that
  work in place (``ReLU(inplace=True)``) keep working; the tap's hooks skip every module
  that is not a selected module of the model.

Threads: a tap acts on the work of the thread that started it, as a runtime does with
``threads="starter"``: other threads' calls of the model are not recorded.
"""

from __future__ import annotations

import difflib
from collections.abc import Container, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, get_args

import numpy as np

from ._tensor import Tensor
from .engines import Engine, ModuleHookSource, Removable, available_engines, engine_of
from .hookspecs import ModuleEvent, PluginConfig
from .hookspecs.events import ModulePhase
from .runtime._activation import unmatched_in
from .runtime._module_events import (
    backward_pre_event,
    forward_event,
    forward_pre_event,
    full_backward_event,
)
from .runtime._runtime import running_runtime
from .runtime._threads import current_thread

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["KINDS", "Tap", "tap"]

KINDS: Final[tuple[str, ...]] = get_args(ModulePhase)
"""The event kinds, as ``[plugins.event_log] hooks`` names them, in the order of one call."""

_FORWARD_PRE, _FORWARD, _BACKWARD_PRE, _BACKWARD = KINDS
_FIELD_KINDS: Final = {
    "args": (_FORWARD, _FORWARD_PRE),
    "kwargs": (_FORWARD, _FORWARD_PRE),
    "output": (_FORWARD,),
    "grad_input": (_BACKWARD,),
    "grad_output": (_BACKWARD, _BACKWARD_PRE),
}
"""Each tensor field of the payloads -> the kinds carrying it, the one tensors() prefers first."""


def tap(
    model: Any,
    selector: str | Sequence[str],
    kinds: Sequence[str] = (_FORWARD, _BACKWARD),
    every: int = 1,
    steps: Container[int] | None = None,
    max_records: int | None = None,
    capture: bool = False,
) -> Tap:
    """A :class:`Tap` on the modules of ``model`` that ``selector`` names; use it in ``with``.

    Args:
        model: a ``hookgrad.nn.Module`` or a ``torch.nn.Module`` (a DDP wrapper stands for the
            model it wraps). Module names are qualified from it (``"encoder.0.attn"``, ``""``
            for the model itself).
        selector: an fnmatch glob on those names, or several (any match selects), as a
            plugin's ``modules`` setting.
        kinds: which events to record: ``forward_pre``, ``forward``, ``backward_pre``,
            ``backward`` (the full backward hook).
        every: record the events of steps 0, N, 2N, ... only.
        steps: record the events of these steps only (``range(100, 110)``); None: all.
        max_records: stop recording after this many records; None: no limit.
        capture: keep a host copy (numpy) of every tensor of each record, for :meth:`Tap.tensors`.
    """
    return Tap(model, selector, kinds, every, steps, max_records, capture)


class Tap:
    """Records the module events of selected modules of one model while open.

    :attr:`records` holds the payloads, in the order the events happened. ``step`` is the
    step of the runtime acting on the thread when the tap started, or, without one, how many
    backward passes (``backward()`` calls, one per root) that thread completed since the
    tap started; the first step is 0.
    """

    def __init__(
        self,
        model: Any,
        selector: str | Sequence[str],
        kinds: Sequence[str] = (_FORWARD, _BACKWARD),
        every: int = 1,
        steps: Container[int] | None = None,
        max_records: int | None = None,
        capture: bool = False,
    ) -> None:
        self.kinds = _checked_kinds(kinds)
        if type(every) is not int or every < 1:
            raise ValueError(f"every must be an int >= 1, got {every!r}")
        if max_records is not None and (type(max_records) is not int or max_records < 0):
            raise ValueError(f"max_records must be None or an int >= 0, got {max_records!r}")
        globs = (selector,) if isinstance(selector, str) else tuple(selector)
        self.selection = PluginConfig(modules=globs)
        self.engine = _engine_of_model(model)
        self.model = self.engine.unwrap(model)
        self.every = every
        self.steps = steps
        self.max_records = max_records
        self.capture = capture
        self.records: list[ModuleEvent] = []
        self._copies: list[dict[str, Any]] = []  # per record, when capturing: field -> copy
        self._sites: dict[int, _Site] = {}  # id(module) -> its site, the selected modules
        self._counts: dict[int, int] = {}  # id(site) -> its calls since the model's last call
        self._handles: list[Removable] = []
        self._runtime: Runtime | None = None
        self._passes = 0
        self._thread = 0
        self._open = False
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Tap:
        """Install the hooks (ValueError if the selector names no module of the model)."""
        if self._open or self._closed:
            raise RuntimeError("a Tap starts once; make a new one with hookgrad.tap(...)")
        self._sites = self._select()
        self._thread = current_thread()
        self._runtime = running_runtime()
        self._open = True
        try:
            if self._runtime is None:
                self._handles.append(self.engine.observe_backward(None, self._backward_ended))
            if self.engine.name == "hookgrad":
                self._handles.extend(_install_on_modules(self))
            else:
                self._handles.append(_install_engine_hooks(self))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Remove every hook; no event is recorded from now on. Harmless when repeated."""
        self._open = False
        self._closed = True
        while self._handles:
            self._handles.pop().remove()

    def __enter__(self) -> Tap:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ results
    @property
    def modules(self) -> list[str]:
        """The names of the modules the selector selected, in the model's order."""
        return [site.name for site in self._sites.values()]

    def tensors(self, name: str, field: str) -> list[Any]:
        """Host copies of ``field`` of module ``name``'s records, one per recorded call, in order.

        ``field`` is ``output``, ``args``, ``kwargs``, ``grad_input`` or ``grad_output``;
        ``args`` and ``kwargs`` come from ``forward`` records (``forward_pre`` ones when only
        those are recorded), ``grad_output`` from ``backward`` records (else ``backward_pre``).
        A tensor is a numpy array, a tuple field a tuple of them (None where the event has
        None), a dict field a dict. Needs ``capture=True``.
        """
        if not self.capture:
            raise RuntimeError("this tap keeps no tensors: start it with capture=True")
        kinds = _FIELD_KINDS.get(field)
        if kinds is None:
            raise ValueError(f"no tensor field {field!r}; fields: {', '.join(_FIELD_KINDS)}")
        if name not in self.modules:
            raise ValueError(_unknown(f"module {name!r} is not tapped", name, self.modules))
        kind = next((k for k in kinds if k in self.kinds), None)
        if kind is None:
            raise ValueError(
                f"{field!r} comes with {' or '.join(kinds)} records; this tap records "
                f"{', '.join(self.kinds)}"
            )
        return [
            copies[field]
            for record, copies in zip(self.records, self._copies)
            if record.module_name == name and record.phase == kind
        ]

    # ------------------------------------------------------------------ recording
    def _acts_here(self) -> bool:
        """The owner check: open, and the calling thread is the one that started the tap."""
        return self._open and current_thread() == self._thread

    def _model_called(self) -> None:
        """The model's call begins: call indices restart (as they do per outermost call in
        the runtime's events)."""
        if self._acts_here():
            self._counts.clear()
            for site in self._sites.values():
                site.calls.clear()

    def _step(self) -> int:
        runtime = self._runtime
        return self._passes if runtime is None else runtime.step

    def _sampled(self, step: int) -> bool:
        return (
            self._open
            and step % self.every == 0
            and (self.steps is None or step in self.steps)
            and (self.max_records is None or len(self.records) < self.max_records)
        )

    def _record(self, event: ModuleEvent) -> None:
        self.records.append(event)
        if self.capture:
            stored = event.__dict__
            self._copies.append({name: _host_copy(stored[name]) for name in event.read_only_fields})

    def _backward_ended(self, root: Any) -> None:
        if self._acts_here():
            self._passes += 1

    def _select(self) -> dict[int, _Site]:
        """The selected modules (first name of a shared one); ValueError naming the choices."""
        named = [(name, module) for name, module in self.model.named_modules()]
        unmatched = unmatched_in(
            self.selection, [(name, type(module).__name__) for name, module in named]
        )
        if unmatched is not None:
            described = unmatched.describe(f"the tapped {type(self.model).__name__}")
            raise ValueError(f"tap selector {unmatched.value!r} {described}")
        return {
            id(module): _Site(self, name, type(module).__name__)
            for name, module in named
            if self.selection.selects(name, type(module).__name__)
        }

    def __repr__(self) -> str:
        state = "open" if self._open else "closed" if self._closed else "new"
        return f"<Tap {state} modules={self.modules} kinds={list(self.kinds)} records={len(self.records)}>"


class _Site:
    """One selected module: its name, and (call index, step) of its calls in progress."""

    __slots__ = ("calls", "module_type", "name", "tap")

    def __init__(self, tap: Tap, name: str, module_type: str) -> None:
        self.tap = tap
        self.name = name
        self.module_type = module_type
        self.calls: list[tuple[int, int]] = []  # kept for the forward records only

    def enter(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call | None:
        """A call begins: record ``forward_pre``; the call's backward receiver, or None."""
        tap = self.tap
        counts = tap._counts
        index = counts.get(id(self), 0)
        counts[id(self)] = index + 1
        step = tap._step()
        if _FORWARD in tap.kinds:
            self.calls.append((index, step))
        if not tap._sampled(step):
            return None
        if _FORWARD_PRE in tap.kinds:
            tap._record(forward_pre_event(self.name, self.module_type, index, step, args, kwargs))
        if _BACKWARD_PRE in tap.kinds or _BACKWARD in tap.kinds:
            return _Call(self, index)
        return None

    def exit(self, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        """The call returned ``output``: record ``forward``."""
        if not self.calls:  # it began before the tap started
            return
        index, step = self.calls.pop()
        tap = self.tap
        if _FORWARD in tap.kinds and tap._sampled(step):
            tap._record(
                forward_event(self.name, self.module_type, index, step, args, kwargs, output)
            )

    def failed(self) -> None:
        """The call raised: it has no forward event."""
        if self.calls:
            self.calls.pop()


class _Call:
    """One recorded call's backward events (:class:`hookgrad.engines.ModuleCall`)."""

    __slots__ = ("index", "site")

    def __init__(self, site: _Site, index: int) -> None:
        self.site = site
        self.index = index

    def backward_pre(self, grad_output: tuple[Any, ...]) -> None:
        site, tap = self.site, self.site.tap
        step = tap._step()
        if _BACKWARD_PRE in tap.kinds and tap._sampled(step):
            tap._record(
                backward_pre_event(site.name, site.module_type, self.index, step, grad_output)
            )

    def full_backward(self, grad_input: tuple[Any, ...], grad_output: tuple[Any, ...]) -> None:
        site, tap = self.site, self.site.tap
        step = tap._step()
        if _BACKWARD in tap.kinds and tap._sampled(step):
            tap._record(
                full_backward_event(
                    site.name, site.module_type, self.index, step, grad_input, grad_output
                )
            )


# ---------------------------------------------------------------------- hookgrad's engine
class _Entry:
    """The backward hook one call of a module captures (see the module docstring): called
    as ``(module, grad_output)`` it is the pre-hook, as ``(module, grad_input, grad_output)``
    the full hook. Inert until the call's forward pre-hook binds it, and in other threads."""

    __slots__ = ("call", "thread")

    def __init__(self) -> None:
        self.call: _Call | None = None
        self.thread: int | None = None

    def __call__(self, module: Any, grads: tuple[Any, ...], *grad_output: Any) -> None:
        call = self.call
        if call is None or self.thread != current_thread():
            return
        if grad_output:
            call.full_backward(grads, grad_output[0])
        else:
            call.backward_pre(grads)


class _ModuleHooks:
    """The hooks on one selected module: the forward pre-hook binds the backward entry its
    call captured and puts a fresh one in the module's backward tables (``tables``: (table,
    handle id) pairs; empty when no backward kind is recorded)."""

    __slots__ = ("entry", "site", "tables")

    def __init__(self, site: _Site) -> None:
        self.site = site
        self.entry = _Entry()  # the entry the module's next call captures
        self.tables: tuple[tuple[dict[int, Any], int], ...] = ()

    def pre(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        tap = self.site.tap
        if not tap._acts_here():
            return
        call = self.site.enter(args, kwargs)
        if self.tables:
            captured = self.entry
            captured.call, captured.thread = call, tap._thread
            fresh = self.entry = _Entry()
            for table, key in self.tables:
                if key in table:
                    table[key] = fresh

    def post(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        if self.site.tap._acts_here():
            self.site.exit(args, kwargs, output)


def _install_on_modules(tap: Tap) -> list[Removable]:
    """Hooks on the model (call indices restart at each of its calls) and each selected module."""
    handles: list[Removable] = [
        tap.model.register_forward_pre_hook(lambda module, args: tap._model_called())
    ]
    modules = {id(module): module for _, module in tap.model.named_modules()}
    for key, site in tap._sites.items():
        module = modules[key]
        hooks = _ModuleHooks(site)
        tables = []
        for kind, table, register in (
            (_BACKWARD_PRE, module._backward_pre_hooks, module.register_full_backward_pre_hook),
            (_BACKWARD, module._backward_hooks, module.register_full_backward_hook),
        ):
            if kind in tap.kinds:  # a backward hook the tap does not record costs a call
                handle = register(hooks.entry)
                handles.append(handle)
                tables.append((table, handle.id))
        hooks.tables = tuple(tables)
        handles.append(module.register_forward_pre_hook(hooks.pre, with_kwargs=True))
        if _FORWARD in tap.kinds:
            handles.append(module.register_forward_hook(hooks.post, with_kwargs=True))
    return handles


# ---------------------------------------------------------------------- engines hooking themselves
class _EngineHooks:
    """The tap as an engine that installs module hooks itself calls it (torch): every module
    call of the process, of which only the selected modules' are the tap's."""

    __slots__ = ("tap",)

    def __init__(self, tap: Tap) -> None:
        self.tap = tap

    def _site(self, module: Any) -> _Site | None:
        tap = self.tap
        return tap._sites.get(id(module)) if tap._acts_here() else None

    def forward_pre(self, module: Any, args: tuple[Any, ...]) -> tuple[_Call | None, None]:
        if module is self.tap.model:
            self.tap._model_called()
        site = self._site(module)
        if site is None:
            return None, None
        return site.enter(args, {}), None

    def forward(
        self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
    ) -> None:
        site = self._site(module)
        if site is not None:
            site.exit(args, kwargs, output)

    def forward_failed(self, module: Any) -> None:
        site = self._site(module)
        if site is not None:
            site.failed()


def _install_engine_hooks(tap: Tap) -> Removable:
    engine = tap.engine
    assert isinstance(engine, ModuleHookSource)
    backward = _BACKWARD_PRE in tap.kinds or _BACKWARD in tap.kinds
    return engine.install_module_hooks(_EngineHooks(tap), backward=backward)


# ---------------------------------------------------------------------- helpers
def _engine_of_model(model: Any) -> Engine:
    """The engine whose module ``model`` is (TypeError if none is)."""
    for engine in available_engines():
        if isinstance(model, engine.api.nn.Module):
            return engine
    raise TypeError(f"tap needs a hookgrad or torch nn.Module, got {type(model).__name__}")


def _checked_kinds(kinds: Sequence[str]) -> tuple[str, ...]:
    if isinstance(kinds, str):
        kinds = (kinds,)
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(_unknown(f"unknown tap kind {kind!r}", kind, list(KINDS)))
    if not kinds:
        raise ValueError(f"kinds must name at least one of {', '.join(KINDS)}")
    return tuple(kind for kind in KINDS if kind in kinds)


def _unknown(what: str, value: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(value, choices, n=1)
    guess = f"; did you mean {close[0]!r}?" if close else ""
    return f"{what}{guess} (choices: {', '.join(repr(c) for c in choices)})"


def _host_copy(value: Any) -> Any:
    """``value`` with every tensor in it a numpy copy on the host (containers rebuilt)."""
    if isinstance(value, Tensor):
        return np.array(value._data, copy=True)
    kind = type(value)
    if kind is tuple or kind is list:
        return kind(_host_copy(v) for v in value)
    if kind is dict:
        return {k: _host_copy(v) for k, v in value.items()}
    if engine_of(value) is not None:  # another engine's tensor (torch)
        host = value.detach().cpu()
        if str(host.dtype) == "torch.bfloat16":  # numpy has no bfloat16
            host = host.float()
        return np.array(host.numpy(), copy=True)
    return value
