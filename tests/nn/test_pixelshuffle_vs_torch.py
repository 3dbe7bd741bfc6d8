"""F.pixel_shuffle/pixel_unshuffle and nn.PixelShuffle/PixelUnshuffle against torch 2.13
(pytorch/examples' super-resolution network ends in a PixelShuffle)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402

FAST = settings(max_examples=40, deadline=None)
shapes = st.lists(st.integers(1, 3), max_size=2).flatmap(
    lambda batch: st.tuples(
        st.just(tuple(batch)), st.integers(1, 9), st.integers(1, 6), st.integers(1, 6)
    )
)


def _x(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(3).standard_normal(shape).astype(np.float32)


@FAST
@given(shapes, st.integers(0, 3))
def test_pixel_shuffle_matches_torch(same_or_torch_error, shape, factor):
    """Any batch dims, channels and factor: torch's values and gradients, or torch's error
    (too few dims, channels not divisible by factor**2, a factor below 1)."""
    batch, c, h, w = shape
    same_or_torch_error(
        lambda lib, t: lib.nn.functional.pixel_shuffle(t, factor), _x((*batch, c, h, w))
    )


@FAST
@given(shapes, st.integers(0, 3))
def test_pixel_unshuffle_matches_torch(same_or_torch_error, shape, factor):
    """Any batch dims and factor: torch's values and gradients, or torch's error (height or
    width not divisible by the factor, too few dims, a factor below 1)."""
    batch, c, h, w = shape
    same_or_torch_error(
        lambda lib, t: lib.nn.functional.pixel_unshuffle(t, factor), _x((*batch, c, h, w))
    )


def test_modules_print_and_invert_as_torch():
    """The modules print as torch's and PixelUnshuffle undoes PixelShuffle; a 2-dim input
    is torch's RuntimeError."""
    x = _x((2, 8, 3, 4))
    for lib in (hookgrad, torch):
        shuffle, unshuffle = lib.nn.PixelShuffle(2), lib.nn.PixelUnshuffle(2)
        assert (repr(shuffle), repr(unshuffle)) == (
            "PixelShuffle(upscale_factor=2)",
            "PixelUnshuffle(downscale_factor=2)",
        )
        t = lib.tensor(x)
        assert tuple(shuffle(t).shape) == (2, 2, 6, 8)
        np.testing.assert_array_equal(unshuffle(shuffle(t)).numpy(), x)
        with pytest.raises(RuntimeError, match="at least 3 dimensions"):
            shuffle(lib.ones(4, 4))
