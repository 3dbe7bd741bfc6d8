"""``zero_units``: both engines flag the units (first-dim rows) whose entries are all exactly 0."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import hookgrad
from hookgrad.engines import engine_named

from .conftest import both_engines, gradient_batches

torch = pytest.importorskip("torch")


def _zero_rows(array: np.ndarray) -> np.ndarray:
    """The reference: a Python loop over the units, each compared entry by entry with 0."""
    units = array.reshape(1, -1) if array.ndim == 0 else list(array)
    return np.array([all(v == 0 for v in np.ravel(unit)) for unit in units], dtype=bool)


@settings(max_examples=60, deadline=None)
@given(gradient_batches(1e-45, -0.0, 1e38))
def test_zero_units_flags_the_all_zero_rows_on_both_engines(batch: list) -> None:
    """One flag per index of the first dim (one for a 0-dim tensor), True only where every
    entry is 0 (a NaN, a subnormal or -0.0 beside +0.0 as numpy compares them); None kept."""
    want = [None if a is None else _zero_rows(a) for a in batch]
    for engine, make in both_engines(torch):
        got = engine.zero_units([None if a is None else make(a) for a in batch])
        assert len(got) == len(want)
        for mine, reference in zip(got, want, strict=True):
            if reference is None:
                assert mine is None
            else:
                assert mine is not None and mine.dtype == np.bool_
                np.testing.assert_array_equal(mine, reference)


def test_zero_units_of_a_linear_and_a_conv_weight_gradient() -> None:
    """A Linear weight's units are its output rows, a Conv's its output channels."""
    linear = np.ones((4, 3), np.float32)
    linear[[1, 3]] = 0.0
    conv = np.ones((3, 2, 2, 2), np.float32)
    conv[0] = 0.0
    conv[2, 1, 1, 1] = 0.0  # one zero entry does not make its channel zero
    for name in ("hookgrad", "torch"):
        lib = hookgrad if name == "hookgrad" else torch
        got = engine_named(name).zero_units([lib.tensor(linear), lib.tensor(conv)])
        assert [g.tolist() for g in got] == [[False, True, False, True], [True, False, False]]


def test_zero_units_of_non_contiguous_and_empty_tensors() -> None:
    """A transposed view is read as it is indexed; (0, k) has no unit, (k, 0) k empty ones."""
    base = np.zeros((3, 4), np.float32)
    base[:, 2] = 1.0  # transposed, row 2 is all ones and the others all zeros
    views = [
        (hookgrad.tensor(base).t(), torch.from_numpy(base).t()),
        (hookgrad.zeros(0, 3), torch.zeros(0, 3)),
        (hookgrad.ones(2, 0), torch.ones(2, 0)),
    ]
    want = [[True, True, False, True], [], [True, True]]
    for k, name in enumerate(("hookgrad", "torch")):
        got = engine_named(name).zero_units([view[k] for view in views])
        assert [flags.tolist() for flags in got] == want, name


def test_zero_units_of_bool_and_integer_tensors() -> None:
    """Zero is False for bool and 0 for integers; the least int64 (whose abs is negative)
    is not zero."""
    bools = [[True, False], [False, False]]
    ints = [[0, -(2**63)], [0, 0]]
    for name in ("hookgrad", "torch"):
        lib = hookgrad if name == "hookgrad" else torch
        got = engine_named(name).zero_units([lib.tensor(bools), lib.tensor(ints)])
        assert [flags.tolist() for flags in got] == [[False, True], [False, True]], name
