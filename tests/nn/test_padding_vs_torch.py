"""F.pad's reflect/replicate/circular modes, the padding modules and Conv1d/Conv2d's
padding_mode against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402

FAST = settings(max_examples=40, deadline=None)


def _x(*shape: int) -> np.ndarray:
    return np.random.default_rng(3).standard_normal(shape).astype(np.float32)


@FAST
@given(
    st.sampled_from(["reflect", "replicate", "circular"]),
    st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 5), st.integers(1, 5)),
    st.lists(st.integers(-1, 4), min_size=2, max_size=4).filter(lambda p: len(p) % 2 == 0),
)
def test_pad_modes_match_torch(same_or_torch_error, mode, shape, pads):
    """F.pad in each mode over 1 or 2 dims, negative pads included: torch's values and
    gradients, or torch's error (pads past what reflection or one wrap can fill)."""
    sizes = shape[::-1][: len(pads) // 2]
    if any(n + pads[2 * i] + pads[2 * i + 1] < 1 for i, n in enumerate(sizes)):
        return  # an empty or negative output: torch fails with an overflow message
    if mode == "circular":  # torch reads past a cropped dim here (undefined): not compared
        kept = [n - max(-pads[2 * i], 0) - max(-pads[2 * i + 1], 0) for i, n in enumerate(sizes)]
        if any(max(pads[2 * i], pads[2 * i + 1]) > k for i, k in enumerate(kept)):
            return
    same_or_torch_error(lambda lib, t: lib.nn.functional.pad(t, pads, mode=mode), _x(*shape))


MODULES = {
    "ReflectionPad1d": lambda lib: lib.nn.ReflectionPad1d((2, 1)),
    "ReflectionPad2d": lambda lib: lib.nn.ReflectionPad2d(2),
    "ReplicationPad1d": lambda lib: lib.nn.ReplicationPad1d(3),
    "ReplicationPad2d": lambda lib: lib.nn.ReplicationPad2d((1, 0, 2, 3)),
    "CircularPad1d": lambda lib: lib.nn.CircularPad1d(2),
    "CircularPad2d": lambda lib: lib.nn.CircularPad2d((1, 2, 0, 1)),
    "ZeroPad1d": lambda lib: lib.nn.ZeroPad1d(1),
    "ZeroPad2d": lambda lib: lib.nn.ZeroPad2d((1, 2, 3, 0)),
    "ConstantPad1d": lambda lib: lib.nn.ConstantPad1d(2, 1.5),
    "ConstantPad2d": lambda lib: lib.nn.ConstantPad2d((0, 1, 1, 0), -2.0),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_padding_modules_match_torch(same_module, name):
    """Each padding module: torch's repr, values and input gradient."""
    build = MODULES[name]
    assert repr(build(hookgrad)) == repr(build(torch))
    same_module(build, _x(2, 3, 5) if "1d" in name else _x(2, 3, 4, 5))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    "build",
    [
        lambda lib, mode: lib.nn.Conv2d(3, 4, 3, padding=1, padding_mode=mode),
        lambda lib, mode: lib.nn.Conv2d(3, 4, (4, 3), padding="same", padding_mode=mode),
        lambda lib, mode: lib.nn.Conv2d(3, 4, 3, 2, (2, 1), padding_mode=mode),
        lambda lib, mode: lib.nn.Conv1d(3, 4, 3, padding=2, padding_mode=mode),
    ],
)
def test_conv_padding_modes_match_torch(same_module, build, mode):
    """Conv1d/Conv2d with padding_mode reflect, replicate or circular: torch's repr,
    values and gradients (the input is padded first, as torch does)."""
    assert repr(build(hookgrad, mode)) == repr(build(torch, mode))
    conv1d = build(hookgrad, mode).weight.ndim == 3
    same_module(lambda lib: build(lib, mode), _x(2, 3, 7) if conv1d else _x(2, 3, 6, 5))


def test_node_names_match_torch():
    """Reflection and replication padding record torch's nodes."""
    for lib in (hookgrad, torch):
        f = lib.nn.functional
        x3, x4 = lib.ones(1, 2, 4, requires_grad=True), lib.ones(1, 2, 4, 4, requires_grad=True)
        names = [
            f.pad(x3, (1, 1), mode="reflect").grad_fn.name(),
            f.pad(x4, (1, 1, 1, 1), mode="reflect").grad_fn.name(),
            f.pad(x3, (1, 1), mode="replicate").grad_fn.name(),
            f.pad(x4, (1, 1, 1, 1), mode="replicate").grad_fn.name(),
        ]
        assert names == [
            "ReflectionPad1DBackward0",
            "ReflectionPad2DBackward0",
            "ReplicationPad1DBackward0",
            "ReplicationPad2DBackward0",
        ]


MISUSE = {
    "reflect_too_wide": lambda lib: lib.nn.functional.pad(
        lib.ones(1, 2, 4, 5), (5, 0, 0, 0), mode="reflect"
    ),
    "reflect_too_tall": lambda lib: lib.nn.ReflectionPad2d((0, 0, 4, 0))(lib.ones(1, 2, 4, 5)),
    "circular_twice": lambda lib: lib.nn.functional.pad(
        lib.ones(1, 2, 4, 5), (6, 0, 0, 0), mode="circular"
    ),
    "size_for_rank": lambda lib: lib.nn.functional.pad(lib.ones(1, 2, 4, 5), (1, 1), "reflect"),
    "1d_input": lambda lib: lib.nn.functional.pad(lib.ones(5), (1, 1), mode="reflect"),
    "unknown_mode": lambda lib: lib.nn.functional.pad(lib.ones(1, 2, 5), (1, 1), mode="foo"),
    "value_with_mode": lambda lib: lib.nn.functional.pad(
        lib.ones(1, 2, 5), (1, 1), mode="replicate", value=2.0
    ),
}


@pytest.mark.parametrize("name", list(MISUSE))
def test_misuse_raises_torchs_error(fails_like_torch, name):
    """Pads that reflection or one wrap cannot fill, wrong pad lengths, unknown modes and a
    value with a non-constant mode fail as in torch."""
    fails_like_torch(MISUSE[name])
