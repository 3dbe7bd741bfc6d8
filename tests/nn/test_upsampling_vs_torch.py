"""F.interpolate (nearest) and nn.Upsample against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402

FAST = settings(max_examples=40, deadline=None)

factors = st.sampled_from([0.5, 0.7, 1.0, 1.5, 2.0, 2.5, 3.0, 1 / 3])


def _x(*shape: int) -> np.ndarray:
    return np.random.default_rng(2).standard_normal(shape).astype(np.float32)


@FAST
@given(
    st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 7), st.integers(1, 7)),
    st.none() | st.tuples(st.integers(1, 9), st.integers(1, 9)) | st.integers(1, 9),
    st.tuples(factors, factors) | factors,
    st.booleans(),
    st.booleans(),
)
def test_nearest_2d_matches_torch(same_or_torch_error, shape, size, factor, by_size, recompute):
    """Nearest 2-D resizing to a size or by scale factors (recomputed or not): torch's
    values and gradients, or torch's error."""
    options = {"size": size} if by_size and size is not None else {"scale_factor": factor}
    if "scale_factor" in options:
        options["recompute_scale_factor"] = recompute
    same_or_torch_error(lambda lib, t: lib.nn.functional.interpolate(t, **options), _x(*shape))


@FAST
@given(
    st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 9)),
    st.integers(1, 12),
    factors,
)
def test_nearest_1d_matches_torch(same_function, shape, size, factor):
    """Nearest 1-D resizing to a size and by a scale factor: torch's values and gradients."""
    x = _x(*shape)
    same_function(lambda lib, t: lib.nn.functional.interpolate(t, size=size), x)
    if int(shape[-1] * factor) >= 1:
        same_function(lambda lib, t: lib.nn.functional.interpolate(t, scale_factor=factor), x)


@pytest.mark.parametrize(
    "build",
    [
        lambda lib: lib.nn.Upsample(scale_factor=2),
        lambda lib: lib.nn.Upsample(size=(3, 7)),
        lambda lib: lib.nn.Upsample(scale_factor=(0.5, 1.5), mode="nearest"),
    ],
)
def test_upsample_module_matches_torch(same_module, build):
    """nn.Upsample: torch's repr, values and input gradient."""
    assert repr(build(hookgrad)) == repr(build(torch))
    same_module(build, _x(2, 3, 4, 5))


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_inputs_no_output_copied_get_zero_gradient(value):
    """Downsampling skips inputs: their gradient is exactly 0, even for a NaN gradient."""
    grads = []
    for lib in (hookgrad, torch):
        t = lib.tensor(_x(1, 1, 4, 4), requires_grad=True)
        lib.nn.functional.interpolate(t, scale_factor=0.5).backward(lib.full((1, 1, 2, 2), value))
        grads.append(t.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    assert (grads[0] == 0).sum() == 12


def test_node_names_match_torch():
    """1-D and 2-D nearest resizing record torch's nodes."""
    for lib in (hookgrad, torch):
        f = lib.nn.functional
        names = [
            f.interpolate(lib.ones(1, 2, 3, requires_grad=True), scale_factor=2).grad_fn.name(),
            f.interpolate(lib.ones(1, 2, 3, 3, requires_grad=True), size=5).grad_fn.name(),
        ]
        assert names == ["UpsampleNearest1DBackward0", "UpsampleNearest2DBackward0"]


MISUSE = {
    "size_and_factor": lambda lib: lib.nn.functional.interpolate(
        lib.ones(1, 2, 4, 4), size=3, scale_factor=2
    ),
    "neither": lambda lib: lib.nn.functional.interpolate(lib.ones(1, 2, 4, 4)),
    "size_length": lambda lib: lib.nn.functional.interpolate(lib.ones(1, 2, 4, 5), size=(2,)),
    "factor_length": lambda lib: lib.nn.functional.interpolate(
        lib.ones(1, 2, 4, 5), scale_factor=(2, 3, 4)
    ),
    "align_corners": lambda lib: lib.nn.Upsample(size=2, align_corners=True)(lib.ones(1, 1, 4, 4)),
    "2d_input": lambda lib: lib.nn.functional.interpolate(lib.ones(4, 5), scale_factor=2),
    "recompute_with_size": lambda lib: lib.nn.functional.interpolate(
        lib.ones(1, 2, 4), size=3, recompute_scale_factor=True
    ),
}


@pytest.mark.parametrize("name", list(MISUSE))
def test_misuse_raises_torchs_error(fails_like_torch, name):
    """Conflicting or mismatched sizes and wrong ranks fail as in torch."""
    fails_like_torch(MISUSE[name])


def test_other_modes_are_not_implemented():
    """docs/nn.md: modes other than 'nearest' raise NotImplementedError naming the mode."""
    with pytest.raises(NotImplementedError, match="mode='bilinear'"):
        hookgrad.nn.Upsample(scale_factor=2, mode="bilinear")(hookgrad.ones(1, 1, 2, 2))
