"""Numerical gradient checks (float64) of the layers of issue #16: each fused backward formula
agrees with central differences, independently of torch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hookgrad
import hookgrad.nn.functional as F
from hookgrad.autograd import gradcheck


def _leaf(*shape: int, seed: int = 0, scale: float = 1.0) -> hookgrad.Tensor:
    values = np.random.default_rng(seed).standard_normal(shape) * scale
    return hookgrad.tensor(values, dtype=hookgrad.float64).requires_grad_()


def _away_from_kinks(*shape: int, kinks: tuple[float, ...]) -> hookgrad.Tensor:
    """Values at least 0.1 away from each kink (finite differences straddle none)."""
    values = np.random.default_rng(1).standard_normal(shape) * 3
    for k in kinks:
        near = np.abs(values - k) < 0.1
        values[near] = k + 0.2
    return hookgrad.tensor(values, dtype=hookgrad.float64).requires_grad_()


CASES: dict[str, tuple[Any, Any]] = {
    "batch_norm_training": (
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda: (_leaf(4, 3, 2), _leaf(3, seed=1), _leaf(3, seed=2)),
    ),
    "batch_norm_eval": (
        lambda x, w, b: F.batch_norm(
            x,
            hookgrad.zeros(3, dtype=hookgrad.float64) + 0.3,
            hookgrad.ones(3, dtype=hookgrad.float64) * 2,
            w,
            b,
        ),
        lambda: (_leaf(4, 3, 2), _leaf(3, seed=1), _leaf(3, seed=2)),
    ),
    "group_norm": (
        lambda x, w, b: F.group_norm(x, 2, w, b),
        lambda: (_leaf(2, 4, 3), _leaf(4, seed=1), _leaf(4, seed=2)),
    ),
    "avg_pool2d": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        lambda: (_leaf(2, 2, 5, 6),),
    ),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, 1, 1), lambda: (_leaf(2, 2, 4, 5),)),
    "adaptive_avg_pool2d": (
        lambda x: F.adaptive_avg_pool2d(x, (3, 4)),
        lambda: (_leaf(2, 2, 5, 6),),
    ),
    "conv1d": (
        lambda x, w, b: F.conv1d(x, w, b, 2, 1, 2, 2),
        lambda: (_leaf(2, 4, 9), _leaf(6, 2, 3, seed=1), _leaf(6, seed=2)),
    ),
    "conv_transpose2d": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, (2, 1), 1, (1, 0), 2, (1, 2)),
        lambda: (_leaf(2, 4, 3, 4), _leaf(4, 3, 3, 2, seed=1), _leaf(6, seed=2)),
    ),
    "interpolate": (
        lambda x: F.interpolate(x, scale_factor=(1.5, 0.7)),
        lambda: (_leaf(1, 2, 4, 5),),
    ),
    "silu": (F.silu, lambda: (_leaf(3, 4, scale=3),)),
    "softplus": (
        lambda x: F.softplus(x, 2.0, 3.0),
        lambda: (_away_from_kinks(3, 4, kinks=(1.5,)),),
    ),
    "mish": (F.mish, lambda: (_leaf(3, 4, scale=3),)),
    "elu": (lambda x: F.elu(x, 0.7), lambda: (_away_from_kinks(3, 4, kinks=(0,)),)),
    "hardtanh": (F.hardtanh, lambda: (_away_from_kinks(3, 4, kinks=(-1, 1)),)),
    "hardswish": (F.hardswish, lambda: (_away_from_kinks(3, 4, kinks=(-3, 3)),)),
    "prelu": (
        F.prelu,
        lambda: (_away_from_kinks(2, 3, 4, kinks=(0,)), _leaf(3, seed=3)),
    ),
    "softmin": (lambda x: F.softmin(x, 1), lambda: (_leaf(3, 4),)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_match_finite_differences(name):
    """Input, weight and bias gradients agree with central differences in float64."""
    fn, inputs = CASES[name]
    assert gradcheck(fn, inputs())
