"""The grad_scale plugin: torch.amp.GradScaler's loss scaling, and a constant per-module factor."""

from __future__ import annotations

import contextlib
import copy
import json
import warnings
from collections.abc import Iterator, Sequence
from fnmatch import fnmatchcase
from typing import Any, Literal

import numpy as np
import pytest
from pydantic import ValidationError

import hookgrad
from hookgrad.engines import engine_named
from hookgrad.hookspecs import (
    BackwardBeginEvent,
    BackwardPreEvent,
    OptimizerStepPreEvent,
    Stage,
    hookimpl,
    stage,
)
from hookgrad.plugins.grad_scale import GradScale, LossScalerConflictError, _LossScaler
from hookgrad.testing import EventCapture, capture_events

F32_MAX = float(np.finfo(np.float32).max)
HUGE = 2.0**127  # finite, but times any scale >= 2 the gradient overflows float32
OVERFLOW_STEPS = (2, 3, 7)


# ---------------------------------------------------------------------- helpers
def _model(nn: Any) -> Any:
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))


def _twins() -> tuple[Any, Any]:
    """A torch model and a hookgrad model with the same weights."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    reference = _model(torch.nn)
    model = _model(hookgrad.nn)
    with hookgrad.no_grad():
        for p, q in zip(reference.parameters(), model.parameters()):
            q.copy_(hookgrad.tensor(p.detach().numpy()))
    return reference, model


def _inputs() -> np.ndarray:
    """A batch of 5; constant-mode tests make it require grad, or torch and hookgrad warn that
    the first module's full backward pre-hook fires with no input requiring grad."""
    return np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32)


def _multipliers(kind: str, steps: int = 12) -> list[np.ndarray]:
    """Per step, what the model's output is multiplied by: ones, or an overflow on the
    OVERFLOW_STEPS (an inf entry, or a finite value that overflows only once scaled)."""
    bad = {"inf": np.array([[1.0], [np.inf], [1.0], [1.0], [1.0]]), "huge": np.full((5, 1), HUGE)}
    return [
        (bad[kind] if i in OVERFLOW_STEPS else np.ones((5, 1))).astype(np.float32)
        for i in range(steps)
    ]


def _train_hookgrad(
    model: Any, plugin: GradScale, multipliers: Sequence[np.ndarray], *extra: object
) -> tuple[list[float], list[dict[str, Any]]]:
    """Train with plugin active (plain backward/step); the scale after each step, the records."""
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = hookgrad.tensor(_inputs())
    scales = []
    with capture_events(("grad_scale", plugin), *extra) as capture:
        for m in multipliers:
            optimizer.zero_grad()
            (model(x) * hookgrad.tensor(m)).sum().backward()
            optimizer.step()
            scales.append(plugin.scale)
    return scales, capture.of_plugin("grad_scale")


def _train_torch(model: Any, scaler: Any, multipliers: Sequence[np.ndarray]) -> list[float]:
    """The same loop the GradScaler way: scale, step, update."""
    torch = pytest.importorskip("torch")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.tensor(_inputs())
    scales = []
    for m in multipliers:
        optimizer.zero_grad()
        scaler.scale((model(x) * torch.tensor(m)).sum()).backward()
        scaler.step(optimizer)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales


def _grads(model: Any) -> dict[str, np.ndarray]:
    return {name: p.grad.numpy().copy() for name, p in model.named_parameters()}


def _dynamic(**settings: Any) -> GradScale:
    return GradScale(GradScale.Config(**settings))


def _constant(factor: float, modules: Sequence[str] = ("*",)) -> GradScale:
    return GradScale(GradScale.Config(mode="constant", factor=factor, modules=tuple(modules)))


class _GuardVeto:
    """Vetoes every step at the guard stage, after grad_scale unscaled."""

    @hookimpl(tryfirst=True)
    @stage(Stage.GUARD)
    def hookgrad_optimizer_step_pre(self) -> bool:
        return False


class _EarlyVeto:
    """Vetoes every step before any staged implementation, so before the unscale."""

    @hookimpl(tryfirst=True)
    def hookgrad_optimizer_step_pre(self) -> bool:
        return False


class _FailOnce:
    """Raises in the first optimizer step, after grad_scale unscaled."""

    def __init__(self) -> None:
        self.failed = False

    @hookimpl(trylast=True)
    def hookgrad_optimizer_step_pre(self) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("boom")


# ---------------------------------------------------------------------- config
def test_defaults_are_torch_grad_scalers() -> None:
    """The default config is dynamic mode with GradScaler's defaults (same state_dict)."""
    torch = pytest.importorskip("torch")
    plugin = _dynamic()
    assert plugin.config.mode == "dynamic"
    assert plugin.state_dict() == torch.amp.GradScaler("cpu").state_dict()


@pytest.mark.parametrize(
    ("settings", "field", "says"),
    [
        ({"mode": "static"}, "mode", "'constant' or 'dynamic'"),
        ({"mode": "constant", "factor": 0.0}, "factor", "nonzero"),
        ({"mode": "constant", "factor": float("inf")}, "factor", "finite"),
        ({"init_scale": 0.0}, "init_scale", "greater than 0"),
        ({"init_scale": 1e39}, "init_scale", "less than or equal to"),
        ({"growth_factor": 1.0}, "growth_factor", "greater than 1"),
        ({"backoff_factor": 1.0}, "backoff_factor", "less than 1"),
        ({"backoff_factor": 0.0}, "backoff_factor", "greater than 0"),
        ({"growth_interval": 0}, "growth_interval", "greater than or equal to 1"),
    ],
)
def test_bad_values_are_rejected_naming_the_field(
    settings: dict[str, Any], field: str, says: str
) -> None:
    """A bad value fails validation with the field's name and the valid range or choices."""
    with pytest.raises(ValidationError) as info:
        GradScale.Config(**settings)
    assert field in str(info.value) and says in str(info.value)


@pytest.mark.parametrize(
    "selector", [{"modules": ["0"]}, {"exclude": ["2"]}, {"module_types": ["Linear"]}]
)
def test_dynamic_mode_refuses_module_selectors(selector: dict[str, Any]) -> None:
    """Loss scaling scales every gradient, so it cannot unscale only some: selectors fail."""
    with pytest.raises(ValidationError, match="must keep the default") as info:
        GradScale.Config(**selector)
    assert next(iter(selector)) in str(info.value)
    assert GradScale.Config(mode="constant", **selector).mode == "constant"


@pytest.mark.parametrize(
    ("settings", "field"),
    [({"factor": 0.5}, "factor"), ({"mode": "constant", "init_scale": 8.0}, "init_scale")],
)
def test_a_field_of_the_other_mode_is_rejected(settings: dict[str, Any], field: str) -> None:
    """factor without mode="constant" (the default is dynamic) is a mistake, not ignored."""
    with pytest.raises(ValidationError, match=f"{field} only apply to mode="):
        GradScale.Config(**settings)


# ---------------------------------------------------------------------- constant mode
@pytest.mark.parametrize(
    ("modules", "scaled"),
    [(["2"], {"0.weight", "0.bias", "2.weight", "2.bias"}), (["0"], {"0.weight", "0.bias"})],
)
def test_constant_scales_the_module_and_what_is_upstream_of_it(
    modules: list[str], scaled: set[str]
) -> None:
    """Grads of the scaled module's parameters and of those before it are factor times the
    unscaled ones; later modules' grads are unchanged. (0.25 is a power of two, but BLAS may
    sum in a different order when the arrays sit at other alignments: one ulp is allowed.)"""
    model = _model(hookgrad.nn)
    x = hookgrad.tensor(_inputs(), requires_grad=True)
    model(x).sum().backward()
    plain = _grads(model)
    model.zero_grad()
    with capture_events(("grad_scale", _constant(0.25, modules))):
        model(x).sum().backward()
    for name, grad in _grads(model).items():
        expected = plain[name] * (0.25 if name in scaled else 1.0)
        np.testing.assert_allclose(grad, expected, rtol=2e-7, atol=0)


@pytest.mark.parametrize("modules", [["*"], ["1", "2"], ["0"], [""]])
def test_constant_matches_a_torch_global_full_backward_pre_hook(modules: list[str]) -> None:
    """Every parameter grad equals torch's with a global full backward pre-hook that multiplies
    the grad_output of the same modules by factor."""
    torch = pytest.importorskip("torch")
    reference, model = _twins()
    selected = {
        m for name, m in reference.named_modules() if any(fnmatchcase(name, g) for g in modules)
    }

    def hook(module: Any, grad_output: tuple[Any, ...]) -> tuple[Any, ...] | None:
        if module not in selected:
            return None
        return tuple(None if g is None else g * 0.1 for g in grad_output)

    handle = torch.nn.modules.module.register_module_full_backward_pre_hook(hook)
    try:
        reference(torch.tensor(_inputs(), requires_grad=True)).sum().backward()
    finally:
        handle.remove()
    with capture_events(("grad_scale", _constant(0.1, modules))):
        model(hookgrad.tensor(_inputs(), requires_grad=True)).sum().backward()
    expected = {name: p.grad.numpy() for name, p in reference.named_parameters()}
    for name, grad in _grads(model).items():
        np.testing.assert_allclose(grad, expected[name], rtol=1e-6, atol=1e-9)


def test_constant_factor_compounds_over_nested_selected_modules() -> None:
    """With the default modules=["*"] the first layer's grad is scaled on each selected module
    of the path: the root, 2, 1 (Tanh) and 0, so by factor**4 (to one ulp, as above)."""
    model = _model(hookgrad.nn)
    x = hookgrad.tensor(_inputs(), requires_grad=True)
    model(x).sum().backward()
    plain = _grads(model)
    model.zero_grad()
    with capture_events(("grad_scale", _constant(0.5))):
        model(x).sum().backward()
    got = _grads(model)
    np.testing.assert_allclose(got["0.weight"], plain["0.weight"] * 0.5**4, rtol=2e-7, atol=0)
    np.testing.assert_allclose(got["2.weight"], plain["2.weight"] * 0.5**2, rtol=2e-7, atol=0)


def test_constant_keeps_none_grad_output_entries() -> None:
    """A None entry of grad_output (an unused output) stays None; tensors are multiplied."""
    g = hookgrad.tensor([1.0, -2.0])
    event = BackwardPreEvent(
        module_name="m", module_type="Split", call_index=0, step=0, grad_output=(None, g)
    )
    first, second = _constant(-3.0).hookgrad_backward_pre(event)
    assert first is None and second is not None
    np.testing.assert_array_equal(second.numpy(), [-3.0, 6.0])


def test_constant_mode_records_its_factor_once_at_configure() -> None:
    """Constant mode emits one scale record at configure and none per module call or step."""
    model = _model(hookgrad.nn)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    plugin = _constant(0.1, ["2"])
    with capture_events(("grad_scale", plugin)) as capture:
        for _ in range(2):
            model(hookgrad.tensor(_inputs(), requires_grad=True)).sum().backward()
            optimizer.step()
    assert [(r["kind"], r["step"], r["data"]) for r in capture.of_plugin("grad_scale")] == [
        ("scale", 0, {"mode": "constant", "factor": 0.1})
    ]
    assert plugin.scale == 1.0 and plugin.state_dict() == {}


@pytest.mark.parametrize(
    ("mode", "hooks"),
    [
        ("constant", {"hookgrad_backward_pre"}),
        (
            "dynamic",
            {
                "hookgrad_backward_begin",
                "hookgrad_optimizer_step_pre",
                "hookgrad_optimizer_step_post",
            },
        ),
    ],
)
def test_each_mode_registers_only_its_hooks(
    mode: Literal["constant", "dynamic"], hooks: set[str]
) -> None:
    """The other mode's hooks are switched off, so the runtime installs nothing for them."""
    plugin = GradScale(GradScale.Config(mode=mode))
    with capture_events(("grad_scale", plugin)) as capture:
        callers = capture.runtime.pm.get_hookcallers(plugin) or []
        assert {caller.name for caller in callers} == {"hookgrad_configure", *hooks}


# ---------------------------------------------------------------------- dynamic: the seed
@pytest.mark.parametrize("dtype", [hookgrad.float32, hookgrad.float64])
def test_seed_of_a_scalar_loss_is_filled_with_the_scale(dtype: Any) -> None:
    """The implicit seed (None) becomes a tensor of the loss's shape and dtype filled with
    the scale."""
    loss = hookgrad.tensor(2.5, dtype=dtype, requires_grad=True) * 2
    seed = _dynamic(init_scale=1024.0).hookgrad_backward_begin(
        BackwardBeginEvent(step=0, loss=loss, gradient=None)
    )
    assert seed.shape == loss.shape and seed.dtype == dtype and seed.item() == 1024.0


def test_explicit_seed_gradient_is_multiplied_by_the_scale() -> None:
    """out.backward(g) accumulates the grads of the seed g * scale (exactly, scale 2**10)."""
    model = _model(hookgrad.nn)
    x = hookgrad.tensor(_inputs())
    seed = hookgrad.tensor(np.linspace(-1, 1, 5, dtype=np.float32).reshape(5, 1))
    model(x).backward(seed)
    plain = _grads(model)
    model.zero_grad()
    with capture_events(("grad_scale", _dynamic(init_scale=2.0**10))):
        model(x).backward(seed)
    for name, grad in _grads(model).items():
        np.testing.assert_array_equal(grad, plain[name] * 2.0**10)


# ---------------------------------------------------------------------- dynamic vs GradScaler
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # numpy, on "huge"
@pytest.mark.parametrize("overflow", ["inf", "huge"])
def test_scale_sequence_and_parameters_match_torch_grad_scaler(overflow: str) -> None:
    """Over clean and overflowing steps (an inf gradient, or a finite one that overflows only
    once scaled) the scale after each step, the final state_dict and the parameters equal
    torch.amp.GradScaler's on CPU."""
    torch = pytest.importorskip("torch")
    reference, model = _twins()
    settings = {"init_scale": 16.0, "growth_interval": 2}
    scaler = torch.amp.GradScaler("cpu", **settings)
    multipliers = _multipliers(overflow)
    expected = _train_torch(reference, scaler, multipliers)
    plugin = _dynamic(**settings)
    got, _ = _train_hookgrad(model, plugin, multipliers)
    assert got == expected
    assert expected == [16, 32, 16, 8, 8, 16, 16, 8, 8, 16, 16, 32]  # the run backs off and grows
    assert plugin.state_dict() == scaler.state_dict()
    for p, q in zip(reference.parameters(), model.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_records_of_a_run() -> None:
    """Each step records its scale and found_inf; an overflow adds skip_step and backoff, the
    growth_interval-th clean step adds growth."""
    _, records = _train_hookgrad(
        _model(hookgrad.nn), _dynamic(init_scale=16.0, growth_interval=2), _multipliers("inf", 4)
    )
    assert [(r["kind"], r["step"], r["data"]) for r in records] == [
        ("scale", 0, {"scale": 16.0, "found_inf": False}),
        ("scale", 1, {"scale": 16.0, "found_inf": False}),
        ("growth", 1, {"scale_from": 16.0, "scale_to": 32.0}),
        ("skip_step", 2, {"reason": "overflow", "scale": 32.0}),
        ("scale", 2, {"scale": 32.0, "found_inf": True}),
        ("backoff", 2, {"scale_from": 32.0, "scale_to": 16.0}),
        ("skip_step", 3, {"reason": "overflow", "scale": 16.0}),
        ("scale", 3, {"scale": 16.0, "found_inf": True}),
        ("backoff", 3, {"scale_from": 16.0, "scale_to": 8.0}),
    ]
    assert all(r["module_name"] is None for r in records)
    json.dumps(records, allow_nan=False)  # JSON-safe


def test_update_arithmetic_is_torchs_bit_for_bit() -> None:
    """With factors that are not powers of two, every scale and growth tracker equals
    torch._amp_update_scale_'s over a long random run of clean and overflowing steps."""
    torch = pytest.importorskip("torch")
    scaler = _LossScaler(3.3, growth_factor=1.7, backoff_factor=0.3, growth_interval=3)
    scale = torch.full((), 3.3, dtype=torch.float32)
    tracker = torch.zeros((), dtype=torch.int32)
    for found_inf in np.random.default_rng(0).random(300) < 0.2:
        torch._amp_update_scale_(scale, tracker, torch.tensor(float(found_inf)), 1.7, 0.3, 3)
        scaler.update(bool(found_inf))
        assert (scaler.scale, scaler.growth_tracker) == (scale.item(), tracker.item())


def test_growth_stops_below_inf_as_torch() -> None:
    """A growth that would overflow float32 leaves the scale and resets the tracker."""
    torch = pytest.importorskip("torch")
    scaler = _LossScaler(2.0**127, growth_factor=2.0, backoff_factor=0.5, growth_interval=1)
    scale, tracker = torch.full((), 2.0**127), torch.zeros((), dtype=torch.int32)
    torch._amp_update_scale_(scale, tracker, torch.zeros(()), 2.0, 0.5, 1)
    with np.errstate(all="raise"):
        scaler.update(False)
    assert (scaler.scale, scaler.growth_tracker) == (scale.item(), tracker.item()) == (2.0**127, 0)


@pytest.mark.parametrize("value", [3.0, 0.1, 2.0**16, 1e-30, 7e37, F32_MAX])
def test_inv_scale_is_torchs(value: float) -> None:
    """The unscale factor is GradScaler's: the reciprocal of the float32 scale, as float32."""
    torch = pytest.importorskip("torch")
    expected = torch.full((), value, dtype=torch.float32).double().reciprocal().float()
    got = _LossScaler(value, 2.0, 0.5, 1).inv_scale()
    assert got.dtype == np.float32 and got == expected.item()


@pytest.mark.parametrize("value", [0.0, 2.0**-149, 2.0**-128])
def test_inv_scale_of_an_underflowed_scale_is_none(value: float) -> None:
    """A scale of 0, or one so small that its reciprocal overflows float32 (torch's unscale
    factor is then inf), has no usable unscale factor: None, without a numpy warning."""
    torch = pytest.importorskip("torch")
    expected = torch.full((), value, dtype=torch.float32).double().reciprocal().float()
    assert expected.item() == float("inf")
    with np.errstate(all="raise"):
        assert _LossScaler(value, 2.0, 0.5, 1).inv_scale() is None


@pytest.mark.parametrize("init_scale", [2.0**-148, 2.0**-140])
def test_an_underflowed_scale_skips_every_step_without_raising(init_scale: float) -> None:
    """Once the scale has no finite reciprocal (it reached 0 after overflows, or is below
    1 / float32 max), no exception: the scale and growth tracker follow GradScaler's, and each
    step is skipped with a skip_step record, reason "scale_underflow". GradScaler instead
    steps with 0 * inf = NaN gradients and ruins the parameters; grad_scale leaves them."""
    torch = pytest.importorskip("torch")
    reference, model = _twins()
    before = [p.detach().numpy().copy() for p in model.parameters()]
    settings = {"init_scale": init_scale, "growth_interval": 2}
    overflow, clean = _multipliers("inf")[OVERFLOW_STEPS[0]], np.ones((5, 1), np.float32)
    scaler = torch.amp.GradScaler("cpu", **settings)
    expected = _train_torch(reference, scaler, [overflow, overflow, clean])
    plugin = _dynamic(**settings)
    got, records = _train_hookgrad(model, plugin, [overflow, overflow, clean])
    assert got == expected and plugin.state_dict() == scaler.state_dict()
    assert (got[-1] == 0.0) == (init_scale == 2.0**-148)
    assert not any(np.isfinite(p.detach().numpy()).all() for p in reference.parameters())
    more, more_records = _train_hookgrad(model, plugin, [clean, clean])  # skipped on and on
    for old, p in zip(before, model.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), old)
    skips = [r["data"] for r in records + more_records if r["kind"] == "skip_step"]
    scales = [init_scale, *got, *more[:-1]]
    assert skips == [{"reason": "scale_underflow", "scale": s} for s in scales]


def test_gradients_after_the_unscale_equal_torchs() -> None:
    """With a scale that is not a power of two, the gradients the step uses equal those
    GradScaler.unscale_ leaves (within float32 rounding), and the plain ones."""
    torch = pytest.importorskip("torch")
    reference, model = _twins()
    x = _inputs()
    scaler = torch.amp.GradScaler("cpu", init_scale=3.0)
    scaler.scale(reference(torch.tensor(x)).sum()).backward()
    scaler.unscale_(torch.optim.SGD(reference.parameters(), lr=0.1))
    model(hookgrad.tensor(x)).sum().backward()
    plain = _grads(model)
    model.zero_grad()
    seen: dict[str, np.ndarray] = {}

    class Peek:
        @hookimpl
        @stage(Stage.STATS)
        def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
            for name, p in event.parameters:
                assert p.grad is not None
                seen[name] = p.grad.numpy().copy()

    optimizer = hookgrad.optim.SGD(model.named_parameters(), lr=0.1)
    with capture_events(("grad_scale", _dynamic(init_scale=3.0)), ("peek", Peek())):
        model(hookgrad.tensor(x)).sum().backward()
        optimizer.step()
    for name, p in reference.named_parameters():
        np.testing.assert_allclose(seen[name], p.grad.numpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(seen[name], plain[name], rtol=1e-6, atol=1e-7)


def test_fp16_gradients_raise_as_in_torch() -> None:
    """Unscaling float16 gradients raises ValueError with GradScaler's message."""
    torch = pytest.importorskip("torch")
    reference = torch.nn.Parameter(torch.ones(2, dtype=torch.float16))
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale(reference.sum()).backward()
    message = "Attempting to unscale FP16 gradients."
    with pytest.raises(ValueError, match=message):
        scaler.unscale_(torch.optim.SGD([reference], lr=0.1))
    w = hookgrad.nn.Parameter(hookgrad.ones(2, dtype=hookgrad.float16))
    optimizer = hookgrad.optim.SGD([w], lr=0.1)
    with capture_events(("grad_scale", _dynamic(init_scale=1024.0))):
        w.sum().backward()
        with pytest.raises(ValueError, match=message):
            optimizer.step()
    assert w.grad is not None
    assert w.grad.numpy().tolist() == [1024.0, 1024.0]  # left scaled: nothing was divided


# ---------------------------------------------------------------------- dynamic: the veto
def test_skipped_step_leaves_parameters_and_optimizer_state() -> None:
    """An overflowing step changes neither the parameters nor SGD's momentum buffers."""
    model = _model(hookgrad.nn)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = hookgrad.tensor(_inputs())
    with capture_events(("grad_scale", _dynamic())):
        for m in _multipliers("inf", 3)[1:]:  # a clean step, then an overflow
            params = [p.detach().numpy().copy() for p in model.parameters()]
            buffers = [s["momentum_buffer"].numpy().copy() for s in optimizer.state.values()]
            optimizer.zero_grad()
            (model(x) * hookgrad.tensor(m)).sum().backward()
            optimizer.step()
    assert len(buffers) == 4
    for before, p in zip(params, model.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), before)
    for before, state in zip(buffers, optimizer.state.values()):
        np.testing.assert_array_equal(state["momentum_buffer"].numpy(), before)


@pytest.mark.parametrize(
    ("veto", "found_inf", "kinds", "scale"),
    [(_GuardVeto, False, ["scale", "growth"], 32.0), (_EarlyVeto, None, ["scale"], 16.0)],
)
def test_a_veto_by_another_plugin_is_not_an_overflow(
    veto: type, found_inf: bool | None, kinds: list[str], scale: float
) -> None:
    """A veto after the unscale counts as a clean step (here: the scale grows); one before it
    leaves the scale alone (found_inf None). grad_scale itself records no skip_step."""
    plugin = _dynamic(init_scale=16.0, growth_interval=1)
    _, records = _train_hookgrad(_model(hookgrad.nn), plugin, _multipliers("inf", 1), veto())
    assert [r["kind"] for r in records] == kinds
    assert records[0]["data"] == {"scale": 16.0, "found_inf": found_inf}
    assert plugin.scale == scale


def test_a_retried_step_does_not_unscale_twice() -> None:
    """When a later plugin raises after the unscale and the step is retried, the gradients are
    not divided again: the update equals an unscaled run's."""
    plain_model = _model(hookgrad.nn)
    x = hookgrad.tensor(_inputs())
    plain_optimizer = hookgrad.optim.SGD(plain_model.parameters(), lr=0.1)
    plain_model(x).sum().backward()
    plain_optimizer.step()
    hookgrad.manual_seed(0)
    model = _model(hookgrad.nn)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    with capture_events(("grad_scale", _dynamic(init_scale=3.0)), ("fail", _FailOnce())):
        model(x).sum().backward()
        with pytest.raises(RuntimeError, match="boom"):
            optimizer.step()
        optimizer.step()
    for p, q in zip(plain_model.parameters(), model.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_a_backward_inside_the_step_raises() -> None:
    """A closure's backward runs after the unscale; the step would use scaled gradients, so
    grad_scale raises (torch's GradScaler refuses closures too)."""
    model = _model(hookgrad.nn)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    x = hookgrad.tensor(_inputs())

    def closure() -> Any:
        optimizer.zero_grad()
        loss = model(x).sum()
        loss.backward()
        return loss

    with (
        capture_events(("grad_scale", _dynamic())),
        pytest.raises(RuntimeError, match=r"had not unscaled.*closure"),
    ):
        optimizer.step(closure)


# ---------------------------------------------------------------------- checkpointing
def test_state_dict_round_trip_resumes_the_same_sequence() -> None:
    """A plugin loaded from another's state_dict (or a GradScaler's) continues its scale
    sequence exactly."""
    torch = pytest.importorskip("torch")
    multipliers = _multipliers("inf")
    original = _dynamic(init_scale=16.0, growth_interval=2)
    _train_hookgrad(_model(hookgrad.nn), original, multipliers[:5])
    resumed = _dynamic()
    resumed.load_state_dict(original.state_dict())
    assert resumed.state_dict() == original.state_dict()
    scaler = torch.amp.GradScaler("cpu")
    scaler.load_state_dict(original.state_dict())
    from_torch = _dynamic()
    from_torch.load_state_dict(scaler.state_dict())
    expected, _ = _train_hookgrad(_model(hookgrad.nn), original, multipliers[5:])
    got, _ = _train_hookgrad(_model(hookgrad.nn), resumed, multipliers[5:])
    assert got == expected
    got_from_torch, _ = _train_hookgrad(_model(hookgrad.nn), from_torch, multipliers[5:])
    assert got_from_torch == expected


def test_load_state_dict_rejects_empty_and_bad_states() -> None:
    """An empty state raises RuntimeError (as torch); a bad value fails as its config field."""
    plugin = _dynamic()
    with pytest.raises(RuntimeError, match="state dict is empty"):
        plugin.load_state_dict({})
    bad = {**plugin.state_dict(), "growth_factor": 1.0}
    with pytest.raises(ValidationError, match="growth_factor"):
        plugin.load_state_dict(bad)
    _constant(0.5).load_state_dict(bad)  # constant mode has no state: a no-op


# ---------------------------------------------------------------------- activation by name
def test_activated_from_config_by_entry_point_name() -> None:
    """[plugins.grad_scale] activates the built-in by its entry-point name."""
    model = _model(hookgrad.nn)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    config = {
        "plugins": {"grad_scale": {"init_scale": 8.0, "growth_interval": 1}},
        "events": {"memory": True},
    }
    with hookgrad.Runtime(config, environ={}) as rt:
        plugin = rt.plugins["grad_scale"]
        for _ in range(2):
            optimizer.zero_grad()
            model(hookgrad.tensor(_inputs())).sum().backward()
            optimizer.step()
    assert isinstance(plugin, GradScale) and plugin.scale == 32.0
    assert rt.memory is not None
    kinds = [r["kind"] for r in rt.memory.records if r.get("plugin") == "grad_scale"]
    assert kinds == ["scale", "growth", "scale", "growth"]


def test_constant_mode_raises_no_engine_warning() -> None:
    """Constant mode's backward pre-hook is the runtime's own: a model whose input needs no
    grad runs without torch's B-9 warning, even under simplefilter("error")."""
    model = _model(hookgrad.nn)
    with capture_events(("grad_scale", _constant(0.5))), warnings.catch_warnings():
        warnings.simplefilter("error")
        model(hookgrad.tensor(_inputs())).sum().backward()
    assert model[0].weight.grad is not None


# ---------------------------------------------------------------------- on torch models
@contextlib.contextmanager
def _on_torch(*plugins: object | tuple[str, object]) -> Iterator[EventCapture]:
    """capture_events with the training-loop points installed on torch's engine only."""
    with capture_events(*plugins) as capture:
        loop = capture.runtime._loop
        loop.detach()
        loop.engines = (engine_named("torch"),)
        loop.attach()
        yield capture


def _train_torch_under(
    model: Any, plugin: GradScale, multipliers: Sequence[np.ndarray]
) -> tuple[list[float], list[dict[str, Any]]]:
    """_train_hookgrad's loop on a torch model, the runtime on torch's engine."""
    torch = pytest.importorskip("torch")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.tensor(_inputs())
    scales = []
    with _on_torch(("grad_scale", plugin)) as capture:
        for m in multipliers:
            optimizer.zero_grad()
            (model(x) * torch.tensor(m)).sum().backward()
            optimizer.step()
            scales.append(plugin.scale)
    return scales, capture.of_plugin("grad_scale")


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # numpy, on "huge"
@pytest.mark.parametrize("overflow", ["inf", "huge"])
def test_on_torch_the_run_equals_grad_scaler_and_the_hookgrad_run(overflow: str) -> None:
    """A plain torch loop under grad_scale: the scale after each step, the state_dict and the
    parameters equal torch.amp.GradScaler's bit for bit, the records those of the same run on
    hookgrad's engine."""
    torch = pytest.importorskip("torch")
    reference, model = _twins()
    twin = copy.deepcopy(reference)
    settings = {"init_scale": 16.0, "growth_interval": 2}
    scaler = torch.amp.GradScaler("cpu", **settings)
    multipliers = _multipliers(overflow)
    expected = _train_torch(reference, scaler, multipliers)
    plugin = _dynamic(**settings)
    got, records = _train_torch_under(twin, plugin, multipliers)
    assert got == expected == [16, 32, 16, 8, 8, 16, 16, 8, 8, 16, 16, 32]
    assert plugin.state_dict() == scaler.state_dict()
    for p, q in zip(reference.parameters(), twin.parameters()):
        np.testing.assert_array_equal(q.detach().numpy(), p.detach().numpy())
    assert records == _train_hookgrad(model, _dynamic(**settings), multipliers)[1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_on_torch_the_seed_is_a_torch_tensor_like_the_loss(dtype: str) -> None:
    """The implicit seed is a torch tensor of the loss's shape, dtype and device filled with
    the scale; an explicit seed is multiplied by it."""
    torch = pytest.importorskip("torch")
    plugin = _dynamic(init_scale=1024.0)
    loss = torch.tensor(2.5, dtype=getattr(torch, dtype), requires_grad=True) * 2
    seed = plugin.hookgrad_backward_begin(BackwardBeginEvent(step=0, loss=loss, gradient=None))
    assert isinstance(seed, torch.Tensor)
    assert (seed.shape, seed.dtype, seed.device) == (loss.shape, loss.dtype, loss.device)
    assert seed.item() == 1024.0
    given = torch.tensor([0.5, -1.0])
    event = BackwardBeginEvent(step=0, loss=torch.ones(2, requires_grad=True), gradient=given)
    assert plugin.hookgrad_backward_begin(event).tolist() == [512.0, -1024.0]


def test_on_torch_fp16_gradients_raise_as_grad_scaler_does() -> None:
    """Unscaling float16 torch gradients raises GradScaler's ValueError, dividing nothing."""
    torch = pytest.importorskip("torch")
    w = torch.nn.Parameter(torch.ones(2, dtype=torch.float16))
    w.grad = torch.full((2,), 1024.0, dtype=torch.float16)
    plugin = _dynamic(init_scale=1024.0)
    plugin._scaled = True  # as after a backward_begin
    event = OptimizerStepPreEvent(
        step=0, phase="optimizer_step_pre", optimizer_type="SGD", parameters=(("w", w),)
    )
    with pytest.raises(ValueError, match=r"Attempting to unscale FP16 gradients\."):
        plugin.hookgrad_optimizer_step_pre(event)
    assert w.grad.tolist() == [1024.0, 1024.0]


@pytest.mark.parametrize("on_error", ["raise", "warn"])
def test_grad_scaler_and_dynamic_grad_scale_together_are_refused(on_error: str) -> None:
    """GradScaler.step on a torch model under dynamic grad_scale raises
    LossScalerConflictError naming both, at the first step, whatever on_error: the
    parameters are left as they were."""
    torch = pytest.importorskip("torch")
    model, _ = _twins()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    plugin = GradScale(GradScale.Config(on_error=on_error))  # type: ignore[arg-type]
    with _on_torch(("grad_scale", plugin)):
        scaler.scale(model(torch.tensor(_inputs())).sum()).backward()
        message = r"grad_scale \(dynamic\) and torch.amp.GradScaler both scale the loss; use one"
        with pytest.raises(LossScalerConflictError, match=message) as raised:
            scaler.step(optimizer)
    assert isinstance(raised.value, RuntimeError) and raised.value.step == 0
    for p, q in zip(before, model.parameters()):
        assert torch.equal(p, q)


def test_grad_scaler_with_constant_grad_scale_is_fine() -> None:
    """Constant mode scales no loss: GradScaler runs under it as without it."""
    torch = pytest.importorskip("torch")
    model, _ = _twins()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    with _on_torch(("grad_scale", _constant(1.0))):
        scaler.scale(model(torch.tensor(_inputs())).sum()).backward()
        scaler.step(optimizer)
        scaler.update()
    assert scaler.get_scale() == 8.0
