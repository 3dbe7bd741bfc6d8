"""nan_guard on torch tensors: the same records, errors, vetoes and repairs as on hookgrad's.

Each scenario drives the plugin's hook implementations with events built from the payload
models, once with hookgrad tensors and once with torch tensors of the same values, and
compares what comes out: records (counts, numel, labels, roles), error fields, the veto and
the gradients left behind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeAlias

import numpy as np
import pytest

import hookgrad
from hookgrad.hookspecs import (
    BackwardBeginEvent,
    ForwardEvent,
    FullBackwardEvent,
    OptimizerStepPreEvent,
)
from hookgrad.plugins.nan_guard import NanGuard, NonFiniteGradientError, NonFiniteGradientWarning
from hookgrad.testing import capture_events

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")
Make: TypeAlias = Callable[[Any], Any]
ENGINES: dict[str, tuple[Make, Make]] = {
    # engine -> (tensor from values, parameter from values)
    "hookgrad": (
        lambda v: hookgrad.tensor(np.asarray(v, dtype=np.float32)),
        lambda v: hookgrad.nn.Parameter(hookgrad.tensor(np.asarray(v, dtype=np.float32))),
    ),
    "torch": (
        lambda v: torch.tensor(np.asarray(v, dtype=np.float32)),
        lambda v: torch.nn.Parameter(torch.tensor(np.asarray(v, dtype=np.float32))),
    ),
}

GRADS = {  # parameter name -> (value, grad)
    "0.weight": ([[1.0, 2.0], [3.0, 4.0]], [[0.5, 0.5], [0.5, 0.5]]),
    "2.weight": ([[1.0, -1.0]], [[NAN, INF]]),
    "2.bias": ([0.0], [-INF]),
    "4.bias": ([2.0, 2.0], [1.0, NAN]),
}


def step_event(param: Make, step: int = 0) -> OptimizerStepPreEvent:
    """An SGD step over GRADS, as engine parameters with their .grad set."""
    pairs = []
    for name, (value, grad) in GRADS.items():
        p = param(value)
        p.grad = param(grad).detach()
        pairs.append((name, p))
    return OptimizerStepPreEvent(
        step=step, phase="optimizer_step_pre", optimizer_type="SGD", parameters=tuple(pairs)
    )


def backward(name: str, grad_input: tuple[Any, ...], grad_output: tuple[Any, ...]) -> Any:
    return FullBackwardEvent(
        step=0,
        phase="backward",
        module_name=name,
        module_type="Linear",
        call_index=0,
        grad_input=grad_input,
        grad_output=grad_output,
    )


def grads_of(event: OptimizerStepPreEvent) -> dict[str, Any]:
    return {
        n: None if p.grad is None else np.array(p.grad.detach().numpy())
        for n, p in event.parameters
    }


def run_backward_then_step(engine: str, action: str) -> dict[str, Any]:
    """Backward through modules 4, 2 (the producer), 0, then a step: what nan_guard did."""
    tensor, param = ENGINES[engine]
    plugin = NanGuard(NanGuard.Config(action=action))  # type: ignore[arg-type]
    outcome: dict[str, Any] = {}
    with capture_events(("nan_guard", plugin)) as capture:
        loss = tensor(1.0)
        plugin.hookgrad_backward_begin(
            BackwardBeginEvent(step=0, phase="backward_begin", loss=loss, gradient=None)
        )
        finite = tensor([[1.0, 2.0]])
        into_4 = tensor([[0.5, 0.5, 0.5]])
        bad = tensor([[1.0, NAN, INF, -INF]])
        plugin.hookgrad_full_backward(backward("4", (into_4, None), (finite,)))
        plugin.hookgrad_full_backward(backward("2", (bad,), (into_4,)))
        plugin.hookgrad_full_backward(backward("0", (None,), (bad,)))
        event = step_event(param)
        try:
            outcome["veto"] = plugin.hookgrad_optimizer_step_pre(event)
        except NonFiniteGradientError as error:
            outcome["error"] = (str(error), error.finding, error.propagators, error.parameters)
        outcome["grads"] = grads_of(event)
        outcome["records"] = capture.of_plugin("nan_guard")
    return outcome


@pytest.mark.parametrize("action", ["raise", "warn", "zero", "skip_step"])
def test_backward_findings_and_actions_match(action: str) -> None:
    """Producer, propagator, counts and numel; then the same error, veto or repair."""
    outcomes = []
    for engine in ENGINES:
        warns = action == "warn"
        with pytest.warns(NonFiniteGradientWarning) if warns else contextlib.nullcontext():
            outcomes.append(run_backward_then_step(engine, action))
    ours, theirs = outcomes
    assert theirs["records"] == ours["records"]
    nonfinite = [r for r in ours["records"] if r["kind"] == "nonfinite"]
    assert [(r["module_name"], r["data"]["role"], r["data"]["tensor"]) for r in nonfinite] == [
        ("2", "producer", "grad_input[0]"),
        ("0", "propagator", "grad_output[0]"),
    ]
    assert nonfinite[0]["data"] | {} == {
        "phase": "backward",
        "tensor": "grad_input[0]",
        "role": "producer",
        "nan": 1,
        "inf": 2,
        "numel": 4,
    }
    assert theirs.get("error") == ours.get("error")
    assert theirs.get("veto") == ours.get("veto")
    assert theirs["grads"].keys() == ours["grads"].keys()
    for name, grad in ours["grads"].items():
        np.testing.assert_array_equal(theirs["grads"][name], grad)
    if action == "raise":
        assert ours["error"][3] == ("2.weight", "2.bias", "4.bias")
    if action == "zero":
        assert [r["data"] for r in ours["records"] if r["kind"] == "zeroed"] == [{"count": 4}]
        np.testing.assert_array_equal(ours["grads"]["2.weight"], [[0.0, 0.0]])
    if action == "skip_step":
        assert ours["veto"] is False and set(ours["grads"].values()) == {None}


def test_parameter_check_names_the_first_bad_gradient_alike() -> None:
    """No backward finding: the first non-finite .grad (optimizer order) is the step finding."""
    outcomes = []
    for engine in ENGINES:
        plugin = NanGuard(NanGuard.Config(action="raise", check_backward=False))
        with capture_events(("nan_guard", plugin)) as capture:
            with pytest.raises(NonFiniteGradientError) as raised:
                plugin.hookgrad_optimizer_step_pre(step_event(ENGINES[engine][1], step=3))
            outcomes.append((capture.of_plugin("nan_guard"), str(raised.value)))
    assert outcomes[0] == outcomes[1]
    (record,) = outcomes[0][0]
    assert (record["module_name"], record["step"], record["data"]) == (
        "2",
        3,
        {"phase": "step", "tensor": "weight.grad", "role": "producer", "nan": 1, "inf": 1}
        | {"numel": 2},
    )


def test_parameter_check_confirms_overflowing_norms_alike() -> None:
    """A huge finite .grad (its norm overflows) ahead of a NaN one: the NaN one is named, on
    the step's shared norms of either engine."""
    for engine in ENGINES:
        make = ENGINES[engine][1]
        pairs = []
        for name, grad in (("a.weight", [3e38, 1e30]), ("b.weight", [1.0, NAN])):
            p = make([0.0, 0.0])
            p.grad = make(grad).detach()
            pairs.append((name, p))
        event = OptimizerStepPreEvent(
            step=0, phase="optimizer_step_pre", optimizer_type="SGD", parameters=tuple(pairs)
        )
        plugin = NanGuard(NanGuard.Config(action="warn", check_backward=False))
        with (
            capture_events(("nan_guard", plugin)) as capture,
            pytest.warns(NonFiniteGradientWarning),
        ):
            plugin.hookgrad_optimizer_step_pre(event)
        (record,) = capture.of_plugin("nan_guard")
        assert (record["module_name"], record["data"]["tensor"]) == ("b", "weight.grad"), engine


def test_forward_producer_is_found_alike() -> None:
    """A NaN output[1] from finite arguments (and non-tensor ones) is a forward producer."""
    outcomes = []
    for engine in ENGINES:
        tensor = ENGINES[engine][0]
        plugin = NanGuard(NanGuard.Config(action="raise", check_forward=True))
        event = ForwardEvent(
            step=1,
            phase="forward",
            module_name="split",
            module_type="SplitHalf",
            call_index=0,
            args=(tensor([1.0, 2.0]), 3),
            kwargs={"flag": True},
            output=(tensor([1.0, 2.0]), tensor([[NAN, 1.0, INF]])),
        )
        with capture_events(("nan_guard", plugin)) as capture:
            with pytest.raises(NonFiniteGradientError) as raised:
                plugin.hookgrad_forward(event)
            outcomes.append((capture.of_plugin("nan_guard"), raised.value.finding))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0][0]["data"] == {
        "phase": "forward",
        "tensor": "output[1]",
        "role": "producer",
        "nan": 1,
        "inf": 1,
        "numel": 3,
    }
