"""nan_guard's backward check: one screen of the backward's gradients when it ends, a search of
the module calls only when that screen finds NaN/Inf, and what the search then sees."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

import hookgrad
from hookgrad import nn
from hookgrad.engines import engine_of
from hookgrad.hookspecs import FullBackwardEvent, hookimpl
from hookgrad.plugins.nan_guard import NonFiniteGradientError
from hookgrad.testing import capture_events

from .test_nan_guard import NAN, _torch_copy, guard, make_input, make_model, nonfinite

CHAIN = [  # the findings of make_model()'s backward: layer 2's backward makes the NaN
    ("2", "backward", "grad_input[0]", "producer"),
    ("1", "backward", "grad_output[0]", "propagator"),
    ("0", "backward", "grad_output[0]", "propagator"),
    ("", "backward", "grad_input[0]", "propagator"),
]


@pytest.fixture
def screens(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[Any]]]:
    """Every batch the numpy engine's first_nonfinite is given, in order."""
    engine = type(engine_of(hookgrad.ones(1)))
    real = engine.first_nonfinite
    batches: list[list[Any]] = []

    def spy(values: Any, skip: Any = None) -> int | None:
        batches.append(list(values))
        return real(values, skip)

    monkeypatch.setattr(engine, "first_nonfinite", staticmethod(spy))
    yield batches


class Calls:
    """A plugin that notes each module call's gradients (the event's stored tensors) and how
    many screens nan_guard had made by then."""

    def __init__(self, screens: list[list[Any]]) -> None:
        self.screens = screens
        self.grads: list[Any] = []
        self.screened_before: list[int] = []

    @hookimpl
    def hookgrad_full_backward(self, event: FullBackwardEvent) -> None:
        stored = event.__dict__
        self.grads += [*stored["grad_output"], *stored["grad_input"]]
        self.screened_before.append(len(self.screens))


def test_a_clean_backward_is_screened_once_when_it_ends(screens: list[list[Any]]) -> None:
    """Default settings: no module call is checked during backward; one screen, given every
    gradient of every call in call order, runs when the backward ends."""
    calls = Calls(screens)
    model = make_model(nn.Linear)
    with capture_events(("calls", calls), guard()) as capture:
        model(make_input()).sum().backward()
    assert capture.records == []
    assert calls.screened_before == [0] * 6  # 5 layers and the root
    [batch] = screens
    assert len(batch) == len(calls.grads) == 12
    assert all(a is b for a, b in zip(batch, calls.grads, strict=True))


def test_a_failed_screen_searches_from_the_call_holding_the_first_bad_gradient(
    screens: list[list[Any]],
) -> None:
    """NaN made by layer 2: after the screen, the calls are checked one by one from layer 2's
    (the calls before it are finite), with the findings and error of a per-call check."""
    with capture_events(guard()) as capture, pytest.raises(NonFiniteGradientError) as info:
        make_model()(make_input()).sum().backward()
    assert nonfinite(capture) == CHAIN
    assert (info.value.module_name, info.value.propagators) == ("2", ("1", "0", ""))
    # the screen, then calls 2, 1, 0 and the root (not 4 and 3)
    assert [len(batch) for batch in screens] == [12, 2, 2, 2, 2]


class Raising(hookgrad.autograd.Function):
    """Identity forward; a backward that raises (a custom op failing under the NaN)."""

    @staticmethod
    def forward(ctx: Any, x: hookgrad.Tensor) -> hookgrad.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: hookgrad.Tensor) -> hookgrad.Tensor:
        raise FloatingPointError("backward of layer 0 refuses NaN")


class RaisingLinear(nn.Linear):
    def forward(self, x: hookgrad.Tensor) -> hookgrad.Tensor:
        return Raising.apply(super().forward(x))


@pytest.mark.parametrize("then", ["step", "backward"])
def test_the_calls_of_a_backward_that_raised_are_checked_at_the_next_step_or_backward(
    then: str,
) -> None:
    """A backward that raises after layer 2 made the NaN (no backward end): its calls are
    checked at the next optimizer step (which raises, naming layer 2) or the next backward
    (which records them before starting its own search)."""
    model = make_model()
    model[0] = RaisingLinear(3, 4)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    with capture_events(guard()) as capture:
        with pytest.raises(FloatingPointError):
            model(make_input()).sum().backward()
        assert nonfinite(capture) == []
        if then == "step":
            with pytest.raises(NonFiniteGradientError) as info:
                optimizer.step()
            assert (info.value.module_name, info.value.role) == ("2", "producer")
        else:
            model[2].broken = False
            model[0] = nn.Linear(3, 4)
            model(make_input()).sum().backward()  # clean: raises nothing
        found = nonfinite(capture)
    assert found == [("2", "backward", "grad_input[0]", "producer"), CHAIN[1]]


def test_calls_outside_an_observed_backward_are_checked_at_once() -> None:
    """autograd.grad notifies no backward begin or end: each call is checked as it comes, so
    the findings are recorded before autograd.grad returns."""
    model = make_model()
    x = make_input()
    with capture_events(guard(action="warn")) as capture:
        hookgrad.autograd.grad(model(x).sum(), x)
        assert nonfinite(capture) == CHAIN


@pytest.mark.parametrize(
    ("writer", "written"),
    [("1", "grad_input"), ("0", "grad_output")],
    ids=["own-grad-input", "received-grad-output"],
)
def test_a_gradient_written_in_place_is_judged_as_the_backward_left_it(
    writer: str, written: str
) -> None:
    """A user hook on a clean model writes NaN in place into the array between layers 1 and
    0 after the guard's hook saw it: the check reads it at the backward's end, so layer 1,
    whose grad_input that array is, is the producer, and the guard raises at that end."""

    def poison(module: Any, grad_input: Any, grad_output: Any) -> None:
        grads = grad_input if written == "grad_input" else grad_output
        grads[0].numpy()[0, 0] = NAN

    model = make_model(nn.Linear)
    model.get_submodule(writer).register_full_backward_hook(poison)
    with capture_events(guard()) as capture, pytest.raises(NonFiniteGradientError) as info:
        model(make_input()).sum().backward()
    assert (info.value.module_name, info.value.tensor, info.value.nan) == ("1", "grad_input[0]", 1)
    assert nonfinite(capture)[:2] == [
        ("1", "backward", "grad_input[0]", "producer"),
        ("0", "backward", "grad_output[0]", "propagator"),
    ]


def test_the_gradients_are_released_when_the_backward_ends() -> None:
    """The guard holds every call's gradients until the backward ends, and none after."""
    seen: list[weakref.ref[Any]] = []
    alive_at_last_call: list[int] = []

    class Refs:
        @hookimpl
        def hookgrad_full_backward(self, event: FullBackwardEvent) -> None:
            alive_at_last_call[:] = [sum(ref() is not None for ref in seen)]
            stored = event.__dict__
            grads = [*stored["grad_output"], *stored["grad_input"]]
            seen.extend(weakref.ref(g) for g in grads if g is not None)

    model = make_model(nn.Linear)
    with capture_events(("refs", Refs()), guard()):
        model(make_input()).sum().backward()
        gc.collect()
        assert [ref() for ref in seen] == [None] * len(seen)
    assert alive_at_last_call == [len(seen) - 2]  # all but the root call's own two


@pytest.mark.parametrize("broken", [False, True])
def test_a_torch_backward_syncs_the_host_once_and_names_the_same_producer(
    broken: bool, torch_host_syncs: list[str]
) -> None:
    """On torch, a backward's gradients are screened with one host sync in all (not one per
    module call); with layer 2's NaN backward the findings and error are hookgrad's."""
    torch = pytest.importorskip("torch")
    twin = _torch_copy(torch, make_model())
    if not broken:
        twin[2] = torch.nn.Linear(4, 4)
    x = torch.from_numpy(make_input().detach().numpy()).requires_grad_()
    with capture_events(guard(), engine="torch") as capture:
        loss = twin(x).sum()
        torch_host_syncs.clear()
        if not broken:
            loss.backward()
            assert capture.records == []
            assert len(torch_host_syncs) == 1
            return
        with pytest.raises(NonFiniteGradientError) as info:
            loss.backward()
    assert nonfinite(capture) == CHAIN
    assert (info.value.module_name, info.value.propagators) == ("2", ("1", "0", ""))
