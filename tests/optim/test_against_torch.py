"""Differential tests: hookgrad's optimizers against torch 2.13's on the same gradient sequence.

Both libraries start from the same parameters and receive the same ``.grad`` arrays each step
(with some gradients None, so those parameters are skipped); afterwards parameters, optimizer
state and param_groups must agree at float32 tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hookgrad
import hookgrad.optim

from .conftest import assert_same_run as _assert_same_run

pytest.importorskip("torch")

SGD_CONFIGS = {
    "plain": {"lr": 0.1},
    "default_lr": {},
    "momentum": {"lr": 0.05, "momentum": 0.9},
    "dampening": {"lr": 0.05, "momentum": 0.8, "dampening": 0.3},
    "nesterov": {"lr": 0.05, "momentum": 0.9, "nesterov": True},
    "weight_decay": {"lr": 0.1, "weight_decay": 0.05},
    "momentum_weight_decay": {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01},
    "maximize": {"lr": 0.1, "maximize": True},
    "maximize_all": {
        "lr": 0.05,
        "momentum": 0.7,
        "weight_decay": 0.1,
        "nesterov": True,
        "maximize": True,
    },
}


@pytest.mark.parametrize("config", SGD_CONFIGS.values(), ids=SGD_CONFIGS.keys())
def test_sgd_matches_torch(config: dict[str, Any]) -> None:
    """SGD gives torch's parameters and momentum buffers after 7 steps with skipped grads."""
    _assert_same_run(lambda lib, params: lib.optim.SGD(params, **config))


ADAM_CONFIGS = {
    "default": {},
    "lr": {"lr": 0.05},
    "betas": {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6},
    "small_beta1": {"lr": 0.02, "betas": (0.3, 0.9)},
    "amsgrad": {"lr": 0.05, "amsgrad": True},
    "weight_decay": {"lr": 0.05, "weight_decay": 0.1},
    "amsgrad_weight_decay_maximize": {
        "lr": 0.05,
        "weight_decay": 0.1,
        "amsgrad": True,
        "maximize": True,
    },
}


@pytest.mark.parametrize("config", ADAM_CONFIGS.values(), ids=ADAM_CONFIGS.keys())
def test_adam_matches_torch(config: dict[str, Any]) -> None:
    """Adam gives torch's parameters, step counts and moments after 7 steps with skipped grads."""
    _assert_same_run(lambda lib, params: lib.optim.Adam(params, **config))


ADAMW_CONFIGS = {
    "default": {},
    "weight_decay": {"lr": 0.05, "weight_decay": 0.2},
    "amsgrad_maximize": {"lr": 0.05, "amsgrad": True, "maximize": True},
    "no_decay": {"lr": 0.05, "weight_decay": 0.0},
}


@pytest.mark.parametrize("config", ADAMW_CONFIGS.values(), ids=ADAMW_CONFIGS.keys())
def test_adamw_matches_torch(config: dict[str, Any]) -> None:
    """AdamW (decoupled decay, default 1e-2) gives torch's parameters and state."""
    _assert_same_run(lambda lib, params: lib.optim.AdamW(params, **config))


def test_param_groups_with_own_lr_match_torch() -> None:
    """Groups override lr and momentum per group; unset options come from the defaults."""
    _assert_same_run(
        lambda lib, params: lib.optim.SGD(
            [{"params": params[:1], "lr": 0.5}, {"params": params[1:], "momentum": 0.5}],
            lr=0.1,
            momentum=0.9,
        )
    )


def test_adam_param_groups_match_torch() -> None:
    """Adam groups with their own lr, betas and amsgrad flag match torch's."""
    _assert_same_run(
        lambda lib, params: lib.optim.Adam(
            [
                {"params": params[:2], "lr": 0.1, "amsgrad": True},
                {"params": params[2:], "betas": (0.5, 0.9)},
            ],
            lr=0.01,
        )
    )


def test_sgd_one_step_exact_value() -> None:
    """One plain SGD step: p = p - lr * g, with lr=0.5, is exact on these numbers."""
    p = hookgrad.tensor([1.0, -2.0, 3.0], requires_grad=True)
    opt = hookgrad.optim.SGD([p], lr=0.5)
    p.grad = hookgrad.tensor([2.0, 2.0, -4.0])
    opt.step()
    assert p.tolist() == [0.0, -3.0, 5.0]


def test_adam_first_step_moves_by_lr() -> None:
    """Adam's first step moves each coordinate by lr * sign(g) (bias correction cancels)."""
    p = hookgrad.tensor([1.0, 1.0], requires_grad=True)
    opt = hookgrad.optim.Adam([p], lr=0.25)
    p.grad = hookgrad.tensor([3.0, -0.5])
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [0.75, 1.25], rtol=1e-6)
    assert opt.state[p]["step"].item() == 1.0
