"""The bridge runs a module call itself while its hooks are the only global ones (sole owner).

Every promise of the general path must hold on the owned one: the same events in the same
order, the same replacements, the same recovery after a failed forward. Each test runs the
same program on both paths; another global hook (a no-op) is what sends calls to the general one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hookgrad
from hookgrad import nn
from hookgrad.hookspecs import hookimpl
from hookgrad.nn.modules import module as registry

from .conftest import Recorder


class Doubler:
    """Replaces forward outputs and gradients: every replacement kind the bridge checks."""

    @hookimpl
    def hookgrad_forward(self, event: Any) -> Any:
        return event.output * 2.0

    @hookimpl
    def hookgrad_full_backward(self, event: Any) -> Any:
        return tuple(None if g is None else g * 3.0 for g in event.grad_input)


class Fails(nn.Module):
    """A module whose forward raises."""

    def forward(self, x: Any) -> Any:
        raise ValueError("forward failed")


def _noop(*args: Any) -> None:
    return None


def _on_both_paths(program: Callable[[], Any]) -> tuple[Any, Any]:
    """``program()`` on the owned path, then with another global hook (the general path)."""
    assert registry.GLOBAL_HOOKS.sole_owner is not None
    owned = program()
    with registry.register_module_forward_pre_hook(_noop):
        assert registry.GLOBAL_HOOKS.sole_owner is None
        general = program()
    return owned, general


def test_the_bridge_owns_calls_only_while_its_hooks_are_the_only_ones(pm, make_bridge):
    """sole_owner is the bridge after attach, None beside a user hook, the bridge again after."""
    pm.register(Recorder(), name="recorder")
    assert registry.GLOBAL_HOOKS.sole_owner is None
    bridge = make_bridge()
    assert registry.GLOBAL_HOOKS.sole_owner is bridge
    handle = registry.register_module_full_backward_hook(_noop)
    assert registry.GLOBAL_HOOKS.sole_owner is None
    handle.remove()
    assert registry.GLOBAL_HOOKS.sole_owner is bridge
    bridge.detach()
    assert registry.GLOBAL_HOOKS.sole_owner is None


def test_events_outputs_and_gradients_are_those_of_the_general_path(pm, make_bridge):
    """A model with a module called twice, replacements on: same events, output and grads."""
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    pm.register(Doubler(), name="doubler")
    make_bridge()
    act = nn.Tanh()
    model = nn.Sequential(nn.Linear(2, 3), act, nn.Linear(3, 3), act)
    x = hookgrad.tensor([[0.5, -1.0]], requires_grad=True)

    def program() -> tuple[Any, ...]:
        recorder.events.clear()
        model.zero_grad()
        x.grad = None
        out = model(x)
        out.sum().backward()
        grads = [p.grad.numpy().copy() for p in model.parameters()]
        return list(recorder.events), out.detach().numpy().copy(), grads, x.grad.numpy().copy()

    owned, general = _on_both_paths(program)
    assert owned[0] == general[0]
    assert len(owned[0]) == 20
    np.testing.assert_array_equal(owned[1], general[1])
    for a, b in zip(owned[2], general[2]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(owned[3], general[3])


def test_a_failed_forward_leaves_the_next_call_correctly_named(pm, make_bridge):
    """After a forward raises, the next outermost call is named "" again on both paths."""
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    make_bridge()
    model = nn.Sequential(nn.Linear(2, 2), Fails())
    layer = nn.Linear(2, 2)

    def program() -> list[tuple[str, str, int, str]]:
        recorder.events.clear()
        with pytest.raises(ValueError, match="forward failed"):
            model(hookgrad.ones(1, 2))
        layer(hookgrad.ones(1, 2))
        return list(recorder.events)

    owned, general = _on_both_paths(program)
    assert owned == general
    assert owned[-2:] == [("forward_pre", "", 0, "Linear"), ("forward", "", 0, "Linear")]


def test_another_threads_calls_get_no_events_on_either_path(pm, make_bridge):
    """threads="starter": a call in another thread is handed to the general path, unseen."""
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    make_bridge()
    layer = nn.Linear(2, 2)

    def program() -> list[tuple[str, str, int, str]]:
        recorder.events.clear()
        worker = threading.Thread(target=lambda: layer(hookgrad.ones(1, 2)).sum().backward())
        worker.start()
        worker.join()
        return list(recorder.events)

    assert _on_both_paths(program) == ([], [])


def test_a_listener_added_during_forward_hears_the_rest_of_the_call(pm, make_bridge):
    """A plugin registered from a forward pre-hook hears the events still to come, the outer
    call's forward and backward events included, as on the general path."""
    bridge = make_bridge()
    late = Recorder()

    class AddsALateListener:
        @hookimpl
        def hookgrad_forward_pre(self, event: Any) -> None:
            if event.module_name == "" and not pm.is_registered(late):
                pm.register(late, name="late")
                bridge.refresh()

    adder = AddsALateListener()
    pm.register(adder, name="adder")
    bridge.refresh()
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())

    def program() -> list[tuple[str, str, int, str]]:
        late.events.clear()
        model(hookgrad.ones(1, 2)).sum().backward()
        pm.unregister(late)
        bridge.refresh()
        return list(late.events)

    owned, general = _on_both_paths(program)
    assert owned == general
    assert owned[-4:] == [
        ("backward_pre", "1", 0, "Tanh"),
        ("backward", "1", 0, "Tanh"),
        ("backward_pre", "0", 0, "Linear"),
        ("backward", "0", 0, "Linear"),
    ]
    assert ("forward", "", 0, "Sequential") in owned
