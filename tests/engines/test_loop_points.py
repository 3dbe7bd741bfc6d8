"""Backward begin/end and the step gate behave alike on both engines (torch through its adapter).

Every scenario runs on hookgrad's numpy engine and on torch 2.13 through
``hookgrad.engines.torch``, with the same expectations.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import hookgrad
from hookgrad.engines import Engine, engine_named
from hookgrad.optim._hooks import StepGateError

ENGINES = ["hookgrad", "torch"]


@pytest.fixture(params=ENGINES)
def lib(request: pytest.FixtureRequest) -> ModuleType:
    """The framework module of the engine under test."""
    if request.param == "torch":
        return pytest.importorskip("torch")
    return hookgrad


@pytest.fixture
def engine(lib: ModuleType) -> Engine:
    return engine_named("torch" if lib is not hookgrad else "hookgrad")


@pytest.fixture
def events(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """Every begin/end notification as (kind, root or seed); the observer removed after."""
    seen: list[tuple[str, Any]] = []
    handle = engine.observe_backward(
        lambda root, seed: seen.append(("begin", seed)), lambda root: seen.append(("end", root))
    )
    yield seen
    handle.remove()


def optimizer_module(lib: ModuleType) -> ModuleType:
    """``lib.optim.optimizer`` (torch does not keep it as an attribute of ``torch.optim``)."""
    return importlib.import_module(f"{lib.__name__}.optim.optimizer")


def values(t: Any) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def model_and_loss(lib: ModuleType) -> tuple[Any, Any]:
    lib.manual_seed(0)
    model = lib.nn.Linear(3, 2)
    x = lib.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    return model, model(x).pow(2).sum()


def test_begin_and_end_bracket_each_backward(lib: ModuleType, events: list[Any]) -> None:
    """One begin (seed None for a scalar root) and one end per backward, end after .grad is set."""
    model, loss = model_and_loss(lib)
    grads_at_end = []
    handle = engine_named("torch" if lib is not hookgrad else "hookgrad").observe_backward(
        None, lambda root: grads_at_end.append(values(model.weight.grad))
    )
    loss.backward()
    handle.remove()
    assert [kind for kind, _ in events] == ["begin", "end"]
    assert events[0][1] is None and events[1][1] is loss
    np.testing.assert_allclose(grads_at_end[0], values(model.weight.grad))


def test_a_begin_return_replaces_the_seed(lib: ModuleType, engine: Engine) -> None:
    """begin returning 3 * ones scales every gradient by 3, as a seed of 3 would."""
    model, loss = model_and_loss(lib)
    loss.backward(retain_graph=True)
    plain = values(model.weight.grad).copy()
    model.weight.grad = None
    handle = engine.observe_backward(lambda root, seed: lib.full_like(root, 3.0), None)
    loss.backward()
    handle.remove()
    np.testing.assert_allclose(values(model.weight.grad), 3 * plain, rtol=1e-6)


def test_several_roots_each_get_begin_and_end(lib: ModuleType, events: list[Any]) -> None:
    """autograd.backward([a, b], [ga, None]) notifies a then b, with their seeds."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    a, b = x * 2, (x * x).sum()
    seed = lib.ones(2)
    lib.autograd.backward([a, b], [seed, None])
    assert [kind for kind, _ in events] == ["begin", "begin", "end", "end"]
    assert events[0][1] is seed and events[1][1] is None
    assert events[2][1] is a and events[3][1] is b
    np.testing.assert_allclose(values(x.grad), [4.0, 6.0])


def test_autograd_grad_and_a_failed_walk_notify_no_end(lib: ModuleType, events: list[Any]) -> None:
    """autograd.grad notifies nobody; a backward that raises gets its begin but no end."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    lib.autograd.grad((x * x).sum(), x)
    assert events == []
    y = (x * 3).sum()
    y.register_hook(lambda g: (_ for _ in ()).throw(ValueError("boom")))
    with pytest.raises(ValueError, match="boom"):
        y.backward()
    assert [kind for kind, _ in events] == ["begin"]


def test_reentrant_checkpoint_is_one_backward() -> None:
    """A reentrant checkpoint's inner backward is part of the outer one: one begin, one end."""
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint

    seen: list[str] = []
    handle = engine_named("torch").observe_backward(
        lambda root, seed: seen.append("begin"), lambda root: seen.append("end")
    )
    try:
        layer = torch.nn.Linear(2, 2)
        x = torch.ones(1, 2, requires_grad=True)
        checkpoint(layer, x, use_reentrant=True).sum().backward()
    finally:
        handle.remove()
    assert seen == ["begin", "end"]
    assert layer.weight.grad is not None


def test_removing_the_last_observer_restores_torch_backward() -> None:
    """The wrapper around torch.autograd.backward is there only while observers are."""
    torch = pytest.importorskip("torch")
    original = torch.autograd.backward
    engine = engine_named("torch")
    first = engine.observe_backward(None, lambda root: None)
    second = engine.observe_backward(None, lambda root: None)
    assert torch.autograd.backward is not original
    first.remove()
    assert torch.autograd.backward is not original
    second.remove()
    assert torch.autograd.backward is original


# ---------------------------------------------------------------------- the step gate
OPTIMIZERS = {
    "sgd": lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    "adam": lambda lib, ps: lib.optim.Adam(ps, lr=0.1),
    "adamw": lambda lib, ps: lib.optim.AdamW(ps, lr=0.1),
}


def snapshot(model: Any, optimizer: Any) -> list[np.ndarray]:
    """Every parameter and every optimizer state value, as arrays."""
    arrays = [values(p).copy() for p in model.parameters()]
    for state in optimizer.state.values():
        arrays += [np.array(values(v) if hasattr(v, "detach") else v) for v in state.values()]
    return arrays


def assert_same(before: list[np.ndarray], after: list[np.ndarray]) -> None:
    assert len(before) == len(after)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_a_vetoed_step_changes_no_parameter_and_no_state(
    lib: ModuleType, engine: Engine, kind: str
) -> None:
    """After one real step (state exists), a vetoed step leaves parameters and state as they are."""
    model, loss = model_and_loss(lib)
    optimizer = OPTIMIZERS[kind](lib, model.parameters())
    loss.backward()
    optimizer.step()
    before = snapshot(model, optimizer)
    assert len(before) > 2
    allow = [False]
    handle = engine.gate_optimizer_steps(lambda opt: allow[0])
    try:
        assert optimizer.step() is None
        assert_same(before, snapshot(model, optimizer))
        allow[0] = True
        optimizer.step()  # the gate lets it through: the parameters move
        assert not np.array_equal(before[0], values(model.weight))
    finally:
        handle.remove()


def test_a_vetoed_step_evaluates_no_closure(lib: ModuleType, engine: Engine) -> None:
    """The closure of a vetoed step is not called, by position or by keyword."""
    model, loss = model_and_loss(lib)
    optimizer = lib.optim.SGD(model.parameters(), lr=0.1)
    loss.backward()
    calls = []

    def closure() -> Any:
        calls.append(1)
        return loss

    handle = engine.gate_optimizer_steps(lambda opt: False)
    try:
        optimizer.step(closure)
        optimizer.step(closure=closure)
    finally:
        handle.remove()
    assert calls == []


def test_a_custom_optimizer_is_gated_too(lib: ModuleType, engine: Engine) -> None:
    """An Optimizer subclass reading self.param_groups is vetoed like the built-in ones."""

    class SignSGD(lib.optim.Optimizer):  # type: ignore[misc, name-defined]
        def __init__(self, params: Any) -> None:
            super().__init__(params, {"lr": 0.5})

        def step(self, closure: Any = None) -> None:
            for group in self.param_groups:
                for p in group["params"]:
                    self.state[p]["n"] = self.state[p].get("n", 0) + 1
                    p.data.sub_(p.grad.sign() * group["lr"])

    model, loss = model_and_loss(lib)
    optimizer = SignSGD(model.parameters())
    loss.backward()
    before = snapshot(model, optimizer)
    handle = engine.gate_optimizer_steps(lambda opt: False)
    try:
        optimizer.step()
    finally:
        handle.remove()
    assert_same(before, snapshot(model, optimizer))
    assert len(optimizer.state) == 0


def test_post_hook_hears_taken_steps_only_after_the_users_post_hook(
    lib: ModuleType, engine: Engine
) -> None:
    """on_optimizer_step_post: after a user's global post hook, never for a vetoed step."""
    model, loss = model_and_loss(lib)
    optimizer = lib.optim.SGD(model.parameters(), lr=0.1)
    loss.backward()
    order: list[str] = []
    verdicts = iter([True, False, True])
    user = optimizer_module(lib).register_optimizer_step_post_hook(lambda *a: order.append("user"))
    post = engine.on_optimizer_step_post(lambda opt: order.append("runtime"))
    gate = engine.gate_optimizer_steps(lambda opt: next(verdicts))
    try:
        for _ in range(3):
            optimizer.step()
            order.append("|")
    finally:
        for handle in (gate, post, user):
            handle.remove()
    runtime_marks = [part.count("runtime") for part in " ".join(order).split("|")]
    assert runtime_marks[:3] == [1, 0, 1]
    first_step = order[: order.index("|")]
    assert first_step == ["user", "runtime"]


def test_a_gate_answering_no_bool_is_an_error(lib: ModuleType, engine: Engine) -> None:
    """A gate returning None (forgot to return) raises StepGateError naming its answer."""
    model, loss = model_and_loss(lib)
    optimizer = lib.optim.SGD(model.parameters(), lr=0.1)
    loss.backward()
    handle = engine.gate_optimizer_steps(lambda opt: None)  # type: ignore[arg-type, return-value]
    try:
        with pytest.raises(StepGateError, match="must return True or False, got None"):
            optimizer.step()
    finally:
        handle.remove()


def test_the_gate_runs_before_earlier_user_pre_hooks_on_torch() -> None:
    """The gate sits in front of every global step pre-hook, even ones registered before it."""
    torch = pytest.importorskip("torch")
    order: list[str] = []
    user = optimizer_module(torch).register_optimizer_step_pre_hook(lambda *a: order.append("user"))
    gate = engine_named("torch").gate_optimizer_steps(lambda opt: order.append("gate") or True)
    model, loss = model_and_loss(torch)
    loss.backward()
    try:
        torch.optim.SGD(model.parameters(), lr=0.1).step()
    finally:
        gate.remove()
        user.remove()
    assert order == ["gate", "user"]


def test_a_scheduler_made_before_the_gate_cannot_bypass_it() -> None:
    """An LR scheduler wraps optimizer.step at its creation: the veto still holds, no warning."""
    torch = pytest.importorskip("torch")
    model, loss = model_and_loss(torch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    loss.backward()
    before = snapshot(model, optimizer)
    handle = engine_named("torch").gate_optimizer_steps(lambda opt: False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            optimizer.step()
            scheduler.step()
    finally:
        handle.remove()
    assert_same(before, snapshot(model, optimizer))
    assert optimizer.state == {} or all(not s for s in optimizer.state.values())
