"""Sampling ops (normal_, uniform_, bernoulli_, exponential_, bernoulli, multinomial, normal)
and histograms (histc, histogram).

hookgrad draws from numpy's PCG64, not torch's Mersenne Twister, so a seed gives hookgrad's
own stream (docs/torch.md says so): these tests pin reproducibility per seed, the
distributions, dtypes and shapes, and torch's errors. Histograms are deterministic and are
compared with torch value for value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad

torch = pytest.importorskip("torch")

DRAWS: dict[str, Callable[[Any], Any]] = {
    "normal_": lambda L: L.empty(3, 4).normal_(1.0, 2.0),
    "uniform_": lambda L: L.empty(5).uniform_(-1, 3),
    "bernoulli_": lambda L: L.empty(6).bernoulli_(0.3),
    "bernoulli_tensor_p": lambda L: L.empty(2, 3).bernoulli_(L.full((2, 3), 0.5)),
    "exponential_": lambda L: L.empty(4).exponential_(2.0),
    "bernoulli": lambda L: L.bernoulli(L.full((3, 3), 0.5)),
    "multinomial": lambda L: L.multinomial(L.tensor([0.1, 0.2, 0.7]), 2),
    "multinomial_replacement_rows": lambda L: L.tensor([[1.0, 3.0], [2.0, 0.0]]).multinomial(
        5, replacement=True
    ),
    "normal_tensors": lambda L: L.normal(L.zeros(2, 3), L.ones(3)),
    "normal_tensor_mean": lambda L: L.normal(L.arange(4.0), 0.5),
    "normal_numbers_size": lambda L: L.normal(2.0, 3.0, size=(2, 2)),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_draws_repeat_per_seed_with_torch_dtype_and_shape(name: str) -> None:
    """The same seed gives the same draws (default generator and an explicit one is the same
    stream); dtype and shape are torch's."""
    hookgrad.manual_seed(123)
    first = DRAWS[name](hookgrad).numpy().copy()
    hookgrad.manual_seed(123)
    again = DRAWS[name](hookgrad).numpy()
    np.testing.assert_array_equal(first, again)
    hookgrad.manual_seed(124)
    assert first.size <= 2 or not np.array_equal(first, DRAWS[name](hookgrad).numpy())
    theirs = DRAWS[name](torch)
    assert first.shape == tuple(theirs.shape)
    assert str(first.dtype) == str(theirs.dtype).removeprefix("torch.")


def test_explicit_generator_is_independent_of_the_global_seed() -> None:
    """``generator=`` draws from that generator only: reseeding it repeats its draws."""
    gen = hookgrad.Generator().manual_seed(7)
    a = hookgrad.empty(5).normal_(generator=gen).numpy().copy()
    hookgrad.manual_seed(0)
    gen.manual_seed(7)
    np.testing.assert_array_equal(a, hookgrad.empty(5).normal_(generator=gen).numpy())


def test_distributions_have_the_asked_moments() -> None:
    """normal_, uniform_, bernoulli_ and exponential_ draw from the asked distribution."""
    hookgrad.manual_seed(0)
    n = 40_000
    normal = hookgrad.empty(n).normal_(1.5, 0.5).numpy()
    assert abs(normal.mean() - 1.5) < 0.01 and abs(normal.std() - 0.5) < 0.01
    uniform = hookgrad.empty(n).uniform_(-2, 4).numpy()
    assert uniform.min() >= -2 and uniform.max() < 4 and abs(uniform.mean() - 1) < 0.05
    coins = hookgrad.empty(n).bernoulli_(0.25).numpy()
    assert set(np.unique(coins)) == {0.0, 1.0} and abs(coins.mean() - 0.25) < 0.01
    waits = hookgrad.empty(n).exponential_(4.0).numpy()
    assert waits.min() >= 0 and abs(waits.mean() - 0.25) < 0.01


def test_multinomial_draws_as_torch_defines() -> None:
    """Without replacement: distinct indices, never a zero-weight one; with replacement: the
    frequencies follow the (unnormalised) weights."""
    hookgrad.manual_seed(1)
    weights = hookgrad.tensor([[0.0, 1.0, 2.0, 1.0]] * 200)
    picks = hookgrad.multinomial(weights, 3).numpy()
    assert all(sorted(row) == [1, 2, 3] for row in picks)
    many = hookgrad.multinomial(hookgrad.tensor([1.0, 3.0]), 20_000, replacement=True).numpy()
    assert abs(many.mean() - 0.75) < 0.02


ERRORS: dict[str, Callable[[Any], Any]] = {
    "multinomial_too_many": lambda L: L.multinomial(L.tensor([0.5, 0.5]), 3),
    "multinomial_zero_sum": lambda L: L.multinomial(L.tensor([0.0, 0.0]), 1),
    "multinomial_negative": lambda L: L.multinomial(L.tensor([-1.0, 2.0]), 1),
    "multinomial_3d": lambda L: L.multinomial(L.ones(2, 2, 2), 1),
    "normal_negative_std": lambda L: L.empty(3).normal_(0, -1),
    "inplace_on_leaf": lambda L: L.zeros(3, requires_grad=True).uniform_(),
    "bernoulli_bad_p": lambda L: L.empty(3).bernoulli_(1.5),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_sampling_errors_match_torch(name: str) -> None:
    """Invalid weights, sizes, std and in-place draws on a grad leaf raise torch's error type."""
    with pytest.raises(Exception) as theirs:
        ERRORS[name](torch)
    with pytest.raises(type(theirs.value)):
        ERRORS[name](hookgrad)


def test_initialisation_under_no_grad_is_allowed() -> None:
    """Under no_grad a leaf that requires grad can be filled in place (weight init), as in torch."""
    w = hookgrad.zeros(2, 2, requires_grad=True)
    with hookgrad.no_grad():
        w.normal_(0, 0.02)
    assert w.requires_grad and w.grad_fn is None and (w.numpy(force=True) != 0).any()


@settings(max_examples=25, deadline=None)
@given(
    values=hnp.arrays(np.float32, st.integers(1, 30), elements=st.floats(-5, 5, width=32)),
    bins=st.integers(1, 12),
    bounds=st.sampled_from([(0, 0), (-2, 2), (-1, 3.5)]),
)
def test_histc_matches_torch(values: np.ndarray, bins: int, bounds: tuple[float, float]) -> None:
    """histc counts as torch's (the data's range when min == max == 0, edges inclusive)."""
    ours = hookgrad.histc(hookgrad.tensor(values), bins, *bounds)
    theirs = torch.histc(torch.tensor(values), bins, *bounds)
    assert ours.tolist() == theirs.tolist() and str(ours.dtype) == "float32"


@settings(max_examples=25, deadline=None)
@given(
    values=hnp.arrays(np.float32, st.integers(1, 30), elements=st.floats(-5, 5, width=32)),
    bins=st.integers(1, 8),
    density=st.booleans(),
)
def test_histogram_matches_torch(values: np.ndarray, bins: int, density: bool) -> None:
    """histogram gives torch's (hist, bin_edges) for a bin count and for explicit edges."""
    for b in (bins, [-5.0, -1.0, 0.0, 2.5, 5.0]):
        hb = hookgrad.tensor(b) if isinstance(b, list) else b
        tb = torch.tensor(b) if isinstance(b, list) else b
        ours = hookgrad.histogram(hookgrad.tensor(values), hb, density=density)
        theirs = torch.histogram(torch.tensor(values), tb, density=density)
        assert type(ours).__name__ == "histogram"
        np.testing.assert_allclose(ours.hist.numpy(), theirs.hist.numpy(), rtol=1e-5)
        np.testing.assert_allclose(ours.bin_edges.numpy(), theirs.bin_edges.numpy(), atol=1e-6)
