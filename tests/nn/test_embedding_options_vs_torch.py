"""Embedding's options against torch 2.13: padding_idx, max_norm/norm_type,
scale_grad_by_freq, from_pretrained(freeze=), and F.embedding with them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402

FAST = settings(max_examples=30, deadline=None)


def _weight(rows: int = 7, cols: int = 3) -> np.ndarray:
    return (np.random.default_rng(4).standard_normal((rows, cols)) * 1.5).astype(np.float32)


@FAST
@given(
    hnp.arrays(
        np.int64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=st.integers(0, 6)
    ),
    st.none() | st.integers(-7, 6),
    st.none() | st.sampled_from([0.5, 1.0, 2.0]),
    st.sampled_from([1.0, 2.0, 3.0]),
    st.booleans(),
)
def test_functional_embedding_matches_torch(indices, padding_idx, max_norm, norm_type, by_freq):
    """F.embedding: torch's rows, renormalized weight and weight gradient for every option."""
    results = []
    for lib in (hookgrad, torch):
        w = lib.tensor(_weight(), requires_grad=True)
        out = lib.nn.functional.embedding(
            lib.tensor(indices), w, padding_idx, max_norm, norm_type, by_freq
        )
        g = np.random.default_rng(5).standard_normal(tuple(out.shape)).astype(np.float32)
        (out * lib.tensor(g)).sum().backward()
        results.append((out.detach().numpy(), w.detach().numpy(), w.grad.numpy()))
    for got, expected in zip(*results):
        np.testing.assert_allclose(got, expected, 1e-5, 1e-6)


@pytest.mark.parametrize("freeze", [True, False])
def test_from_pretrained_matches_torch(freeze):
    """from_pretrained copies the table, freezes it by default, and keeps the options."""
    w = _weight()
    layers = [
        lib.nn.Embedding.from_pretrained(lib.tensor(w), freeze=freeze, padding_idx=1, max_norm=2.0)
        for lib in (hookgrad, torch)
    ]
    assert repr(layers[0]) == repr(layers[1])
    assert layers[0].weight.requires_grad is layers[1].weight.requires_grad is (not freeze)
    idx = np.array([[1, 2], [2, 6]])
    outs = [layer(lib.tensor(idx)) for layer, lib in zip(layers, (hookgrad, torch))]
    np.testing.assert_allclose(outs[0].detach().numpy(), outs[1].detach().numpy(), 1e-6)
    assert outs[0].requires_grad is outs[1].requires_grad


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_padding_row_gradient_stays_zero_for_nan_gradients(value):
    """The padding_idx row gets exactly 0 even when the incoming gradient is NaN or inf."""
    grads = []
    for lib in (hookgrad, torch):
        layer = lib.nn.Embedding(4, 2, padding_idx=0)
        layer(lib.tensor([0, 2, 0])).backward(lib.full((3, 2), value))
        grads.append(layer.weight.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    assert (grads[0][0] == 0).all()


MISUSE = {
    "padding_idx_too_big": lambda lib: lib.nn.Embedding(3, 2, padding_idx=3),
    "padding_idx_too_small": lambda lib: lib.nn.Embedding(3, 2, padding_idx=-4),
    "from_pretrained_1d": lambda lib: lib.nn.Embedding.from_pretrained(lib.ones(3)),
    "weight_shape": lambda lib: lib.nn.Embedding(3, 2, _weight=lib.ones(2, 2)),
}


@pytest.mark.parametrize("name", list(MISUSE))
def test_misuse_raises_torchs_error(fails_like_torch, name):
    """A padding index off the table and a non-matrix table fail as in torch."""
    fails_like_torch(MISUSE[name])
