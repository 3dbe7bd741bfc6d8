"""Numerical gradient checks (float64) of every fused functional kernel in hookgrad.nn."""

from __future__ import annotations

import numpy as np
import pytest

import hookgrad
import hookgrad.nn.functional as F
from hookgrad.autograd import gradcheck

_rng = np.random.default_rng(1234)


def _leaf(*shape: int, scale: float = 1.0) -> hookgrad.Tensor:
    return hookgrad.tensor(
        _rng.standard_normal(shape) * scale, dtype=hookgrad.float64
    ).requires_grad_()


@pytest.mark.parametrize("x_shape", [(3, 4), (2, 3, 4), (4,)])
def test_linear_with_bias(x_shape):
    """F.linear with bias: gradients for input, weight and bias match finite differences."""
    assert gradcheck(F.linear, (_leaf(*x_shape), _leaf(5, 4), _leaf(5)))


def test_linear_without_bias():
    """F.linear without bias (the MmBackward0 node)."""
    assert gradcheck(F.linear, (_leaf(3, 4), _leaf(2, 4)))


@pytest.mark.parametrize(
    ("stride", "padding", "dilation", "groups"),
    [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (2, (1, 0), (1, 2), 2), (1, "same", 1, 1)],
)
def test_conv2d(stride, padding, dilation, groups):
    """F.conv2d: input, weight and bias gradients for stride/padding/dilation/groups."""
    x, w, b = _leaf(2, 4, 6, 5), _leaf(4, 4 // groups, 3, 3), _leaf(4)
    assert gradcheck(
        lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups), (x, w, b)
    )


def test_conv2d_unbatched_without_bias():
    """F.conv2d on a (C, H, W) input without bias."""
    assert gradcheck(lambda x, w: F.conv2d(x, w, padding=1), (_leaf(2, 4, 4), _leaf(3, 2, 2, 2)))


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(affine):
    """F.layer_norm over the two trailing dims, with and without the affine map."""
    x = _leaf(3, 2, 4)
    if affine:
        assert gradcheck(
            lambda x, w, b: F.layer_norm(x, (2, 4), w, b), (x, _leaf(2, 4), _leaf(2, 4))
        )
    else:
        assert gradcheck(lambda x: F.layer_norm(x, 4), (x,))


def test_embedding_weight():
    """F.embedding: the weight gradient scatter-adds the rows of repeated indices."""
    idx = hookgrad.tensor([[0, 2, 2], [4, 1, 2]])
    assert gradcheck(lambda w: F.embedding(idx, w) * 1.5, (_leaf(5, 3),))


@pytest.mark.parametrize(("scale_grad_by_freq", "row2"), [(False, 4.5), (True, 1.5)])
def test_embedding_padding_row_and_frequency_scaling(scale_grad_by_freq, row2):
    """The padding row gets no gradient; scale_grad_by_freq divides by the index count."""
    idx = hookgrad.tensor([[0, 2, 2], [4, 1, 2]])
    w = _leaf(5, 3)
    out = F.embedding(idx, w, padding_idx=1, scale_grad_by_freq=scale_grad_by_freq) * 1.5
    out.sum().backward()
    grad = w.grad.tolist()
    assert grad[1] == [0.0] * 3 and grad[2] == [row2] * 3 and grad[3] == [0.0] * 3
    assert grad[0] == [1.5] * 3


def test_dropout_with_fixed_mask():
    """F.dropout: with the mask fixed by the seed, the gradient is mask / (1 - p)."""

    def f(x):
        hookgrad.manual_seed(3)
        return F.dropout(x, 0.4)

    assert gradcheck(f, (_leaf(4, 5),))


@pytest.mark.parametrize("pads", [(1, 2), (0, 1, 2, 0), (-1, 2, 1, -1)])
def test_constant_pad(pads):
    """F.pad (constant) including negative (cropping) pads."""
    assert gradcheck(lambda x: F.pad(x, pads, value=0.5), (_leaf(3, 4, 5),))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1(reduction):
    """MSE and L1 losses: gradients for input and target."""
    x, y = _leaf(3, 4), _leaf(3, 4)
    assert gradcheck(lambda x, y: F.mse_loss(x, y, reduction=reduction), (x, y))
    assert gradcheck(lambda x, y: F.l1_loss(x, y, reduction=reduction), (x, y))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_class_indices(reduction, smoothing, weighted):
    """F.cross_entropy with indices, ignore_index, class weights and label smoothing."""
    target = hookgrad.tensor([2, -100, 0, 3, 2])
    weight = hookgrad.tensor([0.5, 1.0, 2.0, 1.5], dtype=hookgrad.float64) if weighted else None

    def f(x):
        return F.cross_entropy(x, target, weight, reduction=reduction, label_smoothing=smoothing)

    assert gradcheck(f, (_leaf(5, 4),))


def test_cross_entropy_spatial_and_unbatched():
    """F.cross_entropy on (N, C, H, W) input and on a single (C,) sample."""
    target = hookgrad.tensor([[[0, 2], [1, 1]], [[2, 0], [-100, 1]]])
    assert gradcheck(
        lambda x: F.cross_entropy(x, target, label_smoothing=0.1), (_leaf(2, 3, 2, 2),)
    )
    assert gradcheck(lambda x: F.cross_entropy(x, hookgrad.tensor(1)), (_leaf(3),))


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_probabilities(reduction):
    """F.cross_entropy with probability targets: input and target gradients."""
    probs = hookgrad.tensor(_rng.dirichlet(np.ones(4), size=3), dtype=hookgrad.float64)
    probs.requires_grad_()
    weight = hookgrad.tensor([1.0, 2.0, 0.5, 1.0], dtype=hookgrad.float64)

    def f(x, t):
        return F.cross_entropy(x, t, weight, reduction=reduction, label_smoothing=0.1)

    assert gradcheck(f, (_leaf(3, 4), probs))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction):
    """F.nll_loss with class weights and ignore_index, batched and spatial."""
    weight = hookgrad.tensor([0.2, 1.0, 3.0], dtype=hookgrad.float64)
    target = hookgrad.tensor([1, 0, 2, 7])
    assert gradcheck(
        lambda x: F.nll_loss(x, target, weight, ignore_index=7, reduction=reduction), (_leaf(4, 3),)
    )
    spatial = hookgrad.tensor([[0, 2, 1], [2, 2, 0]])
    assert gradcheck(lambda x: F.nll_loss(x, spatial, reduction=reduction), (_leaf(2, 3, 3),))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_with_logits(reduction, weighted):
    """BCE with logits: input and target gradients, with element weights and pos_weight."""
    x = _leaf(3, 4, scale=3.0)
    y = hookgrad.tensor(_rng.random((3, 4)), dtype=hookgrad.float64).requires_grad_()
    weight = (
        hookgrad.tensor(_rng.random((3, 4)) + 0.5, dtype=hookgrad.float64) if weighted else None
    )
    pos = hookgrad.tensor([1.0, 2.0, 0.5, 3.0], dtype=hookgrad.float64) if weighted else None

    def f(x, y):
        return F.binary_cross_entropy_with_logits(x, y, weight, reduction=reduction, pos_weight=pos)

    assert gradcheck(f, (x, y))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.leaky_relu(x, 0.2),
        lambda x: F.gelu(x),
        lambda x: F.gelu(x, approximate="tanh"),
        lambda x: F.softmax(x, dim=0),
        lambda x: F.log_softmax(x, dim=-1),
        F.tanh,
        F.sigmoid,
    ],
)
def test_activations(fn):
    """The functional activations differentiate correctly."""
    assert gradcheck(fn, (_leaf(3, 4),))
