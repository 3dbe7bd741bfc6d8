"""Selectors restrict which module calls reach a plugin; on_error decides what a raise does."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import hookgrad
from hookgrad import nn
from hookgrad.hookspecs import PluginConfig, hookimpl
from hookgrad.runtime import PluginError, PluginHookWarning

from .conftest import Recorder, global_hook_counts


def _model() -> nn.Sequential:
    return nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))


def _names(recorder: Recorder) -> list[str]:
    return [name for phase, name, _, _ in recorder.events if phase == "forward"]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, ["0", "1", "2", ""]),
        ({"modules": ["0"]}, ["0"]),
        ({"exclude": ["0", ""]}, ["1", "2"]),
        ({"module_types": ["Linear"]}, ["0", "2"]),
        (
            {"modules": ["*"], "exclude": ["1"], "module_types": ["Linear", "Sequential"]},
            ["0", "2", ""],
        ),
    ],
)
def test_selectors_restrict_calls(pm, make_bridge, settings, expected):
    """modules / exclude / module_types decide which module calls the plugin hears."""
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    make_bridge({"recorder": PluginConfig(**settings)})
    _model()(hookgrad.tensor([[1.0, 2.0]]))
    assert _names(recorder) == expected


def test_selectors_apply_per_plugin(pm, make_bridge):
    """Two plugins with different selectors each hear only their own modules."""
    first, second = Recorder(), Recorder()
    pm.register(first, name="first")
    pm.register(second, name="second")
    make_bridge({"first": PluginConfig(modules=["0"]), "second": PluginConfig(modules=["2"])})
    _model()(hookgrad.tensor([[1.0, 2.0]]))
    assert (_names(first), _names(second)) == (["0"], ["2"])


def test_disabled_in_config_plugin_is_not_called(pm, make_bridge):
    """enabled=False: the plugin stays registered but the bridge neither calls it nor hooks."""
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    make_bridge({"recorder": PluginConfig(enabled=False)})
    _model()(hookgrad.tensor([[1.0, 2.0]]))
    assert recorder.events == []
    assert global_hook_counts() == [0] * 6


class Boom(Exception):
    pass


class Broken:
    """Raises in every module hook; remembers the last exception it raised."""

    def __init__(self) -> None:
        self.calls = 0
        self.error: Exception | None = None

    def _raise(self) -> None:
        self.calls += 1
        self.error = Boom(f"call {self.calls}")
        raise self.error

    @hookimpl
    def hookgrad_forward(self, event: Any) -> None:
        self._raise()

    @hookimpl
    def hookgrad_backward_pre(self, event: Any) -> None:
        self._raise()


class Double:
    @hookimpl
    def hookgrad_forward(self, event: Any) -> Any:
        return event.output * 2


def _layer() -> nn.Linear:
    layer = nn.Linear(2, 1)
    layer.weight = nn.Parameter(hookgrad.tensor([[1.0, 2.0]]))
    layer.bias = nn.Parameter(hookgrad.tensor([0.5]))
    return layer


def test_on_error_raise_names_the_plugin_and_chains_its_exception(pm, make_bridge):
    """on_error="raise" (the default): a PluginError naming plugin, hook, module, phase and
    step leaves the module call, raised from the plugin's own exception."""
    broken = Broken()
    pm.register(broken, name="broken")
    make_bridge()
    with pytest.raises(PluginError) as info:
        _layer()(hookgrad.tensor([[1.0, 1.0]]))
    assert str(info.value) == (
        "plugin 'broken' failed in hookgrad_forward (module '' (Linear), phase 'forward', "
        "step 0): Boom('call 1')"
    )
    culprit = info.value
    assert (culprit.plugin, culprit.hook, culprit.phase, culprit.module, culprit.step) == (
        "broken",
        "hookgrad_forward",
        "forward",
        "",
        0,
    )
    assert culprit.__cause__ is broken.error


def test_on_error_raise_propagates_out_of_backward(pm, make_bridge):
    """A raising backward pre-plugin aborts backward with a PluginError; no grad accumulates."""

    class BrokenBackward:
        @hookimpl
        def hookgrad_backward_pre(self, event: Any) -> None:
            raise Boom("backward")

    pm.register(BrokenBackward(), name="broken")
    make_bridge()
    layer = _layer()
    out = layer(hookgrad.tensor([[1.0, 1.0]], requires_grad=True))
    with pytest.raises(PluginError, match="'broken' failed in hookgrad_backward_pre") as info:
        out.sum().backward()
    assert isinstance(info.value.__cause__, Boom)
    assert layer.weight.grad is None


def test_on_error_warn_goes_on_with_the_unchanged_payload(pm, make_bridge):
    """on_error="warn": a PluginHookWarning naming plugin, hook, module, phase; later plugins run."""
    logged: list[dict[str, Any]] = []
    broken = Broken()
    pm.register(broken, name="broken")
    pm.register(Double(), name="double")
    make_bridge(
        {"broken": PluginConfig(on_error="warn")}, on_error_log=lambda **kw: logged.append(kw)
    )
    layer = _layer()
    with pytest.warns(PluginHookWarning) as record:
        out = layer(hookgrad.tensor([[1.0, 1.0]]))
    assert out.tolist() == [[7.0]]  # 3.5, unchanged by broken, doubled by the next plugin
    message = str(record[0].message)
    for part in ("'broken'", "hookgrad_forward", "module ''", "'forward'", "Boom"):
        assert part in message
    assert logged == [
        {
            "plugin": "broken",
            "hook": "hookgrad_forward",
            "module": "",
            "phase": "forward",
            "error": broken.error,
        }
    ]
    with pytest.warns(PluginHookWarning):  # warn keeps calling (and warning)
        layer(hookgrad.tensor([[1.0, 1.0]]))
    assert broken.calls == 2


def test_on_error_disable_warns_once_and_stops_calling(pm, make_bridge):
    """on_error="disable": one warning and log entry, then the plugin is never called again."""
    logged: list[dict[str, Any]] = []
    broken = Broken()
    pm.register(broken, name="broken")
    bridge = make_bridge(
        {"broken": PluginConfig(on_error="disable")}, on_error_log=lambda **kw: logged.append(kw)
    )
    layer = _layer()
    x = hookgrad.tensor([[1.0, 1.0]], requires_grad=True)
    with pytest.warns(PluginHookWarning, match="disabled"):
        out = layer(x)
    assert out.tolist() == [[3.5]]
    out.sum().backward()  # the graph's records still fire, but nobody listens any more
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer(x).sum().backward()
    assert broken.calls == 1
    assert [entry["phase"] for entry in logged] == ["forward"]
    assert bridge.disabled == {"broken"}
    assert global_hook_counts() == [0] * 6  # it was the only listener
    assert pm.is_registered(broken)  # disabled in this bridge, still known to the runtime


def test_disable_keeps_the_other_plugins(pm, make_bridge):
    """Disabling one plugin leaves the others' replacements and the global hooks in place."""
    pm.register(Broken(), name="broken")
    pm.register(Double(), name="double")
    make_bridge({"broken": PluginConfig(on_error="disable")})
    layer = _layer()
    with pytest.warns(PluginHookWarning):
        layer(hookgrad.tensor([[1.0, 1.0]]))
    assert layer(hookgrad.tensor([[1.0, 1.0]])).tolist() == [[7.0]]
    assert global_hook_counts() == [1, 1, 1, 1, 0, 0]
