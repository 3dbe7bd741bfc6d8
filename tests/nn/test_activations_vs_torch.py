"""The activations of issue #16 (SiLU, Softplus, Softmin, Mish, Hardtanh, ReLU6, ELU, SELU,
CELU, Hardswish, Hardsigmoid, LogSigmoid, Softsign, Tanhshrink, PReLU) vs torch 2.13."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402

FAST = settings(max_examples=25, deadline=None)

FUNCTIONS: dict[str, Any] = {
    "silu": lambda lib, x: lib.nn.functional.silu(x),
    "softplus": lambda lib, x: lib.nn.functional.softplus(x),
    "softplus_beta": lambda lib, x: lib.nn.functional.softplus(x, beta=2.0, threshold=3.0),
    "mish": lambda lib, x: lib.nn.functional.mish(x),
    "hardtanh": lambda lib, x: lib.nn.functional.hardtanh(x),
    "hardtanh_range": lambda lib, x: lib.nn.functional.hardtanh(x, -2.5, 0.5),
    "relu6": lambda lib, x: lib.nn.functional.relu6(x),
    "elu": lambda lib, x: lib.nn.functional.elu(x),
    "elu_alpha": lambda lib, x: lib.nn.functional.elu(x, alpha=0.3),
    "hardswish": lambda lib, x: lib.nn.functional.hardswish(x),
    "softmin": lambda lib, x: lib.nn.functional.softmin(x, dim=-1),
    "prelu": lambda lib, x: lib.nn.functional.prelu(x, lib.tensor([0.2])),
    "selu": lambda lib, x: lib.nn.functional.selu(x),
    "celu": lambda lib, x: lib.nn.functional.celu(x, alpha=0.5),
    "hardsigmoid": lambda lib, x: lib.nn.functional.hardsigmoid(x),
    "logsigmoid": lambda lib, x: lib.nn.functional.logsigmoid(x),
    "softsign": lambda lib, x: lib.nn.functional.softsign(x),
    "tanhshrink": lambda lib, x: lib.nn.functional.tanhshrink(x),
}

# values kept off the kinks (where torch's one-sided choice and a float32 rounding could
# disagree): -3, 0, 3, 6 and the hardtanh bounds
ELEMENTS = st.floats(-9, 9, width=32).filter(
    lambda v: all(abs(v - k) > 1e-3 for k in (-3, -2.5, -1, 0, 0.5, 1, 1.5, 3, 6))
)


@FAST
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3), elements=ELEMENTS))
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_function_matches_torch(same_function, name, x):
    """Each activation: torch's values and input gradient over random shapes and values."""
    same_function(FUNCTIONS[name], x, atol=2e-5)


INPLACE: dict[str, Any] = {
    "silu": lambda lib, x: lib.nn.functional.silu(x, inplace=True),
    "mish": lambda lib, x: lib.nn.functional.mish(x, inplace=True),
    "hardtanh": lambda lib, x: lib.nn.functional.hardtanh(x, -0.5, 0.7, inplace=True),
    "relu6": lambda lib, x: lib.nn.functional.relu6(x, inplace=True),
    "elu": lambda lib, x: lib.nn.functional.elu(x, 0.7, inplace=True),
    "hardswish": lambda lib, x: lib.nn.functional.hardswish(x, inplace=True),
    "selu": lambda lib, x: lib.nn.functional.selu(x, inplace=True),
    "celu": lambda lib, x: lib.nn.functional.celu(x, 0.5, inplace=True),
    "hardsigmoid": lambda lib, x: lib.nn.functional.hardsigmoid(x, inplace=True),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_forms_match_torch(name):
    """In-place forms on an intermediate overwrite it, record torch's node and give torch's
    gradient."""
    x = np.linspace(-8, 8, 24, dtype=np.float32).reshape(4, 6) + 0.01
    results = []
    for lib in (hookgrad, torch):
        leaf = lib.tensor(x, requires_grad=True)
        y = leaf * 1.5
        out = INPLACE[name](lib, y)
        assert out is y
        (out * lib.arange(24.0).reshape(4, 6)).sum().backward()
        results.append((y.detach().numpy(), leaf.grad.numpy(), out.grad_fn.name()))
    np.testing.assert_allclose(results[0][0], results[1][0], 1e-5, 1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], 1e-5, 1e-5)
    assert results[0][2] == results[1][2]


MODULES: dict[str, Any] = {
    "SiLU": lambda lib: lib.nn.SiLU(),
    "SiLU_inplace": lambda lib: lib.nn.SiLU(inplace=True),
    "Softplus": lambda lib: lib.nn.Softplus(),
    "Softplus_options": lambda lib: lib.nn.Softplus(2, 10),
    "Softmin": lambda lib: lib.nn.Softmin(1),
    "Mish": lambda lib: lib.nn.Mish(),
    "Hardtanh": lambda lib: lib.nn.Hardtanh(),
    "Hardtanh_options": lambda lib: lib.nn.Hardtanh(-2, 2, True),
    "ReLU6": lambda lib: lib.nn.ReLU6(),
    "ReLU6_inplace": lambda lib: lib.nn.ReLU6(True),
    "ELU": lambda lib: lib.nn.ELU(),
    "ELU_options": lambda lib: lib.nn.ELU(0.5, True),
    "Hardswish": lambda lib: lib.nn.Hardswish(),
    "PReLU": lambda lib: lib.nn.PReLU(),
    "PReLU_channels": lambda lib: lib.nn.PReLU(3, 0.1),
    "SELU": lambda lib: lib.nn.SELU(),
    "SELU_inplace": lambda lib: lib.nn.SELU(True),
    "CELU": lambda lib: lib.nn.CELU(),
    "CELU_options": lambda lib: lib.nn.CELU(0.5, True),
    "Hardsigmoid": lambda lib: lib.nn.Hardsigmoid(),
    "LogSigmoid": lambda lib: lib.nn.LogSigmoid(),
    "Softsign": lambda lib: lib.nn.Softsign(),
    "Tanhshrink": lambda lib: lib.nn.Tanhshrink(),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_modules_match_torch(same_module, name):
    """Each module: torch's repr and parameters; after a 1x1 convolution (so in-place ones
    act on an intermediate, as in a network) torch's outputs and gradients."""
    build = MODULES[name]
    h, t = build(hookgrad), build(torch)
    assert repr(h) == repr(t)
    assert [(k, v.tolist()) for k, v in h.state_dict().items()] == [
        (k, v.tolist()) for k, v in t.state_dict().items()
    ]

    x = (np.random.default_rng(0).standard_normal((2, 3, 4, 5)) * 4).astype(np.float32)
    same_module(lambda lib: lib.nn.Sequential(lib.nn.Conv2d(3, 3, 1), build(lib)), x)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize(
    "name", ["hardtanh", "relu6", "elu", "hardswish", "hardsigmoid", "softplus_beta"]
)
def test_zero_gradient_regions_stay_zero_for_nan_gradients(name, value):
    """Where torch's derivative is 0 (outside hardtanh/relu6's range, below hardswish's -3),
    a NaN or inf incoming gradient still gives 0; elsewhere it passes as in torch."""
    x = np.array([-9.0, -4.0, -0.5, 0.5, 4.0, 9.0], dtype=np.float32)
    grads = []
    for lib in (hookgrad, torch):
        t = lib.tensor(x, requires_grad=True)
        FUNCTIONS[name](lib, t).backward(lib.full((6,), value))
        grads.append(t.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_prelu_per_channel_matches_torch(same_function):
    """F.prelu with one slope per channel on 2-D to 4-D input: torch's input and slope
    gradients."""
    for shape in [(4, 3), (2, 3, 5), (2, 3, 2, 2)]:
        same_function(
            lambda lib, x, w: lib.nn.functional.prelu(x, w),
            np.random.default_rng(1).standard_normal(shape).astype(np.float32),
            np.array([0.1, -0.2, 0.3], np.float32),
        )


def test_softmin_without_dim_warns_as_torch():
    """Softmin without dim warns torch's deprecation text and picks torch's dim."""
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    outs = []
    for lib in (hookgrad, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outs.append(lib.nn.Softmin()(lib.tensor(x)).numpy())
        assert [str(w.message) for w in caught] == [
            "Implicit dimension choice for softmin has been deprecated. Change the call to "
            "include dim=X as an argument."
        ]
    np.testing.assert_allclose(outs[0], outs[1], 1e-6)


def test_hardtanh_deprecated_keywords_warn_as_torch():
    """Hardtanh(min_value=...) warns torch's FutureWarning and takes the value."""
    reprs = []
    for lib in (hookgrad, torch):
        with pytest.warns(FutureWarning, match="min_value` is deprecated"):
            reprs.append(repr(lib.nn.Hardtanh(min_value=-2)))
    assert reprs[0] == reprs[1]


def test_node_names_match_torch():
    """Each activation records torch's node (relu6 as HardtanhBackward0, softmin a softmax)."""
    for lib in (hookgrad, torch):
        x = lib.ones(2, 3, requires_grad=True)
        names = [FUNCTIONS[n](lib, x).grad_fn.name() for n in FUNCTIONS]
        assert names == [
            "SiluBackward0",
            "SoftplusBackward0",
            "SoftplusBackward0",
            "MishBackward0",
            "HardtanhBackward0",
            "HardtanhBackward0",
            "HardtanhBackward0",
            "EluBackward0",
            "EluBackward0",
            "HardswishBackward0",
            "SoftmaxBackward0",
            "PreluKernelBackward0",
            "EluBackward0",
            "CeluBackward0",
            "HardsigmoidBackward0",
            "LogSigmoidBackward0",
            "DivBackward0",
            "SubBackward0",
        ], lib.__name__


MISUSE = {
    "hardtanh_bounds_module": lambda lib: lib.nn.Hardtanh(2, 1),
    "hardtanh_bounds_function": lambda lib: lib.nn.functional.hardtanh(lib.ones(2), 2, 1),
    "prelu_channels": lambda lib: lib.nn.functional.prelu(lib.ones(2, 4), lib.ones(3)),
    "prelu_2d_weight": lambda lib: lib.nn.functional.prelu(lib.ones(2, 4), lib.ones(1, 1)),
    "prelu_1d_input": lambda lib: lib.nn.PReLU(4)(lib.ones(4)),
    "silu_long": lambda lib: lib.nn.functional.silu(lib.ones(2, dtype=lib.int64)),
    "elu_long": lambda lib: lib.nn.ELU()(lib.ones(2, dtype=lib.int64)),
    "softplus_long": lambda lib: lib.nn.Softplus()(lib.ones(2, dtype=lib.int64)),
    "celu_alpha_zero": lambda lib: lib.nn.functional.celu(lib.ones(2), alpha=0.0),
}


@pytest.mark.parametrize("name", list(MISUSE))
def test_misuse_raises_torchs_error(fails_like_torch, name):
    """Bad bounds, slope counts and integer input fail as in torch: same class, same text."""
    fails_like_torch(MISUSE[name])
