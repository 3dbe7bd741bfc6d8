"""What the bridge registers: only the global hooks someone listens to, all gone on detach."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

import hookgrad
from hookgrad import nn
from hookgrad.hookspecs import hookimpl
from hookgrad.nn.modules import module as registry
from hookgrad.runtime import _bridge
from hookgrad.runtime._bridge import HookBridge

from .conftest import Recorder, global_hook_counts


class BackwardEndOnly:
    @hookimpl
    def hookgrad_backward_end(self, event: Any) -> None:
        pass


class FullBackwardOnly:
    def __init__(self) -> None:
        self.names: list[tuple[str, int]] = []

    @hookimpl
    def hookgrad_full_backward(self, event: Any) -> None:
        self.names.append((event.module_name, event.call_index))


def _fail(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("called although nobody listens")


def test_attach_without_module_listeners_registers_nothing(pm, make_bridge, monkeypatch):
    """No module spec implemented: empty global tables, and module calls take the fast path."""
    pm.register(BackwardEndOnly(), name="end_only")
    make_bridge()
    assert global_hook_counts() == [0] * 6
    assert registry.GLOBAL_HOOKS.active is False
    monkeypatch.setattr(registry, "call_with_hooks", _fail)
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    assert model(hookgrad.ones(1, 2)).shape == (1, 2)


def test_backward_only_plugin_builds_no_forward_payload(pm, make_bridge, monkeypatch):
    """Only full_backward implemented: forward hooks name calls but build no forward event."""
    plugin = FullBackwardOnly()
    pm.register(plugin, name="full_only")
    monkeypatch.setattr(_bridge, "forward_pre_event", _fail)
    monkeypatch.setattr(_bridge, "forward_event", _fail)
    monkeypatch.setattr(_bridge, "backward_pre_event", _fail)
    make_bridge()
    assert global_hook_counts() == [1, 1, 1, 1, 0, 1]
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    model(hookgrad.ones(1, 2, requires_grad=True)).sum().backward()
    assert plugin.names == [("1", 0), ("0", 0), ("", 0)]


def test_refresh_follows_registration_and_unregistration(pm, make_bridge):
    """refresh() adds the hooks a newly registered plugin needs and drops them when it goes."""
    bridge = make_bridge()
    assert global_hook_counts() == [0] * 6
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    bridge.refresh()
    assert global_hook_counts() == [1, 1, 1, 1, 1, 1]
    pm.unregister(recorder)
    bridge.refresh()
    assert global_hook_counts() == [0] * 6


def test_detach_removes_everything_and_is_idempotent(pm):
    """detach() empties every global table, twice is harmless, and no event follows."""
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    bridge = HookBridge(pm, {})
    with bridge:
        assert bridge.attached
        assert global_hook_counts() == [1, 1, 1, 1, 1, 1]
    bridge.detach()
    assert not bridge.attached
    assert global_hook_counts() == [0] * 6
    nn.Linear(2, 1)(hookgrad.ones(1, 2))
    assert recorder.events == []


def test_detached_bridge_ignores_graphs_built_while_attached(pm):
    """Backward after detach calls no plugin, even for a graph recorded while attached."""
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    with HookBridge(pm, {}):
        out = nn.Linear(2, 1)(hookgrad.ones(1, 2, requires_grad=True))
    out.sum().backward()
    assert [phase for phase, *_ in recorder.events] == ["forward_pre", "forward"]


def test_bridges_are_isolated(pm):
    """Two bridges on two managers each dispatch to their own plugins only."""
    import pluggy

    from hookgrad.hookspecs import PROJECT_NAME, specs

    other_pm = pluggy.PluginManager(PROJECT_NAME)
    other_pm.add_hookspecs(specs)
    mine, theirs = Recorder(), Recorder()
    pm.register(mine, name="r")
    other_pm.register(theirs, name="r")
    with HookBridge(pm, {}):
        nn.Tanh()(hookgrad.ones(1))
    with HookBridge(other_pm, {}):
        nn.ReLU()(hookgrad.ones(1))
    assert [t for *_, t in mine.events] == ["Tanh", "Tanh"]
    assert [t for *_, t in theirs.events] == ["ReLU", "ReLU"]
    assert global_hook_counts() == [0] * 6


def test_wrapper_implementations_are_rejected(pm):
    """attach() refuses a wrapper implementation: replacements compose one call at a time."""
    import pluggy

    class Wrapper:
        @hookimpl(wrapper=True)
        def hookgrad_forward(self, event: Any) -> Any:
            return (yield)

    pm.register(Wrapper(), name="wrapper")
    bridge = HookBridge(pm, {})
    with pytest.raises(pluggy.PluginValidationError, match="wrapper"):
        bridge.attach()
    bridge.detach()


def test_full_backward_listener_makes_global_regular_hooks_raise():
    """G-4: once a full backward plugin was attached, register_module_backward_hook raises."""
    script = textwrap.dedent(
        """
        import pluggy
        import hookgrad
        from hookgrad.hookspecs import PROJECT_NAME, hookimpl, specs
        from hookgrad.runtime._bridge import HookBridge

        class Plugin:
            @hookimpl
            def hookgrad_full_backward(self, event):
                pass

        pm = pluggy.PluginManager(PROJECT_NAME)
        pm.add_hookspecs(specs)
        pm.register(Plugin(), name="p")
        HookBridge(pm, {}).attach().detach()
        try:
            hookgrad.nn.modules.module.register_module_backward_hook(lambda *a: None)
            print("no error")
        except RuntimeError:
            print("RuntimeError")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "RuntimeError"


def test_importing_hookgrad_does_not_import_the_bridge():
    """The bridge is built on demand: ``import hookgrad`` leaves hookgrad.runtime unimported."""
    script = (
        "import sys, hookgrad; print(any(m.startswith('hookgrad.runtime') for m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "False", done.stderr
