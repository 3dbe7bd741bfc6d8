"""Runtimes and threads: a runtime acts on its own thread's work unless it is shared."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

import hookgrad
from hookgrad import nn, optim
from hookgrad.hookspecs import HOOK_EVENTS
from hookgrad.runtime import Runtime
from hookgrad.runtime._runtime import _DEFAULT

STEPS = 30
ALL_EVENTS = tuple(model.model_fields["phase"].default for model in HOOK_EVENTS.values())
# event_log traces every hook point; grad_clip changes training (a foreign clip would show).
PIPELINE: dict[str, Any] = {
    "events": {"memory": True},
    "plugins": {
        "grad_clip": {"mode": "norm", "max_norm": 0.05},
        "event_log": {"hooks": ALL_EVENTS},
    },
}


@pytest.fixture(autouse=True)
def _no_default_runtime() -> Any:
    """Every test ends without a default runtime."""
    yield
    if _DEFAULT.runtime is not None:
        _DEFAULT.runtime.close()


@pytest.fixture(autouse=True)
def _switch_threads_often() -> Any:
    """Let the interpreter switch threads every few bytecodes, so threads interleave inside
    module calls, backward passes and steps rather than only at the barriers."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


def _model(seed: int) -> nn.Sequential:
    hookgrad.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))


def _train(model: nn.Module, seed: int, step: Callable[[], None] = lambda: None) -> list[float]:
    """STEPS of SGD on fixed data; ``step()`` runs before each step; returns the losses."""
    x = hookgrad.tensor([[0.1 * seed, 0.2, -0.3], [0.5, -0.1 * seed, 0.4]])
    target = hookgrad.tensor([[1.0], [-1.0]])
    opt = optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(STEPS):
        step()
        opt.zero_grad()
        loss = ((model(x) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _records(runtime: Runtime) -> list[dict[str, Any]]:
    assert runtime.memory is not None
    return [r for r in runtime.memory.records if "kind" in r]


# Only step hooks: no module hook, so the models are learnt by the root spotter.
STEP_PIPELINE: dict[str, Any] = {
    "events": {"memory": True},
    "plugins": {
        "grad_clip": {"mode": "norm", "max_norm": 0.05},
        "event_log": {"hooks": ("optimizer_step_pre", "optimizer_step_post")},
    },
}


def _run_alone(
    seed: int, pipeline: dict[str, Any] = PIPELINE
) -> tuple[list[dict[str, Any]], list[float]]:
    with Runtime(pipeline, environ={}) as runtime:
        losses = _train(_model(seed), seed)
    return _records(runtime), losses


def _in_threads(*targets: Callable[[], None]) -> None:
    """Run each target in its own thread; re-raise the first failure."""
    errors: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as error:  # handed to the main thread
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@pytest.mark.parametrize("pipeline", [PIPELINE, STEP_PIPELINE], ids=["module", "step"])
def test_two_threads_with_their_own_runtimes_record_as_if_run_one_after_the_other(pipeline):
    """Each thread's runtime sees only its thread's model: records and losses as run alone."""
    expected = {seed: _run_alone(seed, pipeline) for seed in (1, 2)}
    barrier = threading.Barrier(2)
    results: dict[int, tuple[list[dict[str, Any]], list[float]]] = {}

    models = {seed: _model(seed) for seed in (1, 2)}  # the default generator is process-wide

    def worker(seed: int) -> Callable[[], None]:
        def run() -> None:
            model = models[seed]
            with Runtime(pipeline, environ={}) as runtime:
                losses = _train(model, seed, step=lambda: barrier.wait(timeout=30))
            results[seed] = (_records(runtime), losses)

        return run

    _in_threads(worker(1), worker(2))
    for seed in (1, 2):
        records, losses = results[seed]
        assert losses == expected[seed][1]
        assert len(records) == len(expected[seed][0]) >= STEPS * 2
        for got, want in zip(records, expected[seed][0]):
            assert got == want


def test_runtimes_starting_and_closing_in_another_thread_leave_a_run_unchanged():
    """Another thread starting and closing runtimes (registering and removing engine hooks)
    mid-run neither breaks a thread's module calls and steps nor changes its records."""
    expected = _run_alone(5)
    model, other = _model(5), _model(6)
    done = threading.Event()
    result: list[tuple[list[dict[str, Any]], list[float]]] = []

    def run() -> None:
        try:
            with Runtime(PIPELINE, environ={}) as runtime:
                losses = _train(model, 5)
            result.append((_records(runtime), losses))
        finally:
            done.set()

    def churn() -> None:
        while not done.is_set():
            with Runtime(PIPELINE, environ={}):
                other(hookgrad.ones(2, 3)).sum().backward()

    _in_threads(run, churn)
    assert result == [expected]


def test_a_runtime_ignores_the_work_of_other_threads():
    """A thread without a runtime trains untouched while another thread's runtime runs."""
    alone = _train(_model(3), 3)  # no runtime: no clipping
    with Runtime(PIPELINE, environ={}) as runtime:
        other: list[float] = []
        model = _model(3)
        _in_threads(lambda: other.extend(_train(model, 3)))
    assert other == alone
    assert _records(runtime) == []


@pytest.mark.parametrize("workers", [2, 4])
def test_a_shared_runtime_records_every_threads_work(workers):
    """threads="all": each thread's calls are named and counted on their own, none lost, even
    when the threads make their first module call at the same moment (up to four)."""
    expected, _ = _run_alone(4)
    per_step = len(expected) // STEPS
    barrier = threading.Barrier(workers)
    models = [_model(4) for _ in range(workers)]
    with Runtime(PIPELINE, environ={}, threads="all") as runtime:
        _in_threads(
            *(
                lambda model=model: _train(model, 4, step=lambda: barrier.wait(timeout=30))
                for model in models
            )
        )
    records = _records(runtime)
    assert runtime.step == workers * STEPS  # every thread's steps advance the one counter
    assert len(records) == workers * STEPS * per_step
    module_records = [r for r in records if "call_index" in r]

    def calls(rs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted((r["hook"], r["module_name"], r["call_index"]) for r in rs)

    expected_calls = calls([r for r in expected if "call_index" in r])
    assert calls(module_records) == sorted(expected_calls * workers)


def test_threads_must_name_a_policy():
    """An unknown threads= value is a ValueError listing the valid ones."""
    with pytest.raises(ValueError, match=r"threads must be one of \('starter', 'all'\)"):
        Runtime({}, environ={}, threads="every")  # type: ignore[arg-type]


def test_concurrent_configure_leaves_one_started_default_runtime():
    """Threads calling hookgrad.configure at once: one default runtime is left started."""
    for _ in range(5):
        barrier = threading.Barrier(4)
        made: list[Runtime] = []

        def configure(barrier: threading.Barrier = barrier, made: list[Runtime] = made) -> None:
            barrier.wait(timeout=30)
            made.append(hookgrad.configure({}))

        _in_threads(*(configure for _ in range(4)))
        assert [r for r in made if r.started] == [_DEFAULT.runtime]
