"""``all_finite``: the dot-product screen and the entry-wise test agree on every array."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hookgrad.engines.numpy._kernels import all_finite, nonfinite_counts


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_one_nonfinite_entry_is_found(dtype, bad):
    array = np.ones((8, 16), dtype=dtype)
    array[5, 7] = bad
    assert not all_finite(array)
    assert not all_finite(array.T)  # strided: the entry-wise test


def test_huge_finite_values_whose_squares_overflow_are_finite():
    """1e30 squared overflows float32 (and 1e200 float64): the sum is Inf, the entries are not."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="ignore"):
            assert all_finite(np.full(4, 1e30, dtype=np.float32))
            assert all_finite(np.full(4, 1e200, dtype=np.float64))
            assert all_finite(np.full(4, 60000.0, dtype=np.float16))


def test_integer_bool_and_empty_arrays_are_finite():
    assert all_finite(np.array([1, 2, 3]))
    assert all_finite(np.array([True, False]))
    assert all_finite(np.zeros((0, 3), dtype=np.float32))


def test_complex_arrays_use_the_entry_wise_test():
    array = np.ones(3, dtype=np.complex64)
    assert all_finite(array)
    array[1] = complex(0.0, np.inf)
    assert not all_finite(array)


@given(
    hnp.arrays(
        dtype=st.sampled_from([np.float32, np.float64]),
        shape=hnp.array_shapes(max_dims=3, max_side=6),
        elements={"allow_nan": True, "allow_infinity": True},
    )
)
def test_agrees_with_numpy_isfinite(array):
    with np.errstate(over="ignore"):
        assert all_finite(array) == bool(np.isfinite(array).all())


def test_nonfinite_counts_split_nan_and_inf():
    array = np.array([1.0, np.nan, np.inf, -np.inf, np.nan, 0.0], dtype=np.float32)
    assert nonfinite_counts(array) == (2, 2)
    assert nonfinite_counts(np.arange(4)) == (0, 0)
