"""The training-loop points of a runtime: backward begin/end and the optimizer step.

:class:`LoopHooks` installs, only for the specs some active plugin implements:

* a backward observer (:func:`hookgrad.autograd._observers.register_backward_observer`) for
  ``hookgrad_backward_begin`` (whose non-None returns replace the seed, composing) and
  ``hookgrad_backward_end``;
* an optimizer step gate (:func:`hookgrad.optim._hooks.register_optimizer_step_gate`) for
  ``hookgrad_optimizer_step_pre``: the first plugin returning False vetoes the step, the later
  ones are not called, ``hookgrad_optimizer_step_post`` fires at once with ``skipped=True``.
  In a distributed run the ranks agree first (:meth:`hookgrad.engines.Engine.agree_on_step`):
  a veto on any rank vetoes the step on every rank, ``vetoed_by`` then reads ``NAME@rankR``;
* a global optimizer step post hook for ``hookgrad_optimizer_step_post`` of a step taken. It
  also advances the step counter (``bridge.step``, the one counter every event is stamped
  with), so it is installed whenever any plugin implements any event hook, module hooks
  included: a vetoed step advances the counter from the gate.

Parameters get qualified names from the models given to :meth:`LoopHooks.watch`
(``Runtime.watch``), then from those the bridge has seen called as outermost modules (its
naming roots, known only when some plugin implements a module hook). When no plugin does and
no model was watched, a :class:`~hookgrad.runtime._naming.RootSpotter` notes the outermost
modules called until the first optimizer step and is then removed, so only that step's module
calls pay for global hooks. A parameter of none of
them takes its name from the optimizer's ``param_names`` (an optimizer built from
``model.named_parameters()``), owned by the module named before its last dot, of class ``""``;
failing that it is named ``param{i}`` (its index in the optimizer's order), owned by module
``""`` of class ``""``. A plugin with ``module_types`` set never receives those.
"""

from __future__ import annotations

import operator
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final, Protocol, TypeAlias

import numpy as np
import pluggy

from ..engines import Engine, HandleGroup, engine_named, process_rank
from ..hookspecs import (
    BackwardBeginEvent,
    BackwardEndEvent,
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginConfig,
    RunEvent,
    call_order,
)
from ._bridge import MODULE_HOOKS, HookBridge, _Listener
from ._naming import RootSpotter
from ._replacements import checked_seed

__all__ = ["LOOP_HOOKS", "LoopHooks"]

BACKWARD_BEGIN: Final = "hookgrad_backward_begin"
BACKWARD_END: Final = "hookgrad_backward_end"
STEP_PRE: Final = "hookgrad_optimizer_step_pre"
STEP_POST: Final = "hookgrad_optimizer_step_post"
LOOP_HOOKS: Final = (BACKWARD_BEGIN, BACKWARD_END, STEP_PRE, STEP_POST)

_DEFAULT_CONFIG: Final = PluginConfig()


class _Removable(Protocol):
    def remove(self) -> None: ...


# (qualified name, parameter, owning module's name, owning module's class name)
_Named: TypeAlias = list[tuple[str, Any, str, str]]
# id(parameter) -> (qualified name, owner's name, owner's class, owner's _parameters, key)
_Owner: TypeAlias = tuple[str, str, str, dict[str, Any], str]
# The (qualified name, parameter) pairs an optimizer event carries.
_Pairs: TypeAlias = tuple[tuple[str, Any], ...]


_OPTIMIZERS_KEPT: Final = 8
"""Optimizers whose named parameters are kept; past that the dead ones are let go."""


class _OptimizerNames:
    """An optimizer's named parameters as of one step, and the pairs each plugin selected from
    them (by plugin name), kept for the next steps: a step that finds them holding costs a
    few C-level list comparisons instead of a lookup per parameter."""

    __slots__ = ("_holders", "_keys", "_owners_built", "_params", "named", "optimizer", "selected")

    def __init__(
        self, optimizer: Any, named: _Named, owners: Mapping[int, _Owner], owners_built: int
    ) -> None:
        self.optimizer = weakref.ref(optimizer)
        self.named = named
        self.selected: dict[str | None, _Pairs] = {}
        self._owners_built = owners_built
        self._params = [p for _, p, _, _ in named]
        entries = [owners.get(id(p)) for p in self._params]
        self._holders = [entry[3] if entry else {} for entry in entries]
        self._keys = [entry[4] if entry else "" for entry in entries]

    def holds(self, optimizer: Any, owners_built: int) -> bool:
        """Whether nothing changed since: the same optimizer, owner table, parameters (the
        same tensors in the same order) and owners (each module still holds its parameter
        under its name). Only names found through owners are kept, so an optimizer's
        ``param_names`` need no check."""
        kept = self.optimizer()
        if kept is None or kept is not optimizer or owners_built != self._owners_built:
            return False
        params = [p for group in kept.param_groups for p in group["params"]]
        return (
            len(params) == len(self._params)
            and all(map(operator.is_, params, self._params))
            and all(map(operator.is_, map(dict.get, self._holders, self._keys), self._params))
        )


def _veto(result: Any, _: Any) -> bool:
    """Whether a ``hookgrad_optimizer_step_pre`` return (not None) vetoes the step.

    False vetoes, numpy's False too (what ``return np.isfinite(g).all()`` gives); True goes on
    like None. Anything else is the plugin's failure, as a bad replacement is.
    """
    if isinstance(result, bool | np.bool_):
        return not result
    raise TypeError(f"hookgrad_optimizer_step_pre must return False (veto) or None, got {result!r}")


class LoopHooks:
    """Dispatches the training-loop specs; shares ``step``, the owner check and the handling
    of plugin failures (``failures``, ``disabled``) with ``bridge``."""

    def __init__(
        self,
        pm: pluggy.PluginManager,
        configs: Mapping[str, PluginConfig],
        bridge: HookBridge,
        *,
        on_step_end: Callable[[], None] | None = None,
        on_models_known: Callable[[tuple[Any, ...]], None] | None = None,
        engines: Sequence[Engine] | None = None,
    ) -> None:
        self.pm = pm
        self.configs = configs
        self.bridge = bridge
        self.on_step_end = on_step_end
        self.on_models_known = on_models_known
        # whose loop points to install: the runtime sets the engines its config chose
        self.engines = tuple(engines) if engines is not None else (engine_named("hookgrad"),)
        bridge.failures.on_disable.append(self.refresh)
        self._counting = threading.Lock()
        self._attached = False
        self._listeners: dict[str, tuple[_Listener, ...]] = dict.fromkeys(LOOP_HOOKS, ())
        self._handles: dict[str, _Removable] = {}
        self._spotted = False  # a step was taken: the spotter's models are known
        self._shapes: dict[str, Any] = {}  # kind -> what the installed hook was built for
        self._watched: weakref.WeakKeyDictionary[Any, None] = weakref.WeakKeyDictionary()
        self._watched_added = 0  # modules ever watched: with the namer's, see _roots_key
        self._owners: dict[int, _Owner] = {}
        self._owners_key: tuple[int, ...] = ()  # _roots_key() when _owners was built
        self._owners_built = 0  # how many times _owners was built: an entry of it may be kept
        # id(optimizer) -> its named parameters while they hold (see _names_of)
        self._names: dict[int, _OptimizerNames] = {}
        # (plugin name, module name, module class) -> whether the plugin selects the module
        self._selects: dict[tuple[str, str, str], bool] = {}
        # What the gate of the step under way found, for its post hook: (optimizer, step,
        # named parameters, plugin name -> its selected pairs). Param groups do not change
        # inside optimizer.step(), so the post hook need not name and select them again.
        self._in_step: tuple[Any, int, _Named, dict[str | None, _Pairs]] | None = None

    # ------------------------------------------------------------------ lifecycle
    def attach(self) -> None:
        """Install the hooks someone listens to."""
        self._attached = True
        self.refresh()

    def detach(self) -> None:
        """Remove every hook installed; harmless when repeated."""
        self._attached = False
        self._listeners = dict.fromkeys(LOOP_HOOKS, ())
        for kind in tuple(self._handles):
            self._handles.pop(kind).remove()
        self._shapes.clear()

    def refresh(self) -> None:
        """Re-read who implements which spec; install and remove hooks to match."""
        if not self._attached:
            return
        self._listeners = {hook: self._listeners_of(hook) for hook in LOOP_HOOKS}
        self._selects.clear()
        begin, end = self._listeners[BACKWARD_BEGIN], self._listeners[BACKWARD_END]
        module_listeners = any(self._listeners_of(hook) for hook in MODULE_HOOKS)
        stepping = bool(self._listeners[STEP_PRE] or self._listeners[STEP_POST])
        wanted = {
            "observer": (bool(begin), bool(end)) if begin or end else None,
            "gate": True if self._listeners[STEP_PRE] or self._gate_stays() else None,
            "post": True if module_listeners or any(self._listeners.values()) else None,
            # Without module hooks the bridge sees no model: learn the models from the calls
            # before the first step, so parameters are named without watch().
            "spotter": True if stepping and not module_listeners and not self._spotted else None,
        }
        for kind, shape in wanted.items():
            if kind in self._handles and self._shapes.get(kind) != shape:
                self._handles.pop(kind).remove()
                del self._shapes[kind]
            if shape is not None and kind not in self._handles:
                self._handles[kind] = self._install(kind, shape)
                self._shapes[kind] = shape

    def _gate_stays(self) -> bool:
        """Whether the gate stays with no step_pre listener left: in a distributed run, once
        installed, for as long as the hooks are attached. Every rank takes part in the
        agreement of every step, so a plugin disabled on one rank only (``on_error``) must not
        take that rank out of it and leave the others waiting."""
        return "gate" in self._handles and process_rank()[1] > 1

    def _install(self, kind: str, shape: Any) -> _Removable:
        if kind == "spotter":
            return RootSpotter(self._spot, self.bridge.acts_here, self.engines)
        if kind == "gate":
            return HandleGroup(e.gate_optimizer_steps(partial(self._gate, e)) for e in self.engines)
        if kind == "post":
            return HandleGroup(e.on_optimizer_step_post(self._post_hook) for e in self.engines)
        has_begin, has_end = shape
        begin, end = (self._begin if has_begin else None), (self._end if has_end else None)
        return HandleGroup(e.observe_backward(begin, end) for e in self.engines)

    def _listeners_of(self, hook: str) -> tuple[_Listener, ...]:
        listeners = []
        for impl in call_order(self.pm, hook):
            config = self.configs.get(impl.plugin_name, _DEFAULT_CONFIG)
            if config.enabled and impl.plugin_name not in self.bridge.disabled:
                listeners.append(_Listener(impl, config))
        return tuple(listeners)

    # ------------------------------------------------------------------ backward
    def _begin(self, root: Any, gradient: Any) -> Any:
        if not self.bridge.acts_here():  # another thread's backward
            return None
        event = BackwardBeginEvent.trusted(
            {
                "step": self.bridge.step,
                "phase": "backward_begin",
                "loss": root,
                "gradient": gradient,
            }
        )
        seed = None  # the latest replacement, as returned
        for listener in self._listeners[BACKWARD_BEGIN]:
            if seed is not None and event.__dict__["gradient"] is not seed:
                # The next listener sees the seed replaced: a copy made only when there is
                # one (the last listener's replacement needs none).
                event = event.replaced("gradient", seed)
            result = self._call(listener, event, checked_seed, root)
            if result is not None:
                seed = result
        return seed

    def _end(self, root: Any) -> None:
        if not self.bridge.acts_here():
            return
        event = BackwardEndEvent.trusted(
            {"step": self.bridge.step, "phase": "backward_end", "loss": root}
        )
        for listener in self._listeners[BACKWARD_END]:
            self._call(listener, event)

    # ------------------------------------------------------------------ optimizer
    def _end_spotting(self) -> None:
        """The first step is here (or a model was watched): the models are known; remove the
        spotter and let ``on_models_known`` check them (before the step changes anything)."""
        if not self._spotted:
            self._spotted = True
            self.refresh()
            roots = self._roots()
            if self.on_models_known is not None and roots:
                self.on_models_known(roots)

    def _gate(self, engine: Engine, optimizer: Any) -> bool:
        """Ask the step_pre listeners; the engine agrees the verdict across the ranks of a
        distributed run (:meth:`~hookgrad.engines.Engine.agree_on_step`), even when a
        listener raised here, so that no rank steps alone or waits for ever."""
        if not self.bridge.acts_here():  # another thread's step: not ours to veto
            return True
        try:
            vetoed_by = self._vetoer(optimizer)
        except BaseException:
            engine.agree_on_step(optimizer, None, failed=True)
            raise
        vetoed_by = engine.agree_on_step(optimizer, vetoed_by, failed=False)
        if vetoed_by is None:
            return True
        self._after_step(optimizer, vetoed_by=vetoed_by)
        return False

    def _vetoer(self, optimizer: Any) -> str | None:
        """The name of the first step_pre listener vetoing this step, None if none does."""
        self._end_spotting()
        names = self._names_of(optimizer)
        named, selected = names.named, names.selected
        self._in_step = (optimizer, self.bridge.step, named, selected)
        kind = type(optimizer).__name__
        for listener in self._listeners[STEP_PRE]:
            event = OptimizerStepPreEvent.trusted(
                {
                    "step": self.bridge.step,
                    "phase": "optimizer_step_pre",
                    "optimizer_type": kind,
                    "optimizer": optimizer,
                    "parameters": self._selected(named, listener, selected),
                }
            )
            if self._call(listener, event, _veto, None):
                return listener.name
        return None

    def _post_hook(self, optimizer: Any) -> None:
        if not self.bridge.acts_here():
            return
        self._after_step(optimizer, vetoed_by=None)

    def _after_step(self, optimizer: Any, vetoed_by: str | None) -> None:
        """Fire ``hookgrad_optimizer_step_post``, advance the step counter, end the step
        (``on_step_end``: the runtime flushes its sinks there, so a completed step is on disk)."""
        listeners = self._listeners[STEP_POST]
        in_step, self._in_step = self._in_step, None
        if listeners:
            if in_step is not None and in_step[0] is optimizer and in_step[1] == self.bridge.step:
                named, selected = in_step[2], in_step[3]
            else:  # no gate ran for this step (no step_pre listener)
                names = self._names_of(optimizer)
                named, selected = names.named, names.selected
            for listener in listeners:
                event = OptimizerStepPostEvent.trusted(
                    {
                        "step": self.bridge.step,
                        "phase": "optimizer_step_post",
                        "optimizer_type": type(optimizer).__name__,
                        "optimizer": optimizer,
                        "parameters": self._selected(named, listener, selected),
                        "skipped": vetoed_by is not None,
                        "vetoed_by": vetoed_by,
                    }
                )
                self._call(listener, event)
        with self._counting:  # threads="all": steps of two threads at once both count
            self.bridge.step += 1
        self._end_spotting()
        if self.on_step_end is not None:
            self.on_step_end()

    def watch(self, module: Any) -> None:
        """Name parameters of ``module`` (and its submodules) relative to it (held weakly).

        A model named this way replaces spotting: the spotter is removed at once.
        """
        self._watch(module)
        self._end_spotting()

    def _spot(self, module: Any) -> None:
        self._watch(module)

    def _watch(self, module: Any) -> None:
        for engine in self.engines:  # DDP(net) names parameters as net does
            module = engine.unwrap(module)
        if module not in self._watched:
            self._watched[module] = None
            self._watched_added += 1

    def _roots_key(self) -> tuple[int, ...]:
        """Changes whenever the naming roots do (one added or gone), without listing them."""
        return (self._watched_added, len(self._watched), *self.bridge.naming_roots_key())

    def _roots(self) -> tuple[Any, ...]:
        return (*self._watched.keys(), *self.bridge.naming_roots())

    def named_parameters(self, optimizer: Any) -> _Named:
        """The optimizer's parameters with qualified names and owners (see the module doc).

        Owners are looked up in a table kept across steps, built from the naming roots and
        rebuilt only when the roots change or an entry went stale (its module no longer holds
        that parameter under that name), so a step costs a dict lookup per parameter rather
        than a walk over every module.
        """
        return self._names_of(optimizer).named

    def _names_of(self, optimizer: Any) -> _OptimizerNames:
        """``optimizer``'s named parameters and the plugins' selections of them: the ones of
        its last step while they still hold (:meth:`_OptimizerNames.holds`), else made anew."""
        if self._roots_key() != self._owners_key:
            self._rebuild_owners()
        kept = self._names.get(id(optimizer))
        if kept is not None and kept.holds(optimizer, self._owners_built):
            return kept
        named = self._name(optimizer)
        names = _OptimizerNames(optimizer, named, self._owners, self._owners_built)
        if all(id(p) in self._owners for _, p, _, _ in named):
            # (A parameter of no model is looked for again at every step: its model may
            # be called or watched later.)
            if len(self._names) >= _OPTIMIZERS_KEPT:
                self._names = {k: v for k, v in self._names.items() if v.optimizer() is not None}
            self._names[id(optimizer)] = names
        return names

    def _name(self, optimizer: Any) -> _Named:
        named: _Named = []
        rebuilt = False
        for group in optimizer.param_groups:
            names = group.get("param_names")
            for j, p in enumerate(group["params"]):
                owner = self._owner(p)
                if owner is None and not rebuilt and self._owners:
                    self._rebuild_owners()  # the structure may have changed
                    rebuilt = True
                    owner = self._owner(p)
                if owner is None and names is not None:
                    owner = (names[j], names[j].rpartition(".")[0], "")
                name, module_name, module_type = owner or (f"param{len(named)}", "", "")
                named.append((name, p, module_name, module_type))
        return named

    def _rebuild_owners(self) -> None:
        owners: dict[int, _Owner] = {}
        for root in self._roots():
            for module_name, module in root.named_modules():
                params = module._parameters
                for key, p in params.items():
                    if p is not None and id(p) not in owners:
                        qualified = f"{module_name}.{key}" if module_name else key
                        owners[id(p)] = (qualified, module_name, type(module).__name__, params, key)
        self._owners = owners
        self._owners_key = self._roots_key()
        self._owners_built += 1

    def _owner(self, p: Any) -> tuple[str, str, str] | None:
        """``p``'s (qualified name, owner name, owner class) if the table's entry still holds."""
        entry = self._owners.get(id(p))
        if entry is None or entry[3].get(entry[4]) is not p:
            return None
        return entry[0], entry[1], entry[2]

    def _selected(
        self, named: _Named, listener: _Listener, done: dict[str | None, _Pairs]
    ) -> _Pairs:
        """The (name, parameter) pairs whose owning module ``listener``'s config selects;
        ``done`` holds the pairs of the plugins already selected for this step."""
        pairs_of = done.get(listener.name)
        if pairs_of is not None:
            return pairs_of
        config = listener.config
        if config.modules == ("*",) and not config.exclude and not config.module_types:
            # Selects every module (the default): one tuple shared by all such listeners,
            # kept under None, which no plugin name is.
            pairs_of = done.get(None)
            if pairs_of is None:
                pairs_of = done[None] = tuple((name, p) for name, p, _, _ in named)
            done[listener.name] = pairs_of
            return pairs_of
        memo = self._selects
        pairs = []
        for name, p, module_name, module_type in named:
            key = (listener.name, module_name, module_type)
            chosen = memo.get(key)
            if chosen is None:
                chosen = memo[key] = listener.config.selects(module_name, module_type)
            if chosen:
                pairs.append((name, p))
        pairs_of = done[listener.name] = tuple(pairs)
        return pairs_of

    # ------------------------------------------------------------------ errors
    def _call(
        self,
        listener: _Listener,
        event: RunEvent,
        check: Callable[[Any, Any], Any] | None = None,
        against: Any = None,
    ) -> Any:
        """The listener's result (``check(result, against)``-ed when not None); None if it is
        disabled or failed under on_error "warn" / "disable" (:mod:`._failures`)."""
        failures = self.bridge.failures
        if listener.name in failures.disabled:
            return None
        try:
            result = listener.call(event)
            return result if result is None or check is None else check(result, against)
        except Exception as error:
            failures.event_failed(listener.name, listener.config.on_error, error, event)
            return None
