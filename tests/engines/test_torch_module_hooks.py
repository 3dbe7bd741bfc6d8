"""Module backward events on torch from tensor hooks, checked against torch's own module hooks.

The reference is torch's global full backward (pre-)hooks on a copy of the model whose in-place
ops are made out of place (torch's hooks cannot run on the in-place one); the adapter runs on
the in-place model itself.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hookgrad.engines import engine_named  # noqa: E402

Event = tuple[str, str, tuple[float | None, ...]]


def norms(grads: tuple[Any, ...]) -> tuple[float | None, ...]:
    return tuple(None if g is None else round(float(g.norm()), 4) for g in grads)


class Recorder:
    """A ModuleHooks that records every backward event by module name (and may scale)."""

    def __init__(self, model: nn.Module, scale_pre_of: str | None = None) -> None:
        self.names = {module: name or "root" for name, module in model.named_modules()}
        self.events: list[Event] = []
        self.forward_calls: list[str] = []
        self.failed: list[str] = []
        self.scale_pre_of = scale_pre_of

    def forward_pre(self, module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, None]:
        return _Call(self, self.names.get(module, "?")), None

    def forward(self, module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        self.forward_calls.append(self.names.get(module, "?"))

    def forward_failed(self, module: nn.Module) -> None:
        self.failed.append(self.names.get(module, "?"))


class _Call:
    def __init__(self, recorder: Recorder, name: str) -> None:
        self.recorder, self.name = recorder, name

    def backward_pre(self, grad_output: tuple[Any, ...]) -> tuple[Any, ...] | None:
        self.recorder.events.append(("pre", self.name, norms(grad_output)))
        if self.name == self.recorder.scale_pre_of:
            return tuple(g * 0.1 for g in grad_output)
        return None

    def full_backward(self, grad_input: tuple[Any, ...], grad_output: tuple[Any, ...]) -> None:
        self.recorder.events.append(("full", self.name, norms(grad_input)))


@contextmanager
def adapter(recorder: Recorder) -> Iterator[None]:
    handle = engine_named("torch").install_module_hooks(recorder, backward=True)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        handle.remove()


def torch_reference(model: nn.Module, run: Any, scale_pre_of: str | None = None) -> list[Event]:
    """The events of torch's own global module backward hooks while ``run(model)`` runs."""
    from torch.nn.modules import module as m

    names = {module: name or "root" for name, module in model.named_modules()}
    events: list[Event] = []

    def pre(module: nn.Module, grad_output: Any) -> Any:
        events.append(("pre", names[module], norms(grad_output)))
        if names[module] == scale_pre_of:
            return tuple(g * 0.1 for g in grad_output)
        return None

    handles = [
        m.register_module_full_backward_pre_hook(pre),
        m.register_module_full_backward_hook(
            lambda module, gi, go: events.append(("full", names[module], norms(gi)))
        ),
    ]
    try:
        with warnings.catch_warnings():  # torch's note on hooks of modules with no input grad
            warnings.filterwarnings("ignore", "Full backward hook is firing", UserWarning)
            run(model)
    finally:
        for handle in handles:
            handle.remove()
    return events


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))


def test_an_mlp_gets_torchs_events_in_torchs_order() -> None:
    """Sequential MLP, input needing no grad: every event, value and order as torch's hooks."""
    model, reference = mlp(), mlp()
    x = torch.randn(4, 3)
    expected = torch_reference(reference, lambda m: m(x).pow(2).sum().backward())
    recorder = Recorder(model)
    with adapter(recorder):
        model(x).pow(2).sum().backward()
    assert recorder.events == expected
    assert len(expected) == 12 and expected[0][:2] == ("pre", "root")


def test_an_input_that_requires_grad_gets_its_grad_input() -> None:
    """With x.requires_grad, the first layer's and the root's grad_input are x's gradient."""
    model, reference = mlp(), mlp()
    x = torch.randn(4, 3, requires_grad=True)
    expected = torch_reference(reference, lambda m: m(x).sum().backward())
    recorder = Recorder(model)
    with adapter(recorder):
        model(x).sum().backward()
    assert recorder.events == expected


def test_a_backward_pre_replacement_flows_on_as_with_torchs_hook() -> None:
    """backward_pre of the Tanh scaling grad_output by 0.1: parameter grads equal torch's."""
    model, reference = mlp(), mlp()
    x = torch.randn(4, 3)
    expected = torch_reference(reference, lambda m: m(x).sum().backward(), scale_pre_of="1")
    recorder = Recorder(model, scale_pre_of="1")
    with adapter(recorder):
        model(x).sum().backward()
    assert recorder.events == expected
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad)


class Block(nn.Module):
    """A torchvision-style basic block: in-place ReLUs and ``out += identity``."""

    def __init__(self, channels: int, inplace: bool) -> None:
        super().__init__()
        self.inplace = inplace
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=inplace)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        out = out.add_(x) if self.inplace else out + x
        return self.relu(out)


def resnet(inplace: bool) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(inplace=inplace),
        Block(4, inplace),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 2),
    )


def test_torchs_own_hooks_fail_on_the_in_place_model() -> None:
    """The reason for the adapter: torch's full backward hooks break ReLU(inplace=True)."""
    with pytest.raises(RuntimeError, match="BackwardHookFunction is a view"):
        torch_reference(resnet(True), lambda m: m(torch.randn(2, 3, 8, 8)).sum().backward())


def test_an_in_place_resnet_block_gets_torchs_events() -> None:
    """In-place ReLUs and out += x: the events of the out-of-place copy under torch's hooks,
    but for the block's first conv, whose input also feeds the residual (summed gradient)."""
    model, reference = resnet(True), resnet(False)
    x = torch.randn(2, 3, 8, 8)
    expected = torch_reference(reference, lambda m: m(x).sum().backward())
    recorder = Recorder(model)
    with adapter(recorder):
        model(x).sum().backward()
    shared_input = ("full", "3.conv1")
    assert [e[:2] for e in recorder.events] == [e[:2] for e in expected]
    differ = [(mine, theirs) for mine, theirs in zip(recorder.events, expected) if mine != theirs]
    assert [mine[:2] for mine, _ in differ] == [shared_input]
    block_input = next(e for e in expected if e[:2] == ("full", "3"))[2]
    assert differ[0][0][2] == block_input  # the whole gradient reaching the block's input
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad)


def test_events_fire_once_per_backward_on_a_reused_leaf_input() -> None:
    """The same leaf input over three iterations: each backward gets its events once."""
    model = mlp()
    x = torch.randn(4, 3, requires_grad=True)
    recorder = Recorder(model)
    counts = []
    with adapter(recorder):
        for _ in range(3):
            model(x).sum().backward()
            counts.append(len(recorder.events))
    assert counts == [12, 24, 36]


class TwoOut(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2, x * 3


def test_an_output_without_gradient_is_none_in_grad_output() -> None:
    """A two-output module whose second output is unused: grad_output (g, None), as torch."""
    model = nn.Sequential(nn.Linear(2, 2), TwoOut())
    reference = copy.deepcopy(model)
    x = torch.randn(3, 2)
    expected = torch_reference(reference, lambda m: m(x)[0].sum().backward())
    recorder = Recorder(model)
    with adapter(recorder):
        model(x)[0].sum().backward()
    assert recorder.events == expected
    pre_of_two_out = next(e for e in recorder.events if e[:2] == ("pre", "1"))
    assert pre_of_two_out[2][0] is not None and pre_of_two_out[2][1] is None


class Boom(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("boom")


def test_a_failing_forward_is_reported_and_leaves_no_call_behind() -> None:
    """forward_failed names the module; the next calls pair their hooks correctly."""
    model = nn.Sequential(nn.Linear(2, 2), Boom())
    recorder = Recorder(model)
    with adapter(recorder):
        with pytest.raises(ValueError, match="boom"):
            model(torch.randn(1, 2))
        good = nn.Linear(2, 1)
        recorder.names[good] = "good"
        good(torch.randn(1, 2)).sum().backward()
    assert recorder.failed == ["1", "root"]
    assert recorder.forward_calls == ["0", "good"]
    assert [e[:2] for e in recorder.events] == [("pre", "good"), ("full", "good")]


def test_removing_the_hooks_stops_the_events() -> None:
    """After remove(), module calls and backwards reach the recorder no more."""
    model = mlp()
    recorder = Recorder(model)
    with adapter(recorder):
        pass
    model(torch.randn(2, 3)).sum().backward()
    assert recorder.events == [] and recorder.forward_calls == []
