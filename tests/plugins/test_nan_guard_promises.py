"""docs/plugins/nan_guard.md, promise by promise, with bad values put where users put them.

A NaN is made by a custom Function whose backward returns NaN (the page's own example), or by
setting a parameter's gradient directly; the expected findings follow from where it was put.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import hookgrad
from hookgrad.hookspecs import OptimizerStepPreEvent, hookimpl
from hookgrad.plugins.grad_scale import GradScale
from hookgrad.plugins.nan_guard import NanGuard, NonFiniteGradientError, NonFiniteGradientWarning
from hookgrad.testing import capture_events, global_hook_counts

nn = hookgrad.nn
pytestmark = pytest.mark.filterwarnings(
    "ignore:Full backward hook is firing:UserWarning",
    "ignore:invalid value encountered:RuntimeWarning",
)


class _NaNBackward(hookgrad.autograd.Function):
    """Identity forward; backward returns NaN, like a buggy custom op."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        return grad * float("nan")


class _Buggy(nn.Linear):
    def forward(self, x: Any) -> Any:
        return _NaNBackward.apply(super().forward(x))


def _model() -> nn.Sequential:
    hookgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), _Buggy(4, 4), nn.Tanh(), nn.Linear(4, 2))


def _guard(**settings: Any) -> tuple[str, NanGuard]:
    return ("nan_guard", NanGuard(NanGuard.Config(**settings)))


def _bad_step(settings: dict[str, Any], *others: tuple[str, object]) -> tuple[Any, Any, int]:
    """One step of the buggy model under nan_guard(settings): model, capture, step counter."""
    model = _model()
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with capture_events(*others, _guard(**settings)) as capture:
        optimizer.zero_grad()
        model(hookgrad.randn(5, 3, requires_grad=True)).sum().backward()
        optimizer.step()
        step = capture.runtime.step
    return model, capture, step


# ---------------------------------------------------------------------- configuration
@pytest.mark.parametrize(
    "table",
    [
        {"action": "skip"},
        {"action": "RAISE"},
        {"max_records_per_step": -1},
        {"check_forward": False, "check_backward": False, "check_parameters": False},
        {"check_everything": True},
    ],
)
def test_bad_configs_are_rejected(table: dict[str, Any]) -> None:
    """Unknown actions, negative caps, all checks off and unknown keys fail validation."""
    with pytest.raises(ValidationError):
        NanGuard.Config.model_validate(table)


def test_defaults_are_the_documented_ones() -> None:
    """action raise, check_forward off, check_backward on, check_parameters on, 16 records."""
    c = NanGuard.Config()
    got = (c.action, c.check_forward, c.check_backward, c.check_parameters)
    assert (*got, c.max_records_per_step) == ("raise", False, True, True, 16)


def test_only_the_parameter_check_installs_no_module_hook() -> None:
    """'With check_forward and check_backward both off, the plugin installs no module hook.'"""
    before = global_hook_counts()
    with capture_events(_guard(check_backward=False)):
        assert global_hook_counts()["backward"] == before["backward"]
    with capture_events(_guard()):
        assert global_hook_counts()["backward"] == before["backward"] + 1


# ---------------------------------------------------------------------- actions
def test_raise_stops_the_step_before_any_update() -> None:
    """raise: NonFiniteGradientError (a RuntimeError) from backward, before any update."""
    model = _model()
    before = [p.detach().numpy().copy() for p in model.parameters()]
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with capture_events(_guard()) as capture:
        with pytest.raises(RuntimeError) as info:
            model(hookgrad.randn(5, 3, requires_grad=True)).sum().backward()
        assert capture.runtime.step == 0
    assert isinstance(info.value, NonFiniteGradientError)
    error = info.value
    assert (error.module_name, error.phase, error.tensor, error.role) == (
        "2",
        "backward",
        "grad_input[0]",
        "producer",
    )
    assert (error.nan, error.inf, error.numel, error.step) == (20, 0, 20, 0)
    assert str(error).startswith("non-finite grad_input[0] in module '2' (producer, phase ")
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), b)
    assert optimizer.state == {} or all(not s for s in optimizer.state.values())


def test_warn_takes_the_step_and_points_at_the_callers_line() -> None:
    """warn: NonFiniteGradientWarning at your optimizer.step() line; the step is taken."""
    model = _model()
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    first = model[0].weight.detach().numpy().copy()
    with capture_events(_guard(action="warn")) as capture:
        model(hookgrad.randn(5, 3, requires_grad=True)).sum().backward()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            optimizer.step()
        assert capture.runtime.step == 1
    [warning] = [w for w in caught if issubclass(w.category, NonFiniteGradientWarning)]
    assert warning.filename == __file__
    assert np.isnan(model[0].weight.detach().numpy()).all()  # NaN reached the weights
    assert not np.isnan(first).any()
    assert any(r.get("event") == "nonfinite" for r in capture.records)


def test_zero_sets_only_the_nonfinite_entries_and_counts_them() -> None:
    """zero: non-finite entries of the selected gradients become 0; 'count' says how many."""
    params = {
        "a.weight": nn.Parameter(hookgrad.ones(2, 2)),
        "b.weight": nn.Parameter(hookgrad.ones(3)),
    }
    params["a.weight"].grad = hookgrad.tensor([[math.nan, 2.0], [math.inf, -math.inf]])
    params["b.weight"].grad = hookgrad.tensor([1.0, math.nan, 3.0])
    optimizer = hookgrad.optim.SGD(list(params.items()), lr=1.0)
    with capture_events(_guard(action="zero", exclude=["b"])) as capture:
        optimizer.step()
    np.testing.assert_array_equal(params["a.weight"].grad.numpy(), [[0.0, 2.0], [0.0, 0.0]])
    np.testing.assert_array_equal(params["a.weight"].detach().numpy(), [[1.0, -1.0], [1.0, 1.0]])
    [zeroed] = [r for r in capture.of_plugin("nan_guard") if r["kind"] == "zeroed"]
    assert zeroed["data"]["count"] == 3 and zeroed["module_name"] is None
    assert np.isnan(params["b.weight"].grad.numpy()[1])  # not selected: left alone


def test_skip_step_vetoes_and_drops_only_the_selected_gradients() -> None:
    """skip_step: veto, and every selected p.grad becomes None."""
    params = {
        "a.weight": nn.Parameter(hookgrad.ones(2)),
        "b.weight": nn.Parameter(hookgrad.ones(2)),
    }
    params["a.weight"].grad = hookgrad.tensor([math.nan, 1.0])
    params["b.weight"].grad = hookgrad.tensor([1.0, 1.0])
    optimizer = hookgrad.optim.SGD(list(params.items()), lr=1.0)
    with capture_events(_guard(action="skip_step", exclude=["b"])) as capture:
        optimizer.step()
        assert capture.runtime.step == 1  # vetoed steps advance the counter too
    assert params["a.weight"].grad is None
    np.testing.assert_array_equal(params["b.weight"].grad.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(params["a.weight"].detach().numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(params["b.weight"].detach().numpy(), [1.0, 1.0])
    [skip] = [r for r in capture.of_plugin("nan_guard") if r["kind"] == "skip_step"]
    assert skip["data"] == {
        "reason": "nonfinite",
        "module": "a",
        "phase": "step",
        "tensor": "weight.grad",
    }


def test_max_records_zero_still_detects_and_acts() -> None:
    """'max_records_per_step ... (0: none); detection and the action are not limited'."""
    _, capture, _ = _bad_step({"action": "skip_step", "max_records_per_step": 0})
    kinds = [r["kind"] for r in capture.of_plugin("nan_guard")]
    assert kinds == ["skip_step"]


def test_records_are_capped_per_step() -> None:
    """At most max_records_per_step nonfinite records per step."""
    _, capture, _ = _bad_step({"action": "skip_step", "max_records_per_step": 2})
    kinds = [r["kind"] for r in capture.of_plugin("nan_guard")]
    assert kinds == ["nonfinite", "nonfinite", "skip_step"]


# ---------------------------------------------------------------------- findings
def test_huge_finite_gradients_are_not_reported() -> None:
    """'huge finite values are not reported' (their squares overflow, the values do not)."""
    p = nn.Parameter(hookgrad.ones(3))
    p.grad = hookgrad.tensor([3e38, -3e38, 1e30])
    optimizer = hookgrad.optim.SGD([("w.weight", p)], lr=0.0)
    with capture_events(_guard()) as capture:
        optimizer.step()
    assert capture.of_plugin("nan_guard") == []


def test_an_unselected_producer_is_blamed_on_a_selected_module() -> None:
    """'A module that is not selected ... is never named.'"""
    _, capture, _ = _bad_step({"action": "skip_step", "exclude": ["2"]})
    named = {r["module_name"] for r in capture.of_plugin("nan_guard") if r["kind"] == "nonfinite"}
    assert named and "2" not in named


def test_forward_check_raises_inside_the_forward() -> None:
    """check_forward with raise: 'raises at once, inside the forward' naming the producer."""

    class Log(nn.Module):
        def forward(self, x: Any) -> Any:
            return x.log()

    model = nn.Sequential(nn.Tanh(), Log(), nn.Linear(2, 1))
    with capture_events(_guard(check_forward=True)), pytest.raises(NonFiniteGradientError) as info:
        model(hookgrad.tensor([[-1.0, 2.0]]))
    assert (info.value.phase, info.value.module_name, info.value.role) == (
        "forward",
        "1",
        "producer",
    )
    assert info.value.tensor == "output"


def test_each_backward_starts_a_new_search() -> None:
    """'Each loss.backward() starts a new search': the parameter check then names the owner."""
    model = _model()
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    bad = model[2]
    with capture_events(_guard(action="skip_step")) as capture:
        model(hookgrad.randn(5, 3, requires_grad=True)).sum().backward()  # finds '2'
        # the same model, now a clean micro-batch: the NaN stays only in the accumulated grads
        bad.forward = lambda x: nn.Linear.forward(bad, x)  # type: ignore[method-assign]
        model(hookgrad.randn(5, 3, requires_grad=True)).sum().backward()
        optimizer.step()
    [skip] = [r for r in capture.of_plugin("nan_guard") if r["kind"] == "skip_step"]
    assert skip["data"]["phase"] == "step" and skip["data"]["tensor"].endswith(".grad")


class _EarlyVeto:
    @hookimpl(tryfirst=True)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> bool:
        return False


def test_a_step_vetoed_by_grad_scale_never_raises() -> None:
    """'the guard never raises on a step that grad_scale skips'; its records stay written."""
    scale = ("grad_scale", GradScale(GradScale.Config(init_scale=8.0)))
    _, capture, step = _bad_step({}, scale)  # action raise: would raise if it were called
    assert step == 1
    kinds = [r["kind"] for r in capture.of_plugin("nan_guard")]
    assert kinds and set(kinds) == {"nonfinite"}
    assert next(r["kind"] for r in capture.of_plugin("grad_scale")) == "skip_step"
