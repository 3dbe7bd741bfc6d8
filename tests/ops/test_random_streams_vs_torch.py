"""Seeded alike, hookgrad draws torch's CPU numbers, bit for bit: factories, in-place fills,
Bernoulli and dropout masks, permutations, multinomial with replacement, module initialisation,
generators, the saved state and the cached normal sample between calls."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookgrad

torch = pytest.importorskip("torch")

seeds = st.integers(min_value=-(2**63), max_value=2**64 - 1)
sizes = st.integers(min_value=0, max_value=200)


def _same(ours: hookgrad.Tensor, theirs: torch.Tensor, near: bool = False) -> None:
    """Equal to the last bit; ``near``: float64 values within a few units of 1e-16 (a libm
    rounding apart, which ``mean + std * x`` may magnify near zero)."""
    assert ours.dtype.itemsize == theirs.dtype.itemsize
    if near:
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=4e-16, atol=1e-14)
    else:
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def _seed(seed: int) -> None:
    hookgrad.manual_seed(seed)
    torch.manual_seed(seed)


@settings(max_examples=40, deadline=None)
@given(seed=seeds, n=sizes, dtype=st.sampled_from(["float32", "float64"]))
def test_rand_randn_and_their_fills_draw_torchs_numbers(seed: int, n: int, dtype: str) -> None:
    """rand, randn (both sides of the 16-element switch), normal_(mean, std), uniform_(a, b),
    one after another from one seed: equal to the last bit but for float64 normal draws, which
    Python's and torch's libm may round apart in the last bit."""
    _seed(seed)
    ours, theirs = getattr(hookgrad, dtype), getattr(torch, dtype)
    near = dtype == "float64"
    _same(hookgrad.rand(n, dtype=ours), torch.rand(n, dtype=theirs))
    _same(hookgrad.randn(n, dtype=ours), torch.randn(n, dtype=theirs), near)
    _same(hookgrad.randn(3, dtype=ours), torch.randn(3, dtype=theirs), near)  # the cached one
    _same(
        hookgrad.empty(n, dtype=ours).normal_(0.5, 2.0),
        torch.empty(n, dtype=theirs).normal_(0.5, 2.0),
        near,
    )
    _same(
        hookgrad.empty(n, dtype=ours).uniform_(-0.37, 0.37),
        torch.empty(n, dtype=theirs).uniform_(-0.37, 0.37),
    )


@settings(max_examples=40, deadline=None)
@given(seed=seeds, n=sizes, high=st.sampled_from([1, 2, 10, 1000, 2**31, 2**40]))
def test_integer_draws_are_torchs(seed: int, n: int, high: int) -> None:
    """randint (32- and 64-bit draws) and randperm, then random_() as data loaders seed."""
    _seed(seed)
    _same(hookgrad.randint(0, high, (n,)), torch.randint(0, high, (n,)))
    _same(hookgrad.randint(-5, high, (2, 3)), torch.randint(-5, high, (2, 3)))
    _same(hookgrad.randperm(n), torch.randperm(n))
    assert hookgrad.default_generator.stream.random_int64() == int(
        torch.empty((), dtype=torch.int64).random_().item()
    )


@settings(max_examples=30, deadline=None)
@given(seed=seeds, n=st.integers(1, 100), p=st.floats(0.0, 1.0))
def test_bernoulli_dropout_and_multinomial_are_torchs(seed: int, n: int, p: float) -> None:
    """bernoulli_ with a number and with a tensor, bernoulli, dropout's mask and scale,
    multinomial over two rows (with replacement, one sample, without replacement) and
    exponential_."""
    _seed(seed)
    _same(hookgrad.empty(n).bernoulli_(p), torch.empty(n).bernoulli_(p))
    _same(
        hookgrad.empty(n).bernoulli_(hookgrad.full((n,), p)),
        torch.empty(n).bernoulli_(torch.full((n,), p)),
    )
    _same(hookgrad.bernoulli(hookgrad.full((n,), p)), torch.bernoulli(torch.full((n,), p)))
    x = np.linspace(-1, 1, n, dtype=np.float32)
    q = min(p, 0.9)
    _same(
        hookgrad.nn.functional.dropout(hookgrad.tensor(x), q),
        torch.nn.functional.dropout(torch.tensor(x), q),
    )
    weights = np.abs(np.sin(np.arange(2 * n, dtype=np.float32))).reshape(2, n) + 0.01
    for samples, replacement in ((7, True), (1, True), (min(n, 3), False)):
        _same(
            hookgrad.multinomial(hookgrad.tensor(weights), samples, replacement=replacement),
            torch.multinomial(torch.tensor(weights), samples, replacement=replacement),
        )
    _same(hookgrad.empty(n).exponential_(2.5), torch.empty(n).exponential_(2.5))


@pytest.mark.parametrize("seed", [0, 1, 1234])
def test_modules_initialise_with_torchs_weights(seed: int) -> None:
    """Linear, Conv2d, Embedding and LayerNorm built in the same order from the same seed hold
    torch's very weights, so a program's model starts where torch's does."""

    def build(lib):  # type: ignore[no-untyped-def]
        nn = lib.nn
        lib.manual_seed(seed)
        return nn.Sequential(
            nn.Conv2d(3, 8, 3),
            nn.Flatten(),
            nn.Linear(8 * 4 * 4, 32),
            nn.LayerNorm(32),
            nn.Linear(32, 10),
        ), nn.Embedding(50, 16)

    for ours, theirs in zip(build(hookgrad), build(torch), strict=True):
        for (name, p), (_, q) in zip(
            ours.state_dict().items(), theirs.state_dict().items(), strict=True
        ):
            np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=name)


def test_generator_objects_and_defaults_are_torchs() -> None:
    """A Generator seeded alike draws alike; the unseeded default starts at torch's seed."""
    ours, theirs = hookgrad.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    _same(hookgrad.randn(40, generator=ours), torch.randn(40, generator=theirs))
    _same(hookgrad.randperm(9, generator=ours), torch.randperm(9, generator=theirs))
    assert hookgrad.Generator().initial_seed() == torch.Generator().initial_seed()
    assert ours.initial_seed() == 7


def test_saved_state_restores_the_same_draws_and_the_cached_sample() -> None:
    """get_rng_state after an odd number of small normal draws (one sample cached), then
    set_rng_state: the same next draws, the cached one first; fork_rng leaves no trace."""
    hookgrad.manual_seed(3)
    hookgrad.randn(1)
    state = hookgrad.get_rng_state()
    first = hookgrad.randn(5).numpy()
    hookgrad.set_rng_state(state)
    np.testing.assert_array_equal(hookgrad.randn(5).numpy(), first)
    with hookgrad.random.fork_rng():
        hookgrad.rand(100)
    hookgrad.set_rng_state(state)
    with hookgrad.random.fork_rng():
        hookgrad.rand(100)
    np.testing.assert_array_equal(hookgrad.randn(5).numpy(), first)
    with pytest.raises(RuntimeError, match="Expected a uint8 state of 2517 bytes"):
        hookgrad.set_rng_state(hookgrad.zeros(3))
