"""hookgrad.tap beside a runtime and other threads: the runtime's steps, nothing disturbed."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import hookgrad
from hookgrad.hookspecs import HOOK_EVENTS
from hookgrad.runtime import Runtime

from .conftest import X, mlp

ALL_KINDS = ("forward_pre", "forward", "backward_pre", "backward")
ALL_EVENTS = tuple(model.model_fields["phase"].default for model in HOOK_EVENTS.values())
# event_log traces every hook point; grad_clip changes training (a disturbed clip would show)
PIPELINE: dict[str, Any] = {
    "events": {"memory": True},
    "plugins": {
        "grad_clip": {"mode": "norm", "max_norm": 0.05},
        "event_log": {"hooks": ALL_EVENTS},
    },
}
STEPS = 4


@pytest.fixture
def _switch_threads_often() -> Iterator[None]:
    """Let threads interleave inside module calls and backward passes, not only at barriers."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


def run(lib: ModuleType, tap_from: int | None, **tap: Any) -> tuple[list[dict[str, Any]], Any]:
    """STEPS SGD steps under a runtime with PIPELINE; a tap ``"*"`` (``tap`` its settings)
    open from step ``tap_from`` to the end. The runtime's records and the tap (or None)."""
    model = mlp(lib)
    optimizer = lib.optim.SGD(model.parameters(), lr=0.5)
    x, target = lib.tensor(X), lib.tensor(X[:, :2] * 0.5)
    opened = None
    with Runtime(PIPELINE, environ={}, engine=lib.__name__) as runtime:
        for step in range(STEPS):
            if step == tap_from:
                opened = hookgrad.tap(model, "*", **tap).start()
            optimizer.zero_grad()
            ((model(x) - target) ** 2).mean().backward()
            optimizer.step()
        if opened is not None:
            opened.stop()
    assert runtime.memory is not None
    return [r for r in runtime.memory.records if "kind" in r], opened


def test_a_tap_in_a_runtime_leaves_its_records_unchanged(lib: ModuleType) -> None:
    """The runtime's sinks get exactly the records of the same run without a tap."""
    alone, _ = run(lib, None)
    tapped, tap = run(lib, 0, kinds=ALL_KINDS, capture=True)
    assert len(alone) > STEPS * 4 * 4
    assert tapped == alone
    assert len(tap.records) == STEPS * 4 * 4  # the model and its three layers, four kinds


def test_inside_a_runtime_the_step_is_the_runtimes(lib: ModuleType) -> None:
    """A tap opened at the runtime's step 2 records steps 2 and 3; every=3 keeps step 3."""
    _, tap = run(lib, 2, kinds=("forward",))
    assert sorted({r.step for r in tap.records}) == [2, 3]
    _, sampled = run(lib, 2, kinds=("forward",), every=3)
    assert {r.step for r in sampled.records} == {3}


@pytest.mark.usefixtures("_switch_threads_often")
def test_a_tap_records_only_the_thread_that_started_it(lib: ModuleType) -> None:
    """Another thread running the tapped model at the same time leaves no record and no step."""
    model = mlp(lib)
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def other_thread() -> None:
        try:
            x = lib.tensor(X * 3, requires_grad=True)
            barrier.wait()
            for _ in range(STEPS * 3):
                (model(x).sum() * 2).backward(inputs=[x])  # its gradients: twos
        except BaseException as error:  # handed to the test
            failures.append(error)

    x = lib.tensor(X)
    with hookgrad.tap(model, "2", kinds=("forward", "backward"), capture=True) as tap:
        thread = threading.Thread(target=other_thread)
        thread.start()
        barrier.wait()
        for _ in range(STEPS):
            model(x).sum().backward()
        thread.join()
    assert not failures
    with lib.no_grad():
        expected = model(x).numpy()
    assert [(r.phase, r.step) for r in tap.records] == [
        (phase, step) for step in range(STEPS) for phase in ("forward", "backward")
    ]
    for output in tap.tensors("2", "output"):
        np.testing.assert_array_equal(output, expected)
    for (grad,) in tap.tensors("2", "grad_output"):
        np.testing.assert_array_equal(grad, np.ones((5, 2), np.float32))
