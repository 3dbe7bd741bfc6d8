"""A plugin that raises: on_error "raise", "warn" and "disable" at every hook point."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

import pytest

import hookgrad
from hookgrad import nn, optim
from hookgrad.hookspecs import HOOK_EVENTS, PluginConfig, hookimpl
from hookgrad.runtime import PluginCatalog, PluginError, PluginHookWarning, Runtime

EVENT_HOOKS = tuple(HOOK_EVENTS)
LIFECYCLE_HOOKS = ("hookgrad_configure", "hookgrad_unconfigure")


class Boom(Exception):
    pass


def _raising_at(hook: str) -> Any:
    """A plugin implementing only ``hook``, which raises Boom and counts its calls."""

    def implementation(self: Any, **kwargs: Any) -> None:
        self.calls += 1
        raise Boom(f"{hook} call {self.calls}")

    argname = "runtime" if hook in LIFECYCLE_HOOKS else "event"
    namespace: dict[str, Any] = {"calls": 0}
    exec(  # a real signature: pluggy passes the arguments a function names
        f"def {hook}(self, {argname}):\n    return implementation(self)",
        {"implementation": implementation},
        namespace,
    )
    namespace[hook] = hookimpl(namespace[hook])
    return type("Raising", (), namespace)()


class StepCounter:
    """Counts the optimizer steps it hears: a plugin that keeps working beside a broken one."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: Any) -> None:
        self.steps.append(event.step)


def _runtime() -> Runtime:
    return Runtime({}, environ={}, catalog=PluginCatalog(tuple))


def _train(steps: int = 3) -> nn.Sequential:
    hookgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x = hookgrad.tensor([[1.0, -1.0]], requires_grad=True)
    for _ in range(steps):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    return model


@pytest.mark.parametrize("hook", EVENT_HOOKS + LIFECYCLE_HOOKS)
def test_disable_at_any_hook_point_warns_once_and_training_goes_on(hook):
    """on_error="disable": one PluginHookWarning naming plugin and hook; the run continues
    without the plugin (never called again) and the other plugins keep working."""
    broken = _raising_at(hook)
    counter = StepCounter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runtime = _runtime()
        runtime.register(broken, name="broken", config=PluginConfig(on_error="disable"))
        runtime.register(counter, name="counter")
        with runtime:
            model = _train()
    expected = _train()
    plugin_warnings = [w for w in caught if issubclass(w.category, PluginHookWarning)]
    assert len(plugin_warnings) == 1, [str(w.message) for w in caught]
    message = str(plugin_warnings[0].message)
    assert "'broken'" in message and hook in message and "disabled" in message
    assert broken.calls == 1
    assert counter.steps == [0, 1, 2]
    for got, want in zip(model.parameters(), expected.parameters()):
        assert got.tolist() == want.tolist()


def test_a_disabled_plugin_is_not_unconfigured():
    """on_error="disable": the runtime never calls the plugin again, not even to unconfigure."""

    class BrokenForward:
        unconfigured = 0

        @hookimpl
        def hookgrad_forward(self, event: Any) -> None:
            raise Boom("forward")

        @hookimpl
        def hookgrad_unconfigure(self, runtime: Any) -> None:
            self.unconfigured += 1

    plugin = BrokenForward()
    runtime = _runtime()
    runtime.register(plugin, name="broken", config=PluginConfig(on_error="disable"))
    with pytest.warns(PluginHookWarning, match="disabled"), runtime:
        _train()
    assert plugin.unconfigured == 0


@pytest.mark.parametrize("hook", EVENT_HOOKS + LIFECYCLE_HOOKS)
def test_raise_names_plugin_and_hook_and_chains_the_original(hook):
    """on_error="raise": a PluginError naming plugin and hook, raised from the plugin's
    exception and an instance of its class too, so `except Boom` still catches it."""
    broken = _raising_at(hook)
    runtime = _runtime()
    runtime.register(broken, name="broken")
    with pytest.raises(PluginError) as info, runtime:
        _train()
    error = info.value
    assert str(error).startswith(f"plugin 'broken' failed in {hook} (")
    assert str(error).endswith(f": Boom('{hook} call 1')")
    assert (error.plugin, error.hook) == ("broken", hook)
    assert isinstance(error, Boom)
    assert isinstance(error.__cause__, Boom) and error.__cause__ is not error
    assert runtime.closed


@pytest.mark.parametrize("hook", EVENT_HOOKS)
def test_warn_warns_at_every_failure_and_training_goes_on(hook):
    """on_error="warn": one PluginHookWarning per failure, the plugin is called again."""
    broken = _raising_at(hook)
    runtime = _runtime()
    runtime.register(broken, name="broken", config=PluginConfig(on_error="warn"))
    with warnings.catch_warnings(record=True) as caught, runtime:
        warnings.simplefilter("always")
        _train()
    messages = [str(w.message) for w in caught if issubclass(w.category, PluginHookWarning)]
    assert len(messages) == broken.calls >= 3
    assert all(f"'broken' failed in {hook}" in m and "went on" in m for m in messages)


# ---------------------------------------------------------------------- bad replacements
def _returning(hook: str, value: Callable[[Any], Any]) -> Any:
    """A plugin whose ``hook`` returns ``value(event)``."""
    namespace: dict[str, Any] = {}
    exec(f"def {hook}(self, event):\n    return value(event)", {"value": value}, namespace)
    return type("Replacer", (), {hook: hookimpl(namespace[hook])})()


BAD_REPLACEMENTS = [
    ("hookgrad_backward_pre", lambda e: "nope", "must be a tuple of 1 Tensor or None, got str"),
    ("hookgrad_backward_pre", lambda e: e.grad_output * 2, "must have 1 entries, got 2"),
    ("hookgrad_backward_pre", lambda e: (hookgrad.ones(5),), "shape [5], expected [1, "),
    ("hookgrad_full_backward", lambda e: [1.0], "entry 0 must be a Tensor or None, got float"),
    ("hookgrad_full_backward", lambda e: (), "must have 1 entries, got 0"),
    ("hookgrad_full_backward", lambda e: (hookgrad.ones(7),), "shape [7], expected [1, "),
    ("hookgrad_backward_begin", lambda e: 2.0, "seed gradient must be a Tensor, got float"),
    ("hookgrad_backward_begin", lambda e: hookgrad.ones(3), "loss's shape [], got [3]"),
]


@pytest.mark.parametrize(("hook", "value", "reason"), BAD_REPLACEMENTS)
def test_a_bad_replacement_under_warn_is_ignored_with_a_warning(hook, value, reason):
    """on_error="warn": a replacement of the wrong type, length or shape is the plugin's
    failure: a warning naming plugin, hook and the problem; training uses the original."""
    runtime = _runtime()
    runtime.register(_returning(hook, value), name="bad", config=PluginConfig(on_error="warn"))
    with pytest.warns(PluginHookWarning) as caught, runtime:
        model = _train()
    message = str(caught[0].message)
    assert f"plugin 'bad' failed in {hook}" in message and reason in message
    for got, want in zip(model.parameters(), _train().parameters()):
        assert got.tolist() == want.tolist()


@pytest.mark.parametrize(("hook", "value", "reason"), BAD_REPLACEMENTS)
def test_a_bad_replacement_under_raise_is_a_plugin_error(hook, value, reason):
    """on_error="raise": a bad replacement raises a PluginError naming plugin and hook."""
    runtime = _runtime()
    runtime.register(_returning(hook, value), name="bad")
    with pytest.raises(PluginError, match=f"plugin 'bad' failed in {hook}") as info, runtime:
        _train()
    assert reason in str(info.value)
    assert isinstance(info.value.__cause__, TypeError | ValueError)


# ---------------------------------------------------------------------- Ctrl-C
CTRL_C_SCRIPT = """
import sys
from hookgrad import nn, ones, optim
from hookgrad.hookspecs import hookimpl
from hookgrad.runtime import PluginCatalog, Runtime

class FailsToFlush:
    @hookimpl
    def hookgrad_unconfigure(self, runtime):
        raise OSError("flush failed")

    @hookimpl
    def hookgrad_optimizer_step_post(self, event):
        if event.step == 5:
            print("training", flush=True)

runtime = Runtime({"events": {"jsonl": sys.argv[1]}}, environ={}, catalog=PluginCatalog(tuple))
runtime.register(FailsToFlush(), name="fails_to_flush")
model = nn.Linear(2, 1)
opt = optim.SGD(model.parameters(), lr=0.01)
with runtime:
    while True:
        opt.zero_grad()
        model(ones(4, 2)).sum().backward()
        opt.step()
"""


def test_ctrl_c_stays_a_keyboard_interrupt_when_a_plugin_fails_to_unconfigure(tmp_path):
    """SIGINT mid-training: the process dies of the KeyboardInterrupt, not of the plugin's
    unconfigure error, which is written to the log."""
    log = tmp_path / "events.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_SCRIPT, str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "training\n"
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode in (-signal.SIGINT, 130), stderr
    assert stderr.rstrip().splitlines()[-1] == "KeyboardInterrupt"
    assert "flush failed" not in stderr
    records = [json.loads(line) for line in log.read_text().splitlines()]
    failures = [r for r in records if r.get("event") == "unconfigure_error"]
    assert [(r["plugin"], r["error"]) for r in failures] == [
        ("fails_to_flush", "OSError('flush failed')")
    ]


def test_forward_replacements_are_not_checked():
    """As with torch's hooks, any forward pre-hook or forward return is used as it is: the
    module receives the new args, the caller the new output, with no plugin failure."""
    runtime = _runtime()
    runtime.register(_returning("hookgrad_forward_pre", lambda e: e.args[0] * 2), name="pre")
    runtime.register(_returning("hookgrad_forward", lambda e: (e.output, "extra")), name="out")
    layer = nn.Identity()
    with warnings.catch_warnings(), runtime:
        warnings.simplefilter("error")
        output, extra = layer(hookgrad.tensor([1.5]))
    assert (output.tolist(), extra) == ([3.0], "extra")
