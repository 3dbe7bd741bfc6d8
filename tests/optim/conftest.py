"""Helpers for the optimizer tests: drive an optimizer in hookgrad and torch on the same gradients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import hookgrad
import hookgrad.optim

SHAPES = [(4, 3), (5,), (2, 3, 2)]
RTOL, ATOL = 2e-5, 1e-6

MakeOpt = Callable[[Any, list[Any]], Any]


def run_steps(lib: Any, make_opt: MakeOpt, steps: int = 7, seed: int = 0) -> tuple[list[Any], Any]:
    """Drive ``make_opt(lib, params)`` for ``steps`` steps on a seeded gradient sequence."""
    rng = np.random.default_rng(seed)
    params = [
        lib.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in SHAPES
    ]
    opt = make_opt(lib, params)
    for step in range(steps):
        for i, p in enumerate(params):
            if (step + i) % 3 == 2:
                p.grad = None
            else:
                p.grad = lib.tensor(rng.standard_normal(SHAPES[i]).astype(np.float32))
        opt.step()
    return params, opt


def assert_same_run(make_opt: MakeOpt, steps: int = 7, seed: int = 0) -> None:
    """Run both libraries and compare parameters, state tensors and param groups."""
    torch = pytest.importorskip("torch")
    h_params, h_opt = run_steps(hookgrad, make_opt, steps, seed)
    t_params, t_opt = run_steps(torch, make_opt, steps, seed)
    for h, t in zip(h_params, t_params):
        np.testing.assert_allclose(h.detach().numpy(), t.detach().numpy(), rtol=RTOL, atol=ATOL)
    h_sd, t_sd = h_opt.state_dict(), t_opt.state_dict()
    assert h_sd["param_groups"] == t_sd["param_groups"]
    assert h_sd["state"].keys() == t_sd["state"].keys()
    for index, t_state in t_sd["state"].items():
        h_state = h_sd["state"][index]
        assert list(h_state) == list(t_state)
        for key, t_value in t_state.items():
            h_value = h_state[key]
            assert isinstance(h_value, hookgrad.Tensor)
            assert h_value.dtype == np.float32
            np.testing.assert_allclose(h_value.numpy(), t_value.numpy(), rtol=RTOL, atol=ATOL)


@pytest.fixture
def gates() -> Iterator[Callable[..., Any]]:
    """``gates(fn)`` registers a hookgrad step gate for this test only."""
    handles: list[Any] = []

    def register(gate: Callable[..., Any]) -> Any:
        handle = hookgrad.optim.optimizer.register_optimizer_step_gate(gate)
        handles.append(handle)
        return handle

    yield register
    for handle in handles:
        handle.remove()
    assert not hookgrad.optim._hooks._optimizer_step_gates
