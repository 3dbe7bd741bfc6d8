"""The nan_guard plugin: names the module that produced NaN/Inf, records it, acts at the step."""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import hookgrad
from hookgrad import nn
from hookgrad.hookspecs import PluginConfig, Stage, hookimpl, stage
from hookgrad.nn.modules import module as module_mod
from hookgrad.plugins.grad_scale import GradScale
from hookgrad.plugins.nan_guard import (
    Finding,
    NanGuard,
    NonFiniteGradientError,
    NonFiniteGradientWarning,
)
from hookgrad.runtime import PluginHookWarning
from hookgrad.testing import EventCapture, capture_events

NAN = float("nan")


# ---------------------------------------------------------------------- models
class NaNGrad(hookgrad.autograd.Function):
    """Identity forward; the backward turns the gradient into NaN (a buggy custom op)."""

    @staticmethod
    def forward(ctx: Any, x: hookgrad.Tensor) -> hookgrad.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: hookgrad.Tensor) -> hookgrad.Tensor:
        return grad * NAN


class BuggyLinear(nn.Linear):
    """A Linear whose backward yields NaN while ``broken``: the producer of the tests."""

    broken = True

    def forward(self, x: hookgrad.Tensor) -> hookgrad.Tensor:
        out = super().forward(x)
        return NaNGrad.apply(out) if self.broken else out


class PoisonedLinear(nn.Linear):
    """A Linear whose forward output is NaN: a forward producer."""

    def forward(self, x: hookgrad.Tensor) -> hookgrad.Tensor:
        return super().forward(x) * NAN


class BadWeightLinear(nn.Linear):
    """A Linear whose weight gradient alone is NaN while ``broken``: nothing non-finite flows
    in backward, only the parameter check can see it."""

    broken = True

    def forward(self, x: hookgrad.Tensor) -> hookgrad.Tensor:
        weight = NaNGrad.apply(self.weight) if self.broken else self.weight
        return nn.functional.linear(x, weight, self.bias)


class SplitHalf(nn.Module):
    """Returns a tuple: the input and a NaN copy of it (label "output[1]")."""

    def forward(self, x: hookgrad.Tensor) -> tuple[hookgrad.Tensor, hookgrad.Tensor]:
        return x, x * NAN


def make_model(layer2: type[nn.Linear] = BuggyLinear) -> nn.Sequential:
    """Sequential(Linear, Tanh, <layer2>, Tanh, Linear) with seeded weights."""
    hookgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), layer2(4, 4), nn.Tanh(), nn.Linear(4, 2))


def make_input() -> hookgrad.Tensor:
    """A batch of 5 that requires grad, so the root module has a grad_input too."""
    hookgrad.manual_seed(1)
    return hookgrad.randn(5, 3, requires_grad=True)


def weights(model: nn.Module) -> dict[str, np.ndarray]:
    return {name: p.detach().numpy().copy() for name, p in model.named_parameters()}


def guard(**settings: Any) -> tuple[str, NanGuard]:
    return "nan_guard", NanGuard(NanGuard.Config(**settings))


def nonfinite(capture: EventCapture) -> list[tuple[str, str, str, str]]:
    """(module, phase, tensor, role) of each nonfinite record, in order."""
    return [
        (r["module_name"], r["data"]["phase"], r["data"]["tensor"], r["data"]["role"])
        for r in capture.of_plugin("nan_guard")
        if r["kind"] == "nonfinite"
    ]


def train_step(model: nn.Module, optimizer: hookgrad.optim.SGD, x: hookgrad.Tensor) -> None:
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()


@pytest.fixture
def model() -> nn.Sequential:
    return make_model()


@pytest.fixture
def optimizer(model: nn.Sequential) -> hookgrad.optim.SGD:
    return hookgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


# ---------------------------------------------------------------------- raise
def test_raise_names_the_backward_producer_and_its_propagators(model: nn.Sequential) -> None:
    """action="raise" raises from loss.backward() itself, with no optimizer: the error names
    the layer whose backward made the NaN (with counts), the phase, those below it, and the
    parameters whose gradients that backward left non-finite, the producer's first."""
    with capture_events(guard()), pytest.raises(NonFiniteGradientError) as info:
        model(make_input()).sum().backward()
    error = info.value
    assert (error.module_name, error.phase, error.tensor, error.role) == (
        "2",
        "backward",
        "grad_input[0]",
        "producer",
    )
    assert (error.nan, error.inf, error.numel, error.step) == (20, 0, 20, 0)
    assert error.propagators == ("1", "0", "")
    assert error.parameters == ("2.weight", "2.bias", "0.weight", "0.bias")
    assert str(error) == (
        "non-finite grad_input[0] in module '2' (producer, phase 'backward', step 0): "
        "nan=20, inf=0 of numel=20; propagated through '1', '0', ''; non-finite gradients of "
        "parameters '2.weight', '2.bias', '0.weight' and 1 more"
    )
    assert np.isnan(model[2].weight.grad.numpy()).all()  # raised after the accumulation


@pytest.mark.parametrize("on_error", ["warn", "disable"])
@pytest.mark.parametrize("where", ["backward", "step", "forward"])
def test_raise_propagates_whatever_on_error(on_error: str, where: str) -> None:
    """The guard's own error is its verdict, not a failure: it propagates from backward, the
    step or forward even with on_error "warn" or "disable" (which handle a plugin's bugs)."""
    settings: dict[str, Any] = {"on_error": on_error}
    if where == "step":
        settings |= {"check_backward": False}
    model = make_model(PoisonedLinear if where == "forward" else BuggyLinear)
    if where == "forward":
        settings |= {"check_forward": True}
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    with (
        capture_events(guard(**settings)) as capture,
        warnings.catch_warnings(),
        pytest.raises(NonFiniteGradientError),
    ):
        warnings.simplefilter("error", PluginHookWarning)
        capture.runtime.watch(model)
        train_step(model, optimizer, make_input())


def test_findings_are_recorded_when_detected(model: nn.Sequential) -> None:
    """One nonfinite record per finding, written during backward, before the error."""
    with capture_events(guard()) as capture:
        with pytest.raises(NonFiniteGradientError):
            model(make_input()).sum().backward()
        records = capture.of_plugin("nan_guard")
    assert nonfinite(capture) == [
        ("2", "backward", "grad_input[0]", "producer"),
        ("1", "backward", "grad_output[0]", "propagator"),
        ("0", "backward", "grad_output[0]", "propagator"),
        # the root's grad_output is finite, but its child "2" produced the NaN first
        ("", "backward", "grad_input[0]", "propagator"),
    ]
    assert records[0]["step"] == 0
    assert records[0]["data"] == {
        "phase": "backward",
        "tensor": "grad_input[0]",
        "role": "producer",
        "nan": 20,
        "inf": 0,
        "numel": 20,
    }


def test_raise_leaves_parameters_and_optimizer_state_alone(
    model: nn.Sequential, optimizer: hookgrad.optim.SGD
) -> None:
    """The error propagates from optimizer.step() before any update; the step counter stays."""
    before = weights(model)
    with capture_events(guard()) as capture:
        with pytest.raises(NonFiniteGradientError):
            train_step(model, optimizer, make_input())
        assert capture.runtime.step == 0
    for name, value in weights(model).items():
        np.testing.assert_array_equal(value, before[name])
    assert len(optimizer.state) == 0  # no momentum buffer was created


@pytest.mark.parametrize("layer2", [BuggyLinear, BadWeightLinear])
def test_caught_error_leaves_no_stale_finding(layer2: type[BuggyLinear | BadWeightLinear]) -> None:
    """After a caught error (from a backward or a parameter finding), a clean retry of the same
    step goes through."""
    model = make_model(layer2)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    x = make_input()
    with capture_events(guard()) as capture:
        with pytest.raises(NonFiniteGradientError):
            train_step(model, optimizer, x)
        model[2].broken = False
        train_step(model, optimizer, x)
        assert capture.runtime.step == 1
    assert all(np.isfinite(v).all() for v in weights(model).values())


def test_error_pickles_with_its_attributes() -> None:
    """The error survives pickling (multiprocessing loaders) with every attribute."""
    finding = Finding("2", "backward", "grad_input[0]", "producer", 3, 1, 20, 7)
    error = pickle.loads(pickle.dumps(NonFiniteGradientError(finding, ("1", "0"))))
    assert (error.module_name, error.nan, error.inf, error.step) == ("2", 3, 1, 7)
    assert error.propagators == ("1", "0")
    assert str(error).endswith("propagated through '1', '0'")


def test_message_lists_at_most_three_propagators() -> None:
    """Longer propagator chains are summarised as "and N more"."""
    finding = Finding("9", "backward", "grad_input[0]", "producer", 1, 0, 4, 0)
    text = finding.describe(("8", "7", "6", "5", "4"))
    assert text.endswith("propagated through '8', '7', '6' and 2 more")


# ---------------------------------------------------------------------- other actions
def test_warn_warns_at_the_callers_line_logs_and_steps(
    model: nn.Sequential, optimizer: hookgrad.optim.SGD
) -> None:
    """action="warn": a NonFiniteGradientWarning pointing at optimizer.step(), a log entry,
    and the step is taken."""
    x = make_input()
    before = weights(model)
    with capture_events(guard(action="warn")) as capture:
        optimizer.zero_grad()
        model(x).sum().backward()
        with pytest.warns(NonFiniteGradientWarning, match=r"module '2' \(producer") as caught:
            optimizer.step()
    assert caught[0].filename == __file__
    logged = [r for r in capture.records if r.get("event") == "nonfinite"]
    assert len(logged) == 1
    assert logged[0]["level"] == "warning"
    assert "grad_input[0] in module '2'" in logged[0]["message"]
    assert not np.array_equal(weights(model)["4.weight"], before["4.weight"])  # stepped


def test_zero_replaces_only_the_nonfinite_entries(model: nn.Sequential) -> None:
    """action="zero": NaN/Inf gradient entries become 0 in place, the others stay, a zeroed
    record counts them, and the step is taken with the repaired gradients."""
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    before = weights(model)
    with capture_events(guard(action="zero")) as capture:
        optimizer.zero_grad()
        model(make_input()).sum().backward()
        grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
        versions = {n: p.grad._version for n, p in model.named_parameters()}
        optimizer.step()
    expected_count = sum(int((~np.isfinite(g)).sum()) for g in grads.values())
    assert expected_count == 12 + 4 + 16 + 4  # layers 0 and 2, weights and biases
    zeroed = [r for r in capture.of_plugin("nan_guard") if r["kind"] == "zeroed"]
    assert [r["data"] for r in zeroed] == [{"count": expected_count}]
    for name, p in model.named_parameters():
        repaired = np.nan_to_num(grads[name], nan=0.0, posinf=0.0, neginf=0.0)
        np.testing.assert_array_equal(p.grad.numpy(), repaired)
        np.testing.assert_allclose(p.detach().numpy(), before[name] - 0.1 * repaired, rtol=1e-6)
        bumped = not np.isfinite(grads[name]).all()
        assert p.grad._version == versions[name] + bumped


def test_skip_step_vetoes_and_drops_the_gradients(
    model: nn.Sequential, optimizer: hookgrad.optim.SGD
) -> None:
    """action="skip_step": no update, every selected .grad is None, a skip_step record."""
    before = weights(model)
    with capture_events(guard(action="skip_step")) as capture:
        train_step(model, optimizer, make_input())
        assert capture.runtime.step == 1  # a vetoed step still counts
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(p.detach().numpy(), before[name])
        assert p.grad is None
    assert len(optimizer.state) == 0
    skips = [r for r in capture.of_plugin("nan_guard") if r["kind"] == "skip_step"]
    assert [(r["step"], r["data"]) for r in skips] == [
        (0, {"reason": "nonfinite", "module": "2", "phase": "backward", "tensor": "grad_input[0]"})
    ]


def test_a_step_vetoed_earlier_in_the_pipeline_is_not_guarded(
    model: nn.Sequential, optimizer: hookgrad.optim.SGD
) -> None:
    """A veto at stage UNSCALE (grad_scale's overflow) runs first, whatever the registration
    order, so the guard never raises on it; its findings do not leak into the next step."""

    class Overflow:
        vetoes = True

        @hookimpl(tryfirst=True)
        @stage(Stage.UNSCALE)
        def hookgrad_optimizer_step_pre(self) -> bool | None:
            return False if self.vetoes else None

    overflow = Overflow()
    x = make_input()
    with capture_events(guard(), ("overflow", overflow)) as capture:
        train_step(model, optimizer, x)  # vetoed by "overflow": no error
        overflow.vetoes = False
        model[2].broken = False
        train_step(model, optimizer, x)  # clean: the step-0 findings are not acted on
        assert capture.runtime.step == 2


def test_raise_waits_for_the_step_when_grad_scale_may_veto(model: nn.Sequential) -> None:
    """With grad_scale active (its overflow veto runs before the guard), a NaN backward does
    not raise: grad_scale skips the step, and the guard records its findings only."""
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    before = weights(model)
    with capture_events(guard(), ("grad_scale", GradScale(GradScale.Config()))) as capture:
        train_step(model, optimizer, make_input())
    skips = [
        r["data"]["reason"] for r in capture.of_plugin("grad_scale") if r["kind"] == "skip_step"
    ]
    assert skips == ["overflow"]
    assert len(nonfinite(capture)) == 4
    for name, value in weights(model).items():
        np.testing.assert_array_equal(value, before[name])


# ---------------------------------------------------------------------- forward
def test_forward_check_raises_at_once_in_the_producer() -> None:
    """check_forward: a NaN output raises inside forward, naming the layer and "output"."""
    model = make_model(PoisonedLinear)
    with (
        capture_events(guard(check_forward=True)) as capture,
        pytest.raises(NonFiniteGradientError) as info,
    ):
        model(make_input())
    error = info.value
    assert (error.module_name, error.phase, error.tensor, error.role) == (
        "2",
        "forward",
        "output",
        "producer",
    )
    assert (error.nan, error.numel) == (20, 20)
    assert nonfinite(capture) == [("2", "forward", "output", "producer")]


def test_forward_check_records_producer_then_propagators() -> None:
    """Modules after the producer, and the container holding it, are propagators."""
    model = make_model(PoisonedLinear)
    with capture_events(guard(check_forward=True, check_backward=False, action="warn")) as cap:
        model(make_input())
    assert nonfinite(cap) == [
        ("2", "forward", "output", "producer"),
        ("3", "forward", "output", "propagator"),
        ("4", "forward", "output", "propagator"),
        ("", "forward", "output", "propagator"),
    ]


def test_forward_check_blames_no_module_for_a_nonfinite_input(model: nn.Sequential) -> None:
    """A NaN already in the batch makes the first layer a propagator, not a producer."""
    x = make_input().detach()
    x[0, 0] = NAN
    with capture_events(guard(check_forward=True)), pytest.raises(NonFiniteGradientError) as info:
        model(x)
    assert (info.value.module_name, info.value.role, info.value.nan) == ("0", "propagator", 4)


def test_forward_check_labels_tuple_outputs() -> None:
    """A tuple output is labelled by position."""
    split = SplitHalf()
    with capture_events(guard(check_forward=True)), pytest.raises(NonFiniteGradientError) as info:
        split(hookgrad.ones(2, 3))
    assert (info.value.module_name, info.value.tensor, info.value.numel) == ("", "output[1]", 6)


# ---------------------------------------------------------------------- parameters
@pytest.mark.parametrize("check_backward", [False, True])
def test_parameter_check_names_the_owner_of_the_first_bad_gradient(check_backward: bool) -> None:
    """When backward saw nothing non-finite (a NaN in a weight gradient only), the owner of the
    first non-finite parameter gradient is the producer."""
    hookgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4), nn.Tanh())
    model.append(BadWeightLinear(4, 2))
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    with capture_events(guard(check_backward=check_backward)) as capture:
        capture.runtime.watch(model)  # names parameters when no module hook runs
        with pytest.raises(NonFiniteGradientError) as info:
            train_step(model, optimizer, make_input())
    error = info.value
    assert (error.module_name, error.phase, error.tensor, error.role) == (
        "4",
        "step",
        "weight.grad",
        "producer",
    )
    assert (error.nan, error.numel, error.propagators, error.parameters) == (
        8,
        8,
        (),
        ("4.weight",),
    )
    assert nonfinite(capture) == [("4", "step", "weight.grad", "producer")]


def test_parameter_check_off_ignores_parameter_gradients() -> None:
    """check_parameters=False: a NaN only in a parameter gradient passes unnoticed."""
    model = make_model(BadWeightLinear)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    with capture_events(guard(check_parameters=False)) as capture:
        train_step(model, optimizer, make_input())
    assert capture.of_plugin("nan_guard") == []
    assert np.isnan(model[2].weight.detach().numpy()).all()


# ---------------------------------------------------------------------- hook installation
@pytest.fixture
def no_global_module_hooks() -> Iterator[None]:
    tables = (
        module_mod._global_forward_pre_hooks,
        module_mod._global_forward_hooks,
        module_mod._global_backward_pre_hooks,
        module_mod._global_backward_hooks,
    )
    assert not any(tables)
    yield
    assert not any(tables)


@pytest.mark.usefixtures("no_global_module_hooks")
def test_switched_off_checks_install_no_module_hook(model: nn.Sequential) -> None:
    """With forward and backward checks off no global module hook is installed at all; the
    step check still works (parameters named from ``named_parameters()``)."""
    optimizer = hookgrad.optim.SGD(model.named_parameters(), lr=0.1)
    with capture_events(guard(check_backward=False)) as capture:
        hooks = capture.runtime.pm.hook
        assert hooks.hookgrad_forward.get_hookimpls() == []
        assert hooks.hookgrad_full_backward.get_hookimpls() == []
        assert hooks.hookgrad_backward_begin.get_hookimpls() == []
        model(make_input()).sum().backward()
        assert not module_mod._global_backward_hooks
        with pytest.raises(NonFiniteGradientError) as info:
            optimizer.step()
        assert not module_mod._global_forward_hooks  # the first step's model spotter is gone
    assert (info.value.module_name, info.value.tensor) == ("0", "weight.grad")


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, ["hookgrad_backward_begin", "hookgrad_full_backward"]),
        (
            {"check_forward": True},
            ["hookgrad_backward_begin", "hookgrad_forward", "hookgrad_full_backward"],
        ),
        ({"check_backward": False, "check_forward": True}, ["hookgrad_forward"]),
    ],
)
def test_only_switched_on_checks_are_implemented(
    settings: dict[str, bool], expected: list[str]
) -> None:
    """pluggy sees exactly the event hooks the config switches on (plus the step hook)."""
    name, plugin = guard(**settings)
    with capture_events((name, plugin)) as capture:
        implemented = {
            hook
            for hook in ("hookgrad_forward", "hookgrad_full_backward", "hookgrad_backward_begin")
            if getattr(capture.runtime.pm.hook, hook).get_hookimpls()
        }
        assert sorted(implemented) == expected
        assert capture.runtime.pm.hook.hookgrad_optimizer_step_pre.get_hookimpls()


# ---------------------------------------------------------------------- engine warnings
def test_the_guards_hooks_raise_no_engine_warning() -> None:
    """A run over a model whose input needs no grad warns nothing, even under
    simplefilter("error"): torch's B-9 warning concerns the user's hooks, not the runtime's."""
    model = make_model(nn.Linear)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    with capture_events(guard()) as capture, warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            train_step(model, optimizer, hookgrad.randn(5, 3))
        assert capture.runtime.step == 2


def test_a_users_global_full_backward_hook_still_warns_as_in_torch() -> None:
    """Beside the guard, a user's global full backward hook gets torch's B-9 warnings: the
    same texts, category, count and the caller's line as a torch run, and filters apply."""
    torch = pytest.importorskip("torch")

    def run(lib: Any, model: Any) -> list[tuple[type[Warning], str, str]]:
        registry = lib.nn.modules.module
        with registry.register_module_full_backward_hook(lambda m, gi, go: None):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model(lib.randn(5, 3)).sum().backward()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with pytest.raises(UserWarning, match=r"^Full backward hook is firing"):
                    model(lib.randn(5, 3)).sum().backward()
        return [(w.category, str(w.message), w.filename) for w in caught]

    expected = run(torch, _torch_copy(torch, make_model(nn.Linear)))
    with capture_events(guard()):
        got = run(hookgrad, make_model(nn.Linear))
    assert got == expected
    assert len(got) == 2  # the first Linear and the Sequential: their inputs need no grad
    assert got[0][1].startswith("Full backward hook is firing") and got[0][2] == __file__


# ---------------------------------------------------------------------- selection, state
def test_excluded_module_is_never_named(
    model: nn.Sequential, optimizer: hookgrad.optim.SGD
) -> None:
    """exclude=["2"]: the fault is blamed on the innermost selected module around it (the
    root), never on the excluded one; the step is still stopped."""
    with (
        capture_events(guard(exclude=["2"])) as capture,
        pytest.raises(NonFiniteGradientError) as info,
    ):
        train_step(model, optimizer, make_input())
    assert (info.value.module_name, info.value.tensor, info.value.role) == (
        "",
        "grad_input[0]",
        "producer",
    )
    assert info.value.propagators == ("1", "0")
    assert "2" not in {module for module, *_ in nonfinite(capture)}


def test_findings_reset_between_steps(model: nn.Sequential, optimizer: hookgrad.optim.SGD) -> None:
    """A clean step after a skipped one is taken and records nothing."""
    x = make_input()
    with capture_events(guard(action="skip_step")) as capture:
        train_step(model, optimizer, x)
        model[2].broken = False
        before = weights(model)
        train_step(model, optimizer, x)
    assert {r["step"] for r in capture.of_plugin("nan_guard")} == {0}
    assert not np.array_equal(weights(model)["2.weight"], before["2.weight"])


def test_a_new_backward_supersedes_the_findings_of_the_last(
    model: nn.Sequential, optimizer: hookgrad.optim.SGD
) -> None:
    """backward_begin resets: a NaN backward redone cleanly before the step warns nothing."""
    x = make_input()
    with capture_events(guard(action="warn")) as capture, warnings.catch_warnings():
        warnings.simplefilter("error", NonFiniteGradientWarning)
        model(x).sum().backward()
        model[2].broken = False
        train_step(model, optimizer, x)
    assert len(nonfinite(capture)) == 4  # from the first backward only
    assert all(np.isfinite(v).all() for v in weights(model).values())


@pytest.mark.parametrize("cap", [0, 2])
def test_records_are_capped_per_step_but_detection_is_not(
    model: nn.Sequential, optimizer: hookgrad.optim.SGD, cap: int
) -> None:
    """max_records_per_step limits the records; the error still knows every finding."""
    x = make_input()
    with capture_events(guard(max_records_per_step=cap, action="skip_step")) as capture:
        train_step(model, optimizer, x)
        train_step(model, optimizer, x)
    steps = [r["step"] for r in capture.of_plugin("nan_guard") if r["kind"] == "nonfinite"]
    assert steps == [0] * cap + [1] * cap
    skips = [r for r in capture.of_plugin("nan_guard") if r["kind"] == "skip_step"]
    assert [r["data"]["module"] for r in skips] == ["2", "2"]


def test_finite_training_records_nothing_and_changes_nothing() -> None:
    """Three clean steps: no record, and the same weights as without the guard."""
    runs = []
    for guarded in (False, True):
        model = make_model(nn.Linear)
        optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        plugins = [guard(check_forward=True)] if guarded else []
        with capture_events(*plugins) as capture:
            for _ in range(3):
                train_step(model, optimizer, make_input())
        assert capture.records == []
        runs.append(weights(model))
    for name, value in runs[0].items():
        np.testing.assert_array_equal(runs[1][name], value)


def test_an_array_found_finite_is_not_checked_again_as_the_next_grad_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Backward through Sequential(Linear, Tanh, Linear): each gradient flowing between two
    layers is screened once, not as the grad_input of one and again as the grad_output of the
    next (nor as the root's call, spanning them all: its two are the same arrays again)."""
    from hookgrad.engines.numpy import _kernels

    screened: list[np.ndarray] = []  # alone or together with others
    real, joint = _kernels.all_finite, _kernels._joint_finite
    monkeypatch.setattr(_kernels, "all_finite", lambda a: screened.append(a) or real(a))
    monkeypatch.setattr(_kernels, "_joint_finite", lambda b: screened.extend(b) or joint(b))
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    x = hookgrad.randn(5, 3, requires_grad=True)
    with capture_events(guard(check_parameters=False)) as capture:
        model(x).sum().backward()
    assert capture.records == []
    # 2: out, g2; 1: g1 (g2 skipped); 0: g0 (g1 skipped); root: out, g0 (both skipped)
    assert len(screened) == 4


def test_activated_by_entry_point_name_from_config(
    model: nn.Sequential, optimizer: hookgrad.optim.SGD
) -> None:
    """[plugins.nan_guard] in config loads NanGuard through its entry point."""
    config = {"plugins": {"nan_guard": {"action": "skip_step"}}, "events": {"memory": True}}
    with hookgrad.Runtime(config, environ={}) as rt:
        assert isinstance(rt.plugins["nan_guard"], NanGuard)
        train_step(model, optimizer, make_input())
        assert rt.memory is not None
        kinds = [r["kind"] for r in rt.memory.records if r.get("plugin") == "nan_guard"]
    assert kinds == ["nonfinite"] * 4 + ["skip_step"]
    assert all(p.grad is None for p in model.parameters())


# ---------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"action": "explode"}, "'raise', 'warn', 'zero' or 'skip_step'"),
        ({"max_records_per_step": -1}, "max_records_per_step must be 0 or more, got -1"),
        ({"max_records_per_step": 10**9}, "Input should be less than or equal to 10000"),
        (
            {"check_forward": False, "check_backward": False, "check_parameters": False},
            "detects nothing",
        ),
        ({"actoin": "warn"}, "Extra inputs are not permitted"),
    ],
)
def test_bad_config_is_rejected_with_a_clear_message(
    settings: dict[str, Any], message: str
) -> None:
    """Bad values fail in the Config model, naming the field and what is allowed."""
    with pytest.raises(ValidationError, match=message) as info:
        NanGuard.Config(**settings)
    field = next(iter(settings))
    if len(settings) == 1:
        assert field in str(info.value)


def test_config_is_a_plugin_config() -> None:
    """The defaults: raise, backward and parameter checks on, forward off, 16 records."""
    config = NanGuard.Config()
    assert isinstance(config, PluginConfig)
    assert (config.action, config.check_forward, config.check_backward) == ("raise", False, True)
    assert (config.check_parameters, config.max_records_per_step) == (True, 16)


# ---------------------------------------------------------------------- against torch
def _torch_copy(torch: Any, model: nn.Sequential) -> Any:
    """The same model in torch, the NaN-backward Function placed inside layer 2."""

    class TorchNaNGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return grad * NAN

    class TorchBuggy(torch.nn.Linear):
        def forward(self, x: Any) -> Any:
            return TorchNaNGrad.apply(super().forward(x))

    layers = [torch.nn.Linear(3, 4), torch.nn.Tanh(), TorchBuggy(4, 4), torch.nn.Tanh()]
    twin = torch.nn.Sequential(*layers, torch.nn.Linear(4, 2))
    with torch.no_grad():
        for name, p in twin.named_parameters():
            p.copy_(torch.from_numpy(weights(model)[name]))
    return twin


def _inside(child: str, parent: str) -> bool:
    """Whether module ``child`` is a proper submodule of ``parent`` ("" is the root)."""
    return child != parent and (parent == "" or child.startswith(f"{parent}."))


def test_roles_match_a_torch_global_backward_hook(model: nn.Sequential) -> None:
    """The same producer/propagator rule in a torch global full backward hook finds the same
    modules in the same order: hookgrad's hook order and gradients are torch's."""
    torch = pytest.importorskip("torch")
    twin = _torch_copy(torch, model)
    names = {id(m): name for name, m in twin.named_modules()}
    seen: list[tuple[str, str, str, str]] = []

    def rule(module: Any, grad_input: Any, grad_output: Any) -> None:
        bad_out = [i for i, g in enumerate(grad_output) if g is not None and not g.isfinite().all()]
        bad_in = [i for i, g in enumerate(grad_input) if g is not None and not g.isfinite().all()]
        name = names[id(module)]
        inner = any(role == "producer" and _inside(m, name) for m, _, _, role in seen)
        if bad_out:
            seen.append((name, "backward", f"grad_output[{bad_out[0]}]", "propagator"))
        elif bad_in:
            role = "propagator" if inner else "producer"
            seen.append((name, "backward", f"grad_input[{bad_in[0]}]", role))

    x = make_input()
    handle = torch.nn.modules.module.register_module_full_backward_hook(rule)
    try:
        twin(torch.from_numpy(x.detach().numpy()).requires_grad_()).sum().backward()
    finally:
        handle.remove()
    with capture_events(guard(action="warn")) as capture:
        model(x).sum().backward()
    assert nonfinite(capture) == seen
    assert seen[0] == ("2", "backward", "grad_input[0]", "producer")


def test_zero_matches_torch_nan_to_num_then_sgd(model: nn.Sequential) -> None:
    """action="zero" then SGD gives torch's parameters after nan_to_num_ on every gradient."""
    torch = pytest.importorskip("torch")
    twin = _torch_copy(torch, model)
    x = make_input()
    twin(torch.from_numpy(x.detach().numpy())).sum().backward()
    for p in twin.parameters():
        p.grad.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
    torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9).step()
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with capture_events(guard(action="zero")):
        train_step(model, optimizer, x)
    for name, p in twin.named_parameters():
        np.testing.assert_allclose(weights(model)[name], p.detach().numpy(), rtol=1e-6, atol=1e-7)
