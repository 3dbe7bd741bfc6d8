"""docs/plugins/grad_scale.md, promise by promise: settings, both modes, vetoes, checkpoints.

torch's GradScaler (CPU) is the oracle for the dynamic mode's scale arithmetic and checkpoint
format; the constant mode's gradients are worked out by hand.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import hookgrad
from hookgrad.hookspecs import OptimizerStepPreEvent, hookimpl
from hookgrad.plugins.grad_scale import GradScale
from hookgrad.plugins.nan_guard import NanGuard
from hookgrad.testing import capture_events

nn = hookgrad.nn
FLOAT32_MAX = float(np.finfo(np.float32).max)
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")


@pytest.fixture
def torch() -> ModuleType:
    """torch 2.13: GradScaler is the oracle for the dynamic mode."""
    return pytest.importorskip("torch")


def _scaler(**settings: Any) -> GradScale:
    return GradScale(GradScale.Config(**settings))


def _param(name: str = "w.weight", value: float = 1.0) -> tuple[str, Any]:
    return name, nn.Parameter(hookgrad.tensor([value, value]))


# ---------------------------------------------------------------------- configuration
@pytest.mark.parametrize(
    "table",
    [
        {"init_scale": 0.0},
        {"init_scale": -1.0},
        {"init_scale": math.inf},
        {"init_scale": FLOAT32_MAX * 1.0000001},
        {"growth_factor": 1.0},
        {"growth_factor": 0.5},
        {"backoff_factor": 0.0},
        {"backoff_factor": 1.0},
        {"growth_interval": 0},
        {"growth_interval": 1.5},
        {"mode": "constant", "factor": 0.0},
        {"mode": "constant", "factor": math.nan},
        {"mode": "constant", "factor": -math.inf},
        {"mode": "fixed"},
        {"factor": 0.5},
        {"mode": "constant", "init_scale": 2.0},
        {"mode": "constant", "growth_interval": 10},
        {"modules": ["encoder"]},
        {"exclude": ["head"]},
        {"module_types": ["Linear"]},
        {"scale": 2.0},
    ],
)
def test_bad_values_and_other_mode_fields_are_rejected(table: dict[str, Any]) -> None:
    """Ranges, 'a field that belongs to the other mode', dynamic selectors, unknown keys."""
    with pytest.raises(ValidationError):
        GradScale.Config.model_validate(table)


@pytest.mark.parametrize(
    "table",
    [
        {"init_scale": FLOAT32_MAX},
        {"init_scale": 1e-30},
        {"growth_factor": 1.0001, "backoff_factor": 0.9999, "growth_interval": 1},
        {"mode": "constant", "factor": -1.0},
        {"mode": "constant", "factor": 1e-20, "modules": ["x"], "exclude": ["y"]},
    ],
)
def test_edge_values_inside_the_ranges_are_accepted(table: dict[str, Any]) -> None:
    """'at most the largest float32', '(> 1)', '(0 < x < 1)', '>= 1', negative factors."""
    config = GradScale.Config.model_validate(table)
    for key, value in table.items():
        expected = tuple(value) if isinstance(value, list) else value
        assert getattr(config, key) == expected


def test_defaults_are_grad_scalers(torch: ModuleType) -> None:
    """'The dynamic defaults are GradScaler's' (and the mode/factor defaults)."""
    reference = torch.amp.GradScaler("cpu")
    c = GradScale.Config()
    assert (c.mode, c.factor) == ("dynamic", 0.1)
    assert c.init_scale == reference.get_scale()
    assert (c.growth_factor, c.backoff_factor) == (
        reference.get_growth_factor(),
        reference.get_backoff_factor(),
    )
    assert c.growth_interval == reference.get_growth_interval()


# ---------------------------------------------------------------------- constant mode
def test_constant_mode_has_scale_one_and_an_empty_state() -> None:
    """Constant mode: scale 1.0, state_dict() {} and load_state_dict() does nothing."""
    plugin = _scaler(mode="constant", factor=3.0)
    plugin.load_state_dict({"scale": 7.0})
    assert plugin.scale == 1.0 and plugin.state_dict() == {}


def test_a_negative_factor_reverses_the_gradient() -> None:
    """'reverse it with a negative factor (a gradient-reversal layer)'."""
    layer = nn.Linear(1, 1)
    with hookgrad.no_grad():
        layer.weight.fill_(2.0)
    model = nn.Sequential(layer)
    x = hookgrad.tensor([[3.0]], requires_grad=True)
    with capture_events(("grad_scale", _scaler(mode="constant", factor=-1.0, modules=["0"]))):
        model(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[-2.0]])
    np.testing.assert_array_equal(layer.weight.grad.numpy(), [[-3.0]])
    np.testing.assert_array_equal(layer.bias.grad.numpy(), [-1.0])


def test_constant_factor_compounds_over_selected_modules() -> None:
    """'the first layer of Sequential(Linear, Tanh, Linear) gets factor**4'."""
    hookgrad.manual_seed(1)
    model = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
    x = hookgrad.randn(4, 2, requires_grad=True)
    model(x).sum().backward()
    plain = model[0].weight.grad.numpy().copy()
    model.zero_grad()
    with capture_events(("grad_scale", _scaler(mode="constant", factor=0.5))):
        model(x).sum().backward()
    np.testing.assert_allclose(model[0].weight.grad.numpy(), plain * 0.5**4, rtol=1e-6)


# ---------------------------------------------------------------------- dynamic mode
def test_the_logged_loss_is_not_scaled_but_the_gradients_are_unscaled() -> None:
    """'the loss value itself is not scaled'; the step sees the true gradients."""
    name, p = _param()
    optimizer = hookgrad.optim.SGD([(name, p)], lr=1.0)
    with capture_events(("grad_scale", _scaler(init_scale=1024.0))):
        loss = (p * 3).sum()
        loss.backward()
        np.testing.assert_array_equal(p.grad.numpy(), [3072.0, 3072.0])  # scaled seed
        optimizer.step()
    assert float(loss.detach().numpy()) == 6.0
    np.testing.assert_array_equal(p.detach().numpy(), [-2.0, -2.0])  # 1 - 3


def test_autograd_grad_is_neither_seen_nor_scaled() -> None:
    """'Only backward() is scaled. hookgrad.autograd.grad ... is neither seen nor scaled.'"""
    x = hookgrad.tensor([1.0, 2.0], requires_grad=True)
    with capture_events(("grad_scale", _scaler(init_scale=256.0))):
        (grad,) = hookgrad.autograd.grad((x * x).sum(), x)
    np.testing.assert_array_equal(grad.numpy(), [2.0, 4.0])


def test_a_closure_step_raises_runtime_error() -> None:
    """'No step closures ... The plugin then raises RuntimeError at the end of the step.'"""
    name, p = _param()
    optimizer = hookgrad.optim.SGD([(name, p)], lr=0.0)

    def closure() -> Any:
        optimizer.zero_grad()
        loss = (p * 2).sum()
        loss.backward()
        return loss

    with capture_events(("grad_scale", _scaler())), pytest.raises(RuntimeError, match="closure"):
        optimizer.step(closure)


def test_float16_gradients_raise_grad_scalers_value_error(torch: ModuleType) -> None:
    """'Float16 gradients are refused with GradScaler's ValueError(...)'."""
    reference = torch.amp.GradScaler("cpu")
    reference.scale(torch.ones(1))  # GradScaler builds its scale lazily
    tp = torch.nn.Parameter(torch.ones(2, dtype=torch.float16))
    tp.grad = torch.ones(2, dtype=torch.float16)
    topt = torch.optim.SGD([tp], lr=0.1)
    with pytest.raises(ValueError) as expected:
        reference.unscale_(topt)
    p = nn.Parameter(hookgrad.ones(2, dtype=hookgrad.float16))
    p.grad = hookgrad.ones(2, dtype=hookgrad.float16)
    optimizer = hookgrad.optim.SGD([p], lr=0.1)
    with capture_events(("grad_scale", _scaler())), pytest.raises(ValueError) as got:
        optimizer.step()
    assert str(got.value.__cause__) == str(expected.value)  # a PluginError naming grad_scale
    assert "grad_scale" in str(got.value)


def _overflow_run(
    plugin: GradScale, overflows: list[bool], *others: tuple[str, object]
) -> list[dict]:
    """One step per entry: its gradient is inf when the entry is True; the plugin's records."""
    name, p = _param()
    optimizer = hookgrad.optim.SGD([(name, p)], lr=0.0)
    with capture_events(*others, ("grad_scale", plugin)) as capture:
        for bad in overflows:
            optimizer.zero_grad()
            (p * (math.inf if bad else 1.0)).sum().backward()
            optimizer.step()
    return capture.of_plugin("grad_scale")


def test_scale_sequence_equals_grad_scalers_over_random_overflows(torch: ModuleType) -> None:
    """'the sequence of scales is torch's, bit for bit', including growths and backoffs."""
    rng = np.random.default_rng(11)
    overflows = [bool(b) for b in rng.random(40) < 0.2]
    settings = {"init_scale": 3.0, "growth_factor": 1.7, "backoff_factor": 0.3}
    plugin = _scaler(growth_interval=3, **settings)
    records = _overflow_run(plugin, overflows)
    scaler = torch.amp.GradScaler("cpu", growth_interval=3, **settings)
    tp = torch.nn.Parameter(torch.ones(2))
    topt = torch.optim.SGD([tp], lr=0.0)
    expected = []
    for bad in overflows:
        topt.zero_grad()
        scaler.scale((tp * (math.inf if bad else 1.0)).sum()).backward()
        scaler.step(topt)
        expected.append(scaler.get_scale())
        scaler.update()
    got = [r["data"]["scale"] for r in records if r["kind"] == "scale"]
    assert got == expected
    assert plugin.scale == scaler.get_scale()


def test_records_of_one_overflowing_step_come_in_order() -> None:
    """'skip_step (from step_pre), then scale, then backoff or growth'; module_name None."""
    records = _overflow_run(_scaler(init_scale=8.0), [True])
    assert [r["kind"] for r in records] == ["skip_step", "scale", "backoff"]
    assert records[0]["data"] == {"reason": "overflow", "scale": 8.0}
    assert records[1]["data"] == {"scale": 8.0, "found_inf": True}
    assert records[2]["data"] == {"scale_from": 8.0, "scale_to": 4.0}
    assert all(r["module_name"] is None for r in records)


def test_the_scale_never_grows_to_inf() -> None:
    """'if growing would overflow float32, the scale stays the same'."""
    plugin = _scaler(init_scale=FLOAT32_MAX / 1.5, growth_factor=2.0, growth_interval=1)
    records = _overflow_run(plugin, [False, False])
    assert plugin.scale == float(np.float32(FLOAT32_MAX / 1.5))
    assert not [r for r in records if r["kind"] == "growth"]


class _UnstagedVeto:
    @hookimpl(tryfirst=True)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> bool:
        return False


def test_a_veto_before_the_unscale_leaves_the_scale_alone() -> None:
    """'If a plugin vetoes before the unscale stage ... the scale is left unchanged'."""
    plugin = _scaler(init_scale=16.0, growth_interval=1)
    records = _overflow_run(plugin, [False, True], ("veto", _UnstagedVeto()))
    assert plugin.scale == 16.0
    assert [r["data"] for r in records] == [{"scale": 16.0, "found_inf": None}] * 2


class _NaNInput(hookgrad.autograd.Function):
    """Identity forward; NaN backward: only the model's input gets a non-finite gradient."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        return grad * math.nan


class _Poisoned(nn.Linear):
    def forward(self, x: Any) -> Any:
        return super().forward(_NaNInput.apply(x))


def test_a_nan_guard_veto_counts_as_a_clean_step_for_the_scale() -> None:
    """'After nan_guard vetoes (it runs after the unscale), the step counts as clean'."""
    model = nn.Sequential(_Poisoned(2, 1))
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    plugin = _scaler(init_scale=4.0, growth_interval=1)
    guard = NanGuard(NanGuard.Config(action="skip_step"))
    with capture_events(("grad_scale", plugin), ("nan_guard", guard)) as capture:
        model(hookgrad.ones(1, 2, requires_grad=True)).sum().backward()
        optimizer.step()
    assert [r["kind"] for r in capture.of_plugin("nan_guard")][-1] == "skip_step"
    assert plugin.scale == 8.0


def test_state_dict_loads_into_grad_scaler_and_back(torch: ModuleType) -> None:
    """'A checkpoint written by one can be loaded into the other.'"""
    plugin = _scaler(init_scale=512.0, growth_interval=7)
    _overflow_run(plugin, [False, False, True, False])
    reference = torch.amp.GradScaler("cpu")
    reference.load_state_dict(plugin.state_dict())
    assert reference.state_dict() == plugin.state_dict()
    other = _scaler()
    torch_state = torch.amp.GradScaler("cpu", init_scale=3.0, growth_interval=9).state_dict()
    other.load_state_dict(torch_state)
    assert other.state_dict() == torch_state


def test_load_state_dict_rejects_an_empty_dict() -> None:
    """An empty checkpoint (constant mode's, a disabled GradScaler's) is a RuntimeError."""
    with pytest.raises(RuntimeError, match="empty"):
        _scaler().load_state_dict({})
