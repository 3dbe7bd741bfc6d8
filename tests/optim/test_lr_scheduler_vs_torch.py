"""Differential tests: hookgrad's lr schedulers give torch 2.13's learning rates bit for bit.

Both libraries drive the same schedule (``optimizer.step()`` then ``scheduler.step()``) on an
optimizer with several parameter groups; the recorded ``group["lr"]`` (and, where a schedule
sets them, momentum and betas), ``get_last_lr()`` and ``state_dict()`` must be equal with ``==``,
not merely close.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookgrad
import hookgrad.optim
import hookgrad.optim.lr_scheduler

torch = pytest.importorskip("torch")

LRS = (0.1, 0.03, 1.0)
MakeSched = Callable[[Any, Any], Any]


def _optimizer(lib: Any, kind: str = "sgd", lrs: tuple[float, ...] = LRS) -> Any:
    """An optimizer with one single-parameter group per lr."""
    groups = [{"params": [lib.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs]
    if kind == "adam":
        return lib.optim.Adam(groups)
    return lib.optim.SGD(groups, momentum=0.9)


def _snapshot(optimizer: Any) -> list[tuple[Any, ...]]:
    """What a schedule may set in each group."""
    return [(g["lr"], g.get("momentum"), g.get("betas")) for g in optimizer.param_groups]


def _trace(
    lib: Any,
    make: MakeSched,
    steps: int,
    kind: str = "sgd",
    lrs: tuple[float, ...] = LRS,
    epochs: list[Any] | None = None,
) -> list[Any]:
    """The groups and last lrs after construction and after each of ``steps`` steps."""
    optimizer = _optimizer(lib, kind, lrs)
    scheduler = make(lib.optim.lr_scheduler, optimizer)
    trace = [(_snapshot(optimizer), scheduler.get_last_lr())]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(steps):
            optimizer.step()
            if epochs is None:
                scheduler.step()
            else:
                scheduler.step(epochs[i])
            trace.append((_snapshot(optimizer), scheduler.get_last_lr()))
    return trace


def _outcome(lib: Any, make: MakeSched, steps: int, **kwargs: Any) -> Any:
    """The trace, or the exception's type and text where the schedule cannot be run."""
    try:
        return _trace(lib, make, steps, **kwargs)
    except Exception as error:
        return type(error), str(error)


def _assert_same_trace(make: MakeSched, steps: int = 40, **kwargs: Any) -> None:
    """Both libraries' traces are equal, float for float (or both raise the same error)."""
    assert _outcome(hookgrad, make, steps, **kwargs) == _outcome(torch, make, steps, **kwargs)


SCHEDULES: dict[str, MakeSched] = {
    "step": lambda s, o: s.StepLR(o, step_size=3, gamma=0.7),
    "multistep": lambda s, o: s.MultiStepLR(o, milestones=[2, 5, 5, 11], gamma=0.3),
    "exponential": lambda s, o: s.ExponentialLR(o, gamma=0.93),
    "cosine": lambda s, o: s.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
    "cosine_no_min": lambda s, o: s.CosineAnnealingLR(o, T_max=10),
    "lambda": lambda s, o: s.LambdaLR(o, lr_lambda=lambda e: 0.95**e + 0.01 * e),
    "lambda_per_group": lambda s, o: s.LambdaLR(
        o, lr_lambda=[lambda e: 1 / (e + 1), lambda e: 0.9**e, lambda e: 1.0]
    ),
    "multiplicative": lambda s, o: s.MultiplicativeLR(o, lr_lambda=lambda e: 0.97),
    "linear": lambda s, o: s.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=9),
    "linear_default": lambda s, o: s.LinearLR(o),
    "constant": lambda s, o: s.ConstantLR(o, factor=0.3, total_iters=4),
    "polynomial": lambda s, o: s.PolynomialLR(o, total_iters=12, power=1.7),
    "warm_restarts": lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2, eta_min=1e-4),
    "warm_restarts_t1": lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=5),
    "onecycle_cos": lambda s, o: s.OneCycleLR(o, max_lr=[0.5, 0.2, 1.0], total_steps=40),
    "onecycle_linear_three_phase": lambda s, o: s.OneCycleLR(
        o, max_lr=0.4, epochs=4, steps_per_epoch=10, anneal_strategy="linear", three_phase=True
    ),
    "onecycle_no_momentum": lambda s, o: s.OneCycleLR(
        o, max_lr=0.3, total_steps=40, cycle_momentum=False, pct_start=0.45
    ),
    "sequential": lambda s, o: s.SequentialLR(
        o,
        [s.LinearLR(o, start_factor=0.2, total_iters=5), s.CosineAnnealingLR(o, T_max=15)],
        milestones=[6],
    ),
    "sequential_three": lambda s, o: s.SequentialLR(
        o,
        [s.ConstantLR(o, factor=0.5, total_iters=3), s.ExponentialLR(o, 0.9), s.StepLR(o, 2)],
        milestones=[4, 12],
    ),
    "chained": lambda s, o: s.ChainedScheduler(
        [s.ExponentialLR(o, gamma=0.95), s.StepLR(o, step_size=4, gamma=0.5)]
    ),
    "chained_warmup_cosine": lambda s, o: s.ChainedScheduler(
        [s.LinearLR(o, start_factor=0.25, total_iters=8), s.CosineAnnealingLR(o, T_max=13)]
    ),
}


@pytest.mark.parametrize("make", SCHEDULES.values(), ids=SCHEDULES.keys())
def test_schedule_matches_torch_bit_for_bit(make: MakeSched) -> None:
    """Every scheduler's chainable lr sequence over 40 steps equals torch's exactly."""
    assert isinstance(_outcome(hookgrad, make, 40), list)
    _assert_same_trace(make)


def test_onecycle_cycles_adam_beta1_as_torch() -> None:
    """OneCycleLR on Adam moves betas[0] between max and base momentum as torch does."""
    _assert_same_trace(
        lambda s, o: s.OneCycleLR(o, max_lr=0.01, total_steps=30, base_momentum=0.8),
        30,
        kind="adam",
    )


CLOSED_FORMS = ["step", "multistep", "exponential", "cosine", "linear", "constant", "polynomial"]


@pytest.mark.parametrize("name", CLOSED_FORMS)
def test_step_with_epoch_uses_torch_closed_form(name: str) -> None:
    """``step(epoch)`` jumps with the closed form, giving torch's floats at arbitrary epochs."""
    epochs = [3, 1, 8, 8, 20, 0, 13, 2, 30, 7]
    _assert_same_trace(SCHEDULES[name], len(epochs), epochs=epochs)


def test_warm_restarts_fractional_epochs_match_torch() -> None:
    """CosineAnnealingWarmRestarts accepts fractional epochs, as torch's SGDR example does."""
    epochs = [0.25, 0.5, 1.75, 3.9, 4.0, 11.5, 12.1, 27.3, 2.0]
    _assert_same_trace(
        lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2), len(epochs), epochs=epochs
    )


@settings(max_examples=25, deadline=None)
@given(
    step_size=st.integers(1, 9),
    gamma=st.floats(0.05, 1.0),
    t_max=st.integers(1, 30),
    eta_min=st.floats(0.0, 0.05),
    steps=st.integers(1, 80),
)
def test_step_cosine_exponential_hypothesis(
    step_size: int, gamma: float, t_max: int, eta_min: float, steps: int
) -> None:
    """StepLR, ExponentialLR and CosineAnnealingLR agree with torch for any hyperparameters."""
    _assert_same_trace(lambda s, o: s.StepLR(o, step_size, gamma), steps)
    _assert_same_trace(lambda s, o: s.ExponentialLR(o, gamma), steps)
    _assert_same_trace(lambda s, o: s.CosineAnnealingLR(o, t_max, eta_min), steps)


@settings(max_examples=25, deadline=None)
@given(
    total=st.integers(2, 60),
    pct=st.floats(0.05, 0.95),
    strategy=st.sampled_from(["cos", "linear"]),
    three_phase=st.booleans(),
    div=st.floats(1.5, 50.0),
    final_div=st.floats(1.0, 1e5),
    kind=st.sampled_from(["sgd", "adam"]),
)
def test_onecycle_hypothesis(
    total: int,
    pct: float,
    strategy: str,
    three_phase: bool,
    div: float,
    final_div: float,
    kind: str,
) -> None:
    """OneCycleLR's lrs and momenta equal torch's over its whole cycle for any settings."""
    _assert_same_trace(
        lambda s, o: s.OneCycleLR(
            o,
            max_lr=0.5,
            total_steps=total,
            pct_start=pct,
            anneal_strategy=strategy,
            three_phase=three_phase,
            div_factor=div,
            final_div_factor=final_div,
        ),
        total - 1,
        kind=kind,
    )


@settings(max_examples=25, deadline=None)
@given(
    start=st.floats(0.01, 1.0),
    end=st.floats(0.0, 1.0),
    total=st.integers(1, 20),
    factor=st.floats(0.0, 1.0),
    milestone=st.integers(1, 15),
    steps=st.integers(1, 50),
)
def test_linear_constant_sequential_hypothesis(
    start: float, end: float, total: int, factor: float, milestone: int, steps: int
) -> None:
    """LinearLR, ConstantLR and a SequentialLR of them agree with torch for any settings."""
    _assert_same_trace(lambda s, o: s.LinearLR(o, start, end, total), steps)
    _assert_same_trace(lambda s, o: s.ConstantLR(o, max(factor, 0.01), total), steps)
    _assert_same_trace(
        lambda s, o: s.SequentialLR(
            o, [s.LinearLR(o, start, end, total), s.ExponentialLR(o, 0.9)], [milestone]
        ),
        steps,
    )


@settings(max_examples=25, deadline=None)
@given(t0=st.integers(1, 8), t_mult=st.integers(1, 3), steps=st.integers(1, 80))
def test_warm_restarts_hypothesis(t0: int, t_mult: int, steps: int) -> None:
    """CosineAnnealingWarmRestarts agrees with torch for any period and multiplier."""
    _assert_same_trace(lambda s, o: s.CosineAnnealingWarmRestarts(o, t0, t_mult, 1e-3), steps)


# ---------------------------------------------------------------------------- ReduceLROnPlateau
def _plateau_trace(lib: Any, metrics: list[float], **options: Any) -> list[Any]:
    optimizer = _optimizer(lib)
    scheduler = lib.optim.lr_scheduler.ReduceLROnPlateau(optimizer, **options)
    trace = []
    for metric in metrics:
        optimizer.step()
        scheduler.step(metric)
        trace.append(
            (
                _snapshot(optimizer),
                scheduler.get_last_lr(),
                scheduler.best,
                scheduler.num_bad_epochs,
                scheduler.cooldown_counter,
            )
        )
    return trace


@settings(max_examples=40, deadline=None)
@given(
    metrics=st.lists(st.floats(-10, 10) | st.sampled_from([1.0, 2.0]), min_size=1, max_size=60),
    mode=st.sampled_from(["min", "max"]),
    threshold_mode=st.sampled_from(["rel", "abs"]),
    threshold=st.floats(0.0, 0.5),
    factor=st.floats(0.0, 0.99),
    patience=st.integers(0, 4),
    cooldown=st.integers(0, 3),
    min_lr=st.sampled_from([0.0, 0.01, [0.0, 0.02, 0.5]]),
    eps=st.sampled_from([1e-8, 0.005]),
)
def test_reduce_lr_on_plateau_hypothesis(metrics: list[float], **options: Any) -> None:
    """ReduceLROnPlateau cuts the same lrs at the same epochs as torch, in every mode."""
    assert _plateau_trace(hookgrad, metrics, **options) == _plateau_trace(torch, metrics, **options)


def test_plateau_reduces_after_patience() -> None:
    """With patience 2, the third epoch without improvement cuts lr by factor, then cooldown."""
    optimizer = _optimizer(hookgrad, lrs=(1.0,))
    scheduler = hookgrad.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, factor=0.5, patience=2, cooldown=1
    )
    lrs = []
    for metric in [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]:
        scheduler.step(metric)
        lrs.append(optimizer.param_groups[0]["lr"])
    assert lrs == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5]


# ---------------------------------------------------------------------------- state and warnings
@pytest.mark.parametrize(
    "name", ["step", "multistep", "onecycle_cos", "sequential", "chained", "warm_restarts"]
)
def test_state_dict_equals_torch_and_resumes(name: str) -> None:
    """``state_dict()`` equals torch's; loading it into a new scheduler continues the schedule."""
    make = SCHEDULES[name]
    results = {}
    for lib in (hookgrad, torch):
        optimizer = _optimizer(lib)
        scheduler = make(lib.optim.lr_scheduler, optimizer)
        for _ in range(7):
            optimizer.step()
            scheduler.step()
        saved = scheduler.state_dict()
        resumed = make(lib.optim.lr_scheduler, _optimizer(lib))
        resumed.load_state_dict(saved)
        for group, lr in zip(resumed.optimizer.param_groups, scheduler.get_last_lr()):
            group.update(lr=lr)
        lrs = []
        for _ in range(9):
            resumed.optimizer.step()
            resumed.step()
            lrs.append(resumed.get_last_lr())
        results[lib] = (_comparable(saved), lrs)
    assert results[hookgrad] == results[torch]


def _comparable(state: Any) -> Any:
    """A state dict with torch's Counter and nested dicts as plain values for ``==``."""
    if isinstance(state, dict):
        return {k: _comparable(v) for k, v in state.items()}
    if isinstance(state, list):
        return [_comparable(v) for v in state]
    return state


def test_construction_sets_initial_lr_and_takes_first_step() -> None:
    """Constructing a scheduler records ``initial_lr``, sets ``last_epoch`` 0 and ``_step_count`` 1."""
    optimizer = _optimizer(hookgrad)
    scheduler = hookgrad.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.5)
    assert [g["initial_lr"] for g in optimizer.param_groups] == list(LRS)
    assert scheduler.base_lrs == list(LRS)
    assert (scheduler.last_epoch, scheduler._step_count) == (0, 1)
    assert scheduler.get_last_lr() == [0.05, 0.015, 0.5]


def test_resuming_without_initial_lr_raises_key_error_as_torch() -> None:
    """``last_epoch >= 0`` on groups without ``initial_lr`` raises torch's KeyError."""
    messages = []
    for lib in (hookgrad, torch):
        with pytest.raises(KeyError) as info:
            lib.optim.lr_scheduler.StepLR(_optimizer(lib), 2, last_epoch=3)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "param 'initial_lr' is not specified in param_groups[0]" in messages[0]


def _warnings_of(lib: Any, program: Callable[[Any, Any], None]) -> list[str]:
    optimizer = _optimizer(lib)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program(lib, optimizer)
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _scheduler_first(lib: Any, o: Any) -> None:
    lib.optim.lr_scheduler.StepLR(o, 2).step()


def _right_order(lib: Any, o: Any) -> None:
    scheduler = lib.optim.lr_scheduler.StepLR(o, 2)
    o.step()
    scheduler.step()


def _epoch_argument(lib: Any, o: Any) -> None:
    scheduler = lib.optim.lr_scheduler.StepLR(o, 2)
    o.step()
    scheduler.step(4)


def _get_lr_outside_step(lib: Any, o: Any) -> None:
    lib.optim.lr_scheduler.ExponentialLR(o, 0.5).get_lr()


def _plateau_epoch(lib: Any, o: Any) -> None:
    lib.optim.lr_scheduler.ReduceLROnPlateau(o).step(1.0, 3)


WARNING_PROGRAMS = [
    _scheduler_first,
    _right_order,
    _epoch_argument,
    _get_lr_outside_step,
    _plateau_epoch,
]


@pytest.mark.parametrize("program", WARNING_PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_warnings_match_torch(program: Callable[[Any, Any], None]) -> None:
    """The scheduler warns (or stays silent) exactly where torch does, with torch's text."""
    assert _warnings_of(hookgrad, program) == _warnings_of(torch, program)


def test_scheduler_before_optimizer_step_warns() -> None:
    """Calling ``scheduler.step()`` before any ``optimizer.step()`` gives torch's warning."""
    optimizer = _optimizer(hookgrad)
    scheduler = hookgrad.optim.lr_scheduler.StepLR(optimizer, 2)
    with pytest.warns(UserWarning, match=r"Detected call of `lr_scheduler.step\(\)` before"):
        scheduler.step()


ERRORS: dict[str, Callable[[Any, Any], Any]] = {
    "not_an_optimizer": lambda s, o: s.StepLR(object(), 2),
    "lambda_count": lambda s, o: s.LambdaLR(o, [lambda e: 1.0]),
    "multiplicative_not_callable": lambda s, o: s.MultiplicativeLR(o, [1.0, 2.0, 3.0]),
    "constant_factor": lambda s, o: s.ConstantLR(o, factor=1.5),
    "linear_start": lambda s, o: s.LinearLR(o, start_factor=0.0),
    "linear_end": lambda s, o: s.LinearLR(o, end_factor=2.0),
    "onecycle_steps": lambda s, o: s.OneCycleLR(o, 0.1),
    "onecycle_total": lambda s, o: s.OneCycleLR(o, 0.1, total_steps=0),
    "onecycle_pct": lambda s, o: s.OneCycleLR(o, 0.1, total_steps=5, pct_start=1),
    "onecycle_strategy": lambda s, o: s.OneCycleLR(o, 0.1, 5, anneal_strategy="exp"),
    "onecycle_max_lr_count": lambda s, o: s.OneCycleLR(o, [0.1], 5),
    "plateau_factor": lambda s, o: s.ReduceLROnPlateau(o, factor=1.0),
    "plateau_mode": lambda s, o: s.ReduceLROnPlateau(o, mode="up"),
    "plateau_threshold_mode": lambda s, o: s.ReduceLROnPlateau(o, threshold_mode="x"),
    "plateau_min_lrs": lambda s, o: s.ReduceLROnPlateau(o, min_lr=[0.1]),
    "warm_t0": lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=0),
    "warm_tmult": lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0),
    "sequential_empty": lambda s, o: s.SequentialLR(o, [], []),
    "sequential_milestones": lambda s, o: s.SequentialLR(o, [s.StepLR(o, 2)], [3]),
    "sequential_plateau": lambda s, o: s.SequentialLR(o, [s.ReduceLROnPlateau(o)], []),
    "chained_empty": lambda s, o: s.ChainedScheduler([]),
}


@pytest.mark.parametrize("make", ERRORS.values(), ids=ERRORS.keys())
def test_bad_arguments_raise_torch_errors(make: Callable[[Any, Any], Any]) -> None:
    """Bad scheduler arguments raise torch's exception type with torch's message."""
    outcomes = []
    for lib in (hookgrad, torch):
        with pytest.raises(Exception) as info:
            make(lib.optim.lr_scheduler, _optimizer(lib))
        outcomes.append((type(info.value), str(info.value).replace("torch.", "hookgrad.")))
    assert outcomes[0] == outcomes[1]


def test_onecycle_past_total_steps_raises_as_torch() -> None:
    """Stepping OneCycleLR beyond ``total_steps`` raises torch's ValueError."""
    optimizer = _optimizer(hookgrad)
    scheduler = hookgrad.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, total_steps=3)
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    with pytest.raises(ValueError, match=r"Tried to step 4 times\. The specified number of total"):
        optimizer.step()
        scheduler.step()


def test_cosine_schedule_reaches_eta_min() -> None:
    """CosineAnnealingLR reaches ``eta_min`` at ``T_max`` (to float precision)."""
    optimizer = _optimizer(hookgrad, lrs=(0.5,))
    scheduler = hookgrad.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10, eta_min=0.1)
    for _ in range(10):
        optimizer.step()
        scheduler.step()
    assert math.isclose(optimizer.param_groups[0]["lr"], 0.1, rel_tol=1e-12)


def test_tensor_lr_is_filled_in_place_as_torch() -> None:
    """A tensor ``lr`` stays the same tensor, filled in place; last lrs are tensor copies."""
    traces = []
    for lib in (hookgrad, torch):
        optimizer = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=lib.tensor(0.1))
        lr = optimizer.param_groups[0]["lr"]
        scheduler = lib.optim.lr_scheduler.ExponentialLR(optimizer, 0.9)
        trace = []
        for _ in range(5):
            optimizer.step()
            scheduler.step()
            last = scheduler.get_last_lr()[0]
            group_lr = optimizer.param_groups[0]["lr"]
            trace.append((group_lr is lr, last is not lr, isinstance(last, lib.Tensor), lr.item()))
        traces.append(trace)
    assert traces[0] == traces[1]
    assert traces[0][-1][:3] == (True, True, True)
