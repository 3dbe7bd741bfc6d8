"""The hook specifications as pluggy sees them: names, parameters, validation, keyword calls."""

from __future__ import annotations

import inspect
from typing import Any

import pluggy
import pytest

from hookgrad.hookspecs import (
    HOOK_EVENTS,
    PROJECT_NAME,
    Event,
    FullBackwardEvent,
    OptimizerStepPreEvent,
    Stage,
    call_order,
    hookimpl,
    specs,
    stage,
)

LIFECYCLE = {"hookgrad_configure", "hookgrad_unconfigure"}


def test_project_name_is_hookgrad() -> None:
    """Markers and manager share the project name "hookgrad"."""
    assert PROJECT_NAME == "hookgrad"

    @hookimpl
    def hookgrad_configure(runtime: Any) -> None: ...

    assert hasattr(hookgrad_configure, "hookgrad_impl")


def test_plugin_manager_accepts_every_spec(pm: pluggy.PluginManager) -> None:
    """add_hookspecs registers one spec per name in specs.__all__, and nothing else."""
    hooks = {name for name in vars(pm.hook) if name.startswith("hookgrad_")}
    assert hooks == set(specs.__all__)
    for name in specs.__all__:
        assert getattr(pm.hook, name).spec is not None, name


def test_specs_are_the_event_hooks_plus_lifecycle() -> None:
    """Every event model's hook is a spec; the specs beyond them are configure/unconfigure."""
    assert set(specs.__all__) == set(HOOK_EVENTS) | LIFECYCLE


@pytest.mark.parametrize("name", sorted(specs.__all__))
def test_spec_takes_one_documented_argument(name: str) -> None:
    """Each spec takes `event` (or `runtime` for lifecycle) and documents it and its return."""
    fn = getattr(specs, name)
    expected = "runtime" if name in LIFECYCLE else "event"
    assert list(inspect.signature(fn).parameters) == [expected]
    doc = inspect.getdoc(fn) or ""
    assert f":param {expected}:" in doc
    assert "return" in doc.lower()
    assert "Fires" in doc


def test_only_the_veto_hook_is_firstresult(pm: pluggy.PluginManager) -> None:
    """hookgrad_optimizer_step_pre stops at the first non-None (False) result; others don't."""
    first = {name for name in specs.__all__ if getattr(pm.hook, name).spec.opts["firstresult"]}
    assert first == {"hookgrad_optimizer_step_pre"}


def test_plugin_class_is_called_with_keyword_arguments(
    pm: pluggy.PluginManager, events: dict[type[Event], Event]
) -> None:
    """A plugin object's @hookimpl methods register and receive the payload by keyword."""
    seen: list[tuple[str, Any]] = []

    class Recorder:
        @hookimpl
        def hookgrad_full_backward(self, event: FullBackwardEvent) -> None:
            seen.append(("full_backward", event))

        @hookimpl
        def hookgrad_configure(self, runtime: Any) -> None:
            seen.append(("configure", runtime))

    pm.register(Recorder(), name="recorder")
    event = events[FullBackwardEvent]
    assert pm.hook.hookgrad_full_backward(event=event) == []
    pm.hook.hookgrad_configure(runtime="rt")
    assert seen == [("full_backward", event), ("configure", "rt")]
    with pytest.raises(TypeError):
        pm.hook.hookgrad_full_backward(event)


def test_impl_may_accept_fewer_arguments(pm: pluggy.PluginManager) -> None:
    """An implementation that names no parameter is accepted and called (specs can grow)."""
    calls: list[str] = []

    class Quiet:
        @hookimpl
        def hookgrad_unconfigure(self) -> None:
            calls.append("unconfigure")

    pm.register(Quiet())
    pm.hook.hookgrad_unconfigure(runtime=None)
    assert calls == ["unconfigure"]


def test_impl_with_wrong_argument_name_is_rejected(pm: pluggy.PluginManager) -> None:
    """Registering an implementation whose argument is not in the spec fails naming it."""

    class Typo:
        @hookimpl
        def hookgrad_forward(self, evnt: Any) -> None: ...

    with pytest.raises(pluggy.PluginValidationError, match="evnt"):
        pm.register(Typo(), name="typo")
    assert pm.get_plugin("typo") is None


def test_misspelled_hook_is_caught_by_check_pending(pm: pluggy.PluginManager) -> None:
    """A hookimpl with no matching spec registers, and check_pending() reports it by name."""

    class Misspelled:
        @hookimpl
        def hookgrad_forwrd(self, event: Any) -> None: ...

    pm.register(Misspelled())
    with pytest.raises(pluggy.PluginValidationError, match="hookgrad_forwrd"):
        pm.check_pending()


def test_first_false_vetoes_through_pluggy(
    pm: pluggy.PluginManager, events: dict[type[Event], Event]
) -> None:
    """Called through pluggy, step_pre returns False once one plugin vetoes, None otherwise."""
    event = events[OptimizerStepPreEvent]

    class Allow:
        @hookimpl
        def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
            return None

    class Veto:
        @hookimpl
        def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> bool:
            return False

    pm.register(Allow())
    assert pm.hook.hookgrad_optimizer_step_pre(event=event) is None
    pm.register(Veto())
    assert pm.hook.hookgrad_optimizer_step_pre(event=event) is False


def _plugin(name: str, **opts: bool) -> object:
    """A plugin object named ``name`` implementing hookgrad_forward with marker ``opts``."""

    class Plugin:
        @hookimpl(**opts)
        def hookgrad_forward(self, event: Any) -> None: ...

    Plugin.__name__ = name
    return Plugin()


def test_call_order_is_registration_order_by_group(pm: pluggy.PluginManager) -> None:
    """call_order: tryfirst ones, then plain ones, then trylast ones, each in registration order."""
    markers = {"tryfirst": True}, {}, {"trylast": True}
    for name in ["p1", "f1", "l1", "p2", "f2", "l2", "p3"]:
        opts = markers[{"f": 0, "p": 1, "l": 2}[name[0]]]
        pm.register(_plugin(name, **opts), name=name)
    order = [impl.plugin_name for impl in call_order(pm, "hookgrad_forward")]
    assert order == ["f1", "f2", "p1", "p2", "p3", "l1", "l2"]
    # pluggy's own call order is the reverse within each group: the runtime must not use it.
    pluggy_order = [impl.plugin_name for impl in reversed(pm.hook.hookgrad_forward.get_hookimpls())]
    assert pluggy_order[:2] == ["f2", "f1"]


def test_call_order_after_unregister_and_reregister(pm: pluggy.PluginManager) -> None:
    """A plugin registered again goes to the end, as a removed and re-added torch hook does."""
    plugins = {name: _plugin(name) for name in "abc"}
    for name, plugin in plugins.items():
        pm.register(plugin, name=name)
    pm.unregister(plugins["a"])
    pm.register(plugins["a"], name="a")
    assert [impl.plugin_name for impl in call_order(pm, "hookgrad_forward")] == ["b", "c", "a"]


def test_call_order_rejects_wrappers(pm: pluggy.PluginManager) -> None:
    """A wrapper implementation makes call_order fail, naming the hook and the plugin."""

    class Wrapper:
        @hookimpl(wrapper=True)
        def hookgrad_forward(self, event: Any) -> Any:
            return (yield)

    pm.register(Wrapper(), name="wrapping")
    with pytest.raises(
        pluggy.PluginValidationError, match="'hookgrad_forward' of plugin 'wrapping'"
    ):
        call_order(pm, "hookgrad_forward")


def test_call_order_sorts_by_stage_within_each_group(pm: pluggy.PluginManager) -> None:
    """A stage orders implementations inside their group; registration order breaks ties.

    Registered clip-first, the pipeline still runs unscale, guard, stats, clip.
    """

    def staged(name: str, position: int | None, **opts: bool) -> object:
        def hookgrad_optimizer_step_pre(event: Any) -> None: ...

        function = hookgrad_optimizer_step_pre
        if position is not None:
            function = stage(position)(function)
        plugin = type(
            name, (), {"hookgrad_optimizer_step_pre": staticmethod(hookimpl(**opts)(function))}
        )
        return plugin()

    pm.register(staged("clip", Stage.CLIP, trylast=True), name="clip")
    pm.register(staged("stats", Stage.STATS), name="stats")
    pm.register(staged("third_party", None), name="third_party")
    pm.register(staged("guard", Stage.GUARD, tryfirst=True), name="guard")
    pm.register(staged("unscale", Stage.UNSCALE, tryfirst=True), name="unscale")
    order = [impl.plugin_name for impl in call_order(pm, "hookgrad_optimizer_step_pre")]
    assert order == ["unscale", "guard", "third_party", "stats", "clip"]
