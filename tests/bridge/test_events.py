"""Module events through the bridge: names, call indices, types and phases of real calls."""

from __future__ import annotations

from typing import Any

import hookgrad
from hookgrad import nn
from hookgrad.hookspecs import PluginConfig, hookimpl

from .conftest import Recorder


class TwiceTanh(nn.Module):
    """Calls one Tanh instance twice in its forward, around a Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.act = nn.Tanh()

    def forward(self, x: Any) -> Any:
        return self.act(self.fc(self.act(x)))


def test_sequential_and_loss_events(pm, make_bridge):
    """Sequential(Linear, ReLU, Linear) then MSELoss: every phase, named from its outermost call."""
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    make_bridge()
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    x = hookgrad.tensor([[1.0, -2.0]], requires_grad=True)
    loss = nn.MSELoss()(model(x), hookgrad.tensor([[0.5]]))
    loss.backward()
    assert recorder.events == [
        ("forward_pre", "", 0, "Sequential"),
        ("forward_pre", "0", 0, "Linear"),
        ("forward", "0", 0, "Linear"),
        ("forward_pre", "1", 0, "ReLU"),
        ("forward", "1", 0, "ReLU"),
        ("forward_pre", "2", 0, "Linear"),
        ("forward", "2", 0, "Linear"),
        ("forward", "", 0, "Sequential"),
        ("forward_pre", "", 0, "MSELoss"),
        ("forward", "", 0, "MSELoss"),
        ("backward_pre", "", 0, "MSELoss"),
        ("backward", "", 0, "MSELoss"),
        ("backward_pre", "", 0, "Sequential"),
        ("backward_pre", "2", 0, "Linear"),
        ("backward", "2", 0, "Linear"),
        ("backward_pre", "1", 0, "ReLU"),
        ("backward", "1", 0, "ReLU"),
        ("backward_pre", "0", 0, "Linear"),
        ("backward", "0", 0, "Linear"),
        ("backward", "", 0, "Sequential"),
    ]


def test_module_called_twice_gets_call_index_0_and_1(pm, make_bridge):
    """A module called twice in one forward: indices 0 and 1, and backward events keep them."""
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    make_bridge()
    model = TwiceTanh()
    model(hookgrad.tensor([[0.5, -1.0]], requires_grad=True)).sum().backward()
    assert recorder.events == [
        ("forward_pre", "", 0, "TwiceTanh"),
        ("forward_pre", "act", 0, "Tanh"),
        ("forward", "act", 0, "Tanh"),
        ("forward_pre", "fc", 0, "Linear"),
        ("forward", "fc", 0, "Linear"),
        ("forward_pre", "act", 1, "Tanh"),
        ("forward", "act", 1, "Tanh"),
        ("forward", "", 0, "TwiceTanh"),
        ("backward_pre", "", 0, "TwiceTanh"),
        ("backward_pre", "act", 1, "Tanh"),
        ("backward", "act", 1, "Tanh"),
        ("backward_pre", "fc", 0, "Linear"),
        ("backward", "fc", 0, "Linear"),
        ("backward_pre", "act", 0, "Tanh"),
        ("backward", "act", 0, "Tanh"),
        ("backward", "", 0, "TwiceTanh"),
    ]


def test_call_index_restarts_with_each_outermost_call(pm, make_bridge):
    """Two separate calls of the model are two outermost forwards: both count from 0."""
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    make_bridge({"recorder": PluginConfig(modules=["act"])})
    model = TwiceTanh()
    x = hookgrad.tensor([[0.5, -1.0]])
    model(x)
    model(x)
    forward = [(name, index) for phase, name, index, _ in recorder.events if phase == "forward"]
    assert forward == [("act", 0), ("act", 1), ("act", 0), ("act", 1)]


def test_backward_events_name_the_forward_call_of_their_graph(pm, make_bridge):
    """Two graphs of one model: each backward reports the call index of its own forward call."""
    recorder = Recorder()
    pm.register(recorder, name="recorder")
    make_bridge({"recorder": PluginConfig(modules=["act"])})
    model = TwiceTanh()
    x = hookgrad.tensor([[0.5, -1.0]], requires_grad=True)
    first = model(x).sum()
    second = model(x).sum()
    recorder.events.clear()
    second.backward()
    first.backward()
    backward = [(p, i) for p, _, i, _ in recorder.events if p.startswith("backward")]
    assert (
        backward == [("backward_pre", 1), ("backward", 1), ("backward_pre", 0), ("backward", 0)] * 2
    )


def test_events_carry_step_args_kwargs_and_tensors(pm, make_bridge):
    """Payloads hold the runtime's step, the call's args/kwargs/output and the real gradients."""
    seen: dict[str, Any] = {}

    class Capture:
        @hookimpl
        def hookgrad_forward(self, event: Any) -> None:
            seen["forward"] = event

        @hookimpl
        def hookgrad_full_backward(self, event: Any) -> None:
            seen["backward"] = event

    pm.register(Capture(), name="capture")
    bridge = make_bridge()
    bridge.step = 7
    layer = nn.Linear(2, 1)
    layer.weight = nn.Parameter(hookgrad.tensor([[3.0, -4.0]]))
    layer.bias = nn.Parameter(hookgrad.tensor([0.5]))
    x = hookgrad.tensor([[1.0, 2.0]], requires_grad=True)
    out = layer(x)
    out.backward(hookgrad.tensor([[2.0]]))
    forward, backward = seen["forward"], seen["backward"]
    assert (forward.step, forward.kwargs, len(forward.args)) == (7, {}, 1)
    assert forward.output.tolist() == [[-4.5]]
    assert backward.step == 7
    assert backward.grad_output[0].tolist() == [[2.0]]
    assert backward.grad_input[0].tolist() == [[6.0, -8.0]]


def test_forward_event_receives_keyword_arguments(pm, make_bridge):
    """The call's kwargs reach hookgrad_forward_pre and hookgrad_forward."""
    seen: list[tuple[str, dict[str, Any]]] = []

    class Scaled(nn.Module):
        def forward(self, x: Any, *, scale: float = 1.0) -> Any:
            return x * scale

    class Capture:
        @hookimpl
        def hookgrad_forward_pre(self, event: Any) -> None:
            seen.append((event.phase, event.kwargs))

        @hookimpl
        def hookgrad_forward(self, event: Any) -> None:
            seen.append((event.phase, event.kwargs))

    pm.register(Capture(), name="capture")
    make_bridge()
    assert Scaled()(hookgrad.tensor([2.0]), scale=3.0).tolist() == [6.0]
    assert seen == [("forward_pre", {"scale": 3.0}), ("forward", {"scale": 3.0})]
