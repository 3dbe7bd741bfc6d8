"""torch.distributions' Categorical, Bernoulli and Normal against torch 2.13: seeded samples
(the same random stream), log_prob, entropy, shapes, gradients through log_prob and rsample,
and the argument checks (pytorch/examples' REINFORCE and actor-critic sample from a
Categorical and train on its log_prob)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad

torch = pytest.importorskip("torch")

FAST = settings(max_examples=25, deadline=None)
batch = hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3)
sample_shapes = st.sampled_from([(), (1,), (4,), (2, 3)])


def _run(lib: Any, build: Any, sample_shape: tuple[int, ...], seed: int) -> dict[str, Any]:
    lib.manual_seed(seed)
    params, dist = build(lib)
    sample = dist.sample(sample_shape)
    log_prob = dist.log_prob(sample)
    (log_prob.sum() + dist.entropy().sum()).backward()
    return {
        "sample": sample.tolist(),
        "dtype": str(sample.dtype).removeprefix("torch."),
        "log_prob": log_prob.tolist(),
        "entropy": dist.entropy().tolist(),
        "batch_shape": tuple(dist.batch_shape),
        "event_shape": tuple(dist.event_shape),
        "grads": [p.grad.tolist() for p in params],
        "repr": re.sub(r"\d\.\d+", "#", repr(dist)),  # float32 sigmoid: an ulp apart
    }


def _same(build: Any, sample_shape: tuple[int, ...], seed: int) -> None:
    ours, theirs = _run(hookgrad, build, sample_shape, seed), _run(torch, build, sample_shape, seed)
    for key in ("sample", "dtype", "batch_shape", "event_shape", "repr"):
        assert ours[key] == theirs[key], key
    for key in ("log_prob", "entropy"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-6, err_msg=key)
    # A gradient sums float32 terms of magnitude up to ~10 over the samples, in another order
    # than torch's: a small sum keeps their rounding (an ulp of 8 is 1e-6), hence the atol.
    np.testing.assert_allclose(ours["grads"], theirs["grads"], rtol=1e-5, atol=1e-5)


@FAST
@given(batch, st.integers(2, 5), sample_shapes, st.integers(0, 2**16), st.booleans())
def test_categorical_matches_torch(shape, k, sample_shape, seed, by_logits):
    """Probabilities or logits of any batch shape: torch's samples, log_prob, entropy and
    the gradients of both."""
    raw = np.random.default_rng(seed).uniform(0.1, 2.0, (*shape, k)).astype(np.float32)

    def build(lib: Any) -> tuple[list[Any], Any]:
        p = lib.tensor(np.log(raw) if by_logits else raw, requires_grad=True)
        dist = (
            lib.distributions.Categorical(logits=p)
            if by_logits
            else lib.distributions.Categorical(p)
        )
        return [p], dist

    _same(build, sample_shape, seed)


@FAST
@given(batch, sample_shapes, st.integers(0, 2**16), st.booleans())
def test_bernoulli_matches_torch(shape, sample_shape, seed, by_logits):
    """Probabilities or logits: torch's 0/1 samples, log_prob, entropy and gradients."""
    raw = np.random.default_rng(seed).uniform(0.05, 0.95, shape).astype(np.float32)

    def build(lib: Any) -> tuple[list[Any], Any]:
        p = lib.tensor(np.log(raw / (1 - raw)) if by_logits else raw, requires_grad=True)
        dist = (
            lib.distributions.Bernoulli(logits=p) if by_logits else lib.distributions.Bernoulli(p)
        )
        return [p], dist

    _same(build, sample_shape, seed)


@FAST
@given(batch, sample_shapes, st.integers(0, 2**16))
def test_normal_matches_torch(shape, sample_shape, seed):
    """loc and scale of any batch shape: torch's samples, log_prob, entropy, gradients, and
    rsample's reparameterised gradient."""
    rng = np.random.default_rng(seed)
    loc = rng.standard_normal(shape).astype(np.float32)
    scale = rng.uniform(0.2, 2.0, shape).astype(np.float32)

    def build(lib: Any) -> tuple[list[Any], Any]:
        m, s = lib.tensor(loc, requires_grad=True), lib.tensor(scale, requires_grad=True)
        return [m, s], lib.distributions.Normal(m, s)

    _same(build, sample_shape, seed)
    grads = []
    for lib in (hookgrad, torch):
        lib.manual_seed(seed)
        (m, s), dist = build(lib)
        z = dist.rsample(sample_shape)
        (z * z).sum().backward()
        grads.append([z.tolist(), m.grad.tolist(), s.grad.tolist()])
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads[0][2], grads[1][2], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda L: L.distributions.Categorical(probs=L.tensor([-0.1, 1.1]), validate_args=True),
        lambda L: L.distributions.Categorical(L.tensor([[0.2, 0.8]]), validate_args=True).log_prob(
            L.tensor([2])
        ),
        lambda L: L.distributions.Normal(L.zeros(2), L.tensor([1.0, -1.0]), validate_args=True),
        lambda L: L.distributions.Normal(L.zeros(2), 1.0, validate_args=True).log_prob(
            L.tensor([float("nan"), 0.0])
        ),
        lambda L: L.distributions.Bernoulli(probs=L.tensor([1.5]), validate_args=True),
        lambda L: L.distributions.Categorical(),
    ],
    ids=["simplex", "support", "scale", "real", "interval", "neither"],
)
def test_invalid_arguments_are_torchs_value_error(make):
    """Parameters outside their constraints and values outside the support are torch's
    ValueError, with torch's message (validate_args given: torch._dynamo, once imported,
    turns torch's default off)."""
    with pytest.raises(ValueError) as expected:
        make(torch)
    with pytest.raises(ValueError) as got:
        make(hookgrad)
    assert str(got.value) == str(expected.value)
