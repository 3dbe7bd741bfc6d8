"""Plugin returns replace args, output, grad_output and grad_input as torch-style hooks do."""

from __future__ import annotations

from typing import Any

import numpy as np

import hookgrad
from hookgrad import nn
from hookgrad.hookspecs import PluginConfig, hookimpl
from hookgrad.nn.modules import module as registry


def _linear(weight: list[list[float]], bias: list[float]) -> nn.Linear:
    layer = nn.Linear(len(weight[0]), len(weight))
    layer.weight = nn.Parameter(hookgrad.tensor(weight))
    layer.bias = nn.Parameter(hookgrad.tensor(bias))
    return layer


def _mlp() -> nn.Sequential:
    """x=[[1,-2]] -> Linear -> h=[1,2] -> ReLU -> Linear -> 8; d(sum)/dh = [2,3]."""
    return nn.Sequential(
        _linear([[1.0, 0.0], [0.0, -1.0]], [0.0, 0.0]), nn.ReLU(), _linear([[2.0, 3.0]], [0.0])
    )


class DoubleArgs:
    @hookimpl
    def hookgrad_forward_pre(self, event: Any) -> Any:
        return event.args[0] * 2  # not a tuple: becomes (value,) as F-2


class AddOne:
    @hookimpl
    def hookgrad_forward(self, event: Any) -> Any:
        return event.output + 1


class ScaleGradOutput:
    @hookimpl
    def hookgrad_backward_pre(self, event: Any) -> Any:
        return tuple(None if g is None else g * 0.1 for g in event.grad_output)


class ClampGradInput:
    @hookimpl
    def hookgrad_full_backward(self, event: Any) -> Any:
        return tuple(None if g is None else g.clamp(-1.0, 1.0) for g in event.grad_input)


def test_forward_pre_replacement_matches_torch_style_hook(pm, make_bridge):
    """A non-tuple return replaces all positional args, as a global forward pre-hook's does."""
    layer = _linear([[1.0, 2.0]], [0.5])
    x = hookgrad.tensor([[1.0, 1.0]])
    with registry.register_module_forward_pre_hook(lambda m, args: args[0] * 2):
        expected = layer(x).tolist()
    pm.register(DoubleArgs(), name="double")
    make_bridge()
    assert layer(x).tolist() == expected == [[6.5]]


def test_forward_replacement_changes_the_output(pm, make_bridge):
    """A forward return replaces the output the caller gets, as a global forward hook's does."""
    layer = _linear([[1.0, 2.0]], [0.5])
    x = hookgrad.tensor([[1.0, 1.0]])
    with registry.register_module_forward_hook(lambda m, args, out: out + 1):
        expected = layer(x).tolist()
    pm.register(AddOne(), name="add_one")
    make_bridge()
    assert layer(x).tolist() == expected == [[4.5]]


def test_backward_pre_scaling_changes_parameter_grads(pm, make_bridge):
    """Scaling layer 2's grad_output by 0.1 scales every parameter gradient behind it (B-12)."""
    pm.register(ScaleGradOutput(), name="scale")
    make_bridge({"scale": PluginConfig(modules=["2"])})
    model = _mlp()
    model(hookgrad.tensor([[1.0, -2.0]], requires_grad=True)).sum().backward()
    np.testing.assert_allclose(model[2].weight.grad.numpy(), [[0.1, 0.2]], rtol=1e-6)
    np.testing.assert_allclose(model[2].bias.grad.numpy(), [0.1], rtol=1e-6)
    np.testing.assert_allclose(model[0].weight.grad.numpy(), [[0.2, -0.4], [0.3, -0.6]], rtol=1e-6)
    np.testing.assert_allclose(model[0].bias.grad.numpy(), [0.2, 0.3], rtol=1e-6)


def test_full_backward_clamp_changes_the_input_gradient(pm, make_bridge):
    """Clamping layer 2's grad_input [2,3] to [1,1] changes layer 0's grads and x.grad."""
    pm.register(ClampGradInput(), name="clamp")
    make_bridge({"clamp": PluginConfig(modules=["2"])})
    model = _mlp()
    x = hookgrad.tensor([[1.0, -2.0]], requires_grad=True)
    model(x).sum().backward()
    assert model[2].weight.grad.tolist() == [[1.0, 2.0]]  # its own grads are untouched
    assert model[0].weight.grad.tolist() == [[1.0, -2.0], [1.0, -2.0]]
    assert x.grad.tolist() == [[1.0, -1.0]]  # unclamped: [[2.0, -3.0]]


def test_full_backward_clamp_matches_a_module_hook(pm, make_bridge):
    """The bridge's clamp gives the gradients a torch-style full backward hook gives."""
    reference = _mlp()
    reference[2].register_full_backward_hook(
        lambda m, gi, go: tuple(None if g is None else g.clamp(-1.0, 1.0) for g in gi)
    )
    x_ref = hookgrad.tensor([[1.0, -2.0]], requires_grad=True)
    reference(x_ref).sum().backward()
    pm.register(ClampGradInput(), name="clamp")
    make_bridge({"clamp": PluginConfig(module_types=["Linear"], exclude=["0"])})
    model = _mlp()
    x = hookgrad.tensor([[1.0, -2.0]], requires_grad=True)
    model(x).sum().backward()
    assert x.grad.tolist() == x_ref.grad.tolist()
    assert model[0].bias.grad.tolist() == reference[0].bias.grad.tolist() == [1.0, 1.0]


def test_two_plugins_compose_in_registration_order(pm, make_bridge):
    """First registered runs first (torch order, not pluggy's), and the second sees its result."""
    seen: list[list[list[float]]] = []

    class Double:
        @hookimpl
        def hookgrad_forward(self, event: Any) -> Any:
            return event.output * 2

    class PlusOne:
        @hookimpl
        def hookgrad_forward(self, event: Any) -> Any:
            seen.append(event.output.tolist())
            return event.output + 1

    pm.register(Double(), name="double")
    pm.register(PlusOne(), name="plus_one")
    make_bridge()
    layer = _linear([[1.0, 2.0]], [0.5])
    assert layer(hookgrad.tensor([[1.0, 1.0]])).tolist() == [[8.0]]  # (3.5 * 2) + 1
    assert seen == [[[7.0]]]


def test_two_backward_plugins_compose(pm, make_bridge):
    """The second backward pre-plugin sees the first one's grad_output and scales it again."""
    seen: list[float] = []

    class Record:
        @hookimpl
        def hookgrad_backward_pre(self, event: Any) -> Any:
            seen.append(event.grad_output[0].item())
            return None

    pm.register(ScaleGradOutput(), name="scale")
    pm.register(Record(), name="record")
    pm.register(ScaleGradOutput(), name="scale_again")
    make_bridge()
    layer = _linear([[1.0, 2.0]], [0.5])
    layer(hookgrad.tensor([[3.0, 4.0]], requires_grad=True)).sum().backward()
    assert seen == [np.float32(0.1)]
    np.testing.assert_allclose(layer.weight.grad.numpy(), [[0.03, 0.04]], rtol=1e-6)


def test_no_replacement_returns_nothing_to_the_engine(pm, make_bridge):
    """Plugins returning None leave the output object itself in place."""

    class Observe:
        @hookimpl
        def hookgrad_forward(self, event: Any) -> None:
            return None

    pm.register(Observe(), name="observe")
    make_bridge()
    layer = nn.Identity()
    x = hookgrad.tensor([1.0])
    assert layer(x) is x
