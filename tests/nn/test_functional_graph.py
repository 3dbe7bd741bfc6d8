"""How the fused nn kernels sit in the autograd graph: node names, edges, saved-value checks,
dropout randomness, and the errors that do not need torch to state."""

from __future__ import annotations

import numpy as np
import pytest

import hookgrad
import hookgrad.nn as nn
import hookgrad.nn.functional as F
from hookgrad.autograd.graph import AccumulateGrad


def _req(*shape: int) -> hookgrad.Tensor:
    return hookgrad.randn(*shape, requires_grad=True)


def test_linear_is_one_node_straight_to_the_leaves():
    """Linear records one AddmmBackward0 whose edges go straight to the three leaves."""
    layer = nn.Linear(3, 2)
    for x in (_req(4, 3), _req(2, 5, 3)):
        fn = layer(x).grad_fn
        assert fn.name() == "AddmmBackward0"
        assert all(type(node) is AccumulateGrad for node, _ in fn.next_functions)


def test_linear_backward_skips_edges_that_need_no_grad():
    """A frozen weight gets no gradient while the input and bias still do."""
    layer = nn.Linear(3, 2)
    layer.weight.requires_grad_(False)
    x = _req(4, 3)
    fn = layer(x).grad_fn
    assert fn.next_functions[2] == (None, 0)
    layer(x).sum().backward()
    assert layer.weight.grad is None and x.grad.shape == (4, 3)
    assert layer.bias.grad.tolist() == [4.0, 4.0]


def test_linear_gradients_have_closed_form_values():
    """dL/dx = g @ W, dL/dW = g.T @ x, dL/db = sum(g) for L = sum(linear(x))."""
    layer = nn.Linear(2, 2)
    with hookgrad.no_grad():
        layer.weight.copy_(hookgrad.tensor([[1.0, 2.0], [3.0, 4.0]]))
    x = hookgrad.tensor([[1.0, -1.0], [2.0, 0.5]], requires_grad=True)
    layer(x).sum().backward()
    assert x.grad.tolist() == [[4.0, 6.0], [4.0, 6.0]]
    assert layer.weight.grad.tolist() == [[3.0, -0.5], [3.0, -0.5]]
    assert layer.bias.grad.tolist() == [2.0, 2.0]


def test_linear_under_no_grad_records_nothing():
    """Under no_grad, Linear's output has no grad_fn and does not require grad."""
    with hookgrad.no_grad():
        out = nn.Linear(3, 2)(_req(1, 3))
    assert out.grad_fn is None and not out.requires_grad


def test_linear_bias_accumulates_before_weight():
    """The bias's gradient hook fires before the weight's, as with torch's addmm edges."""
    layer = nn.Linear(2, 2)
    order = []
    layer.weight.register_hook(lambda g: order.append("weight"))
    layer.bias.register_hook(lambda g: order.append("bias"))
    layer(_req(3, 2)).sum().backward()
    assert order == ["bias", "weight"]


def test_modifying_input_after_linear_breaks_backward():
    """Linear saves x and W with their versions: an in-place change makes backward raise."""
    x = hookgrad.randn(2, 3)
    out = nn.Linear(3, 1)(x).sum()
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_second_backward_needs_retain_graph():
    """Fused nodes free saved arrays: a second backward raises unless retain_graph=True."""
    layer = nn.Linear(2, 1)
    loss = nn.MSELoss()(layer(hookgrad.ones(3, 2)), hookgrad.zeros(3, 1))
    loss.backward(retain_graph=True)
    first = layer.weight.grad.tolist()
    loss.backward()
    assert np.allclose(layer.weight.grad.numpy(), 2 * np.array(first))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: nn.Conv2d(1, 1, 2)(_req(1, 1, 3, 3)), "ConvolutionBackward0"),
        (lambda: nn.LayerNorm(3)(_req(2, 3)), "NativeLayerNormBackward0"),
        (lambda: nn.Embedding(4, 2)(hookgrad.tensor([1, 3])), "EmbeddingBackward0"),
        (lambda: nn.Dropout(0.5)(_req(4)), "NativeDropoutBackward0"),
        (lambda: F.pad(_req(2), (1, 1)), "ConstantPadNdBackward0"),
        (lambda: F.linear(_req(2, 3), _req(4, 3)), "MmBackward0"),
        (lambda: nn.MSELoss()(_req(2), hookgrad.ones(2)), "MseLossBackward0"),
        (lambda: nn.L1Loss()(_req(2), hookgrad.ones(2)), "L1LossBackward0"),
        (lambda: nn.NLLLoss()(_req(2, 3), hookgrad.tensor([0, 2])), "NllLossBackward0"),
        (
            lambda: nn.CrossEntropyLoss()(_req(2, 3), hookgrad.tensor([0, 2])),
            "CrossEntropyLossBackward0",
        ),
        (
            lambda: nn.BCEWithLogitsLoss()(_req(2), hookgrad.ones(2)),
            "BinaryCrossEntropyWithLogitsBackward0",
        ),
    ],
)
def test_fused_node_names(make, name):
    """Each fused kernel records exactly one node with a torch-like name."""
    assert make().grad_fn.name() == name


@pytest.mark.parametrize("loss", [nn.MSELoss(), nn.L1Loss(), nn.BCEWithLogitsLoss()])
def test_losses_return_zero_dim(loss):
    """Reduced losses are 0-d tensors."""
    assert loss(_req(3, 2), hookgrad.rand(3, 2)).shape == ()


def test_dropout_training_statistics_and_scale():
    """In training, about p of the elements are zero and the rest are scaled by 1/(1-p)."""
    drop = nn.Dropout(0.25)
    out = drop(hookgrad.ones(100_000)).numpy()
    assert abs((out == 0).mean() - 0.25) < 0.01
    assert np.allclose(out[out != 0], 1 / 0.75)


def test_dropout_gradient_uses_the_same_mask():
    """The input gradient is the forward mask times 1/(1-p)."""
    x = hookgrad.ones(50, requires_grad=True)
    out = F.dropout(x, 0.5)
    out.sum().backward()
    assert np.array_equal(x.grad.numpy(), out.detach().numpy())


def test_dropout_eval_and_p0_return_input_itself():
    """In eval mode (or with p=0) dropout returns its input object unchanged."""
    x = _req(3)
    assert nn.Dropout(0.5).eval()(x) is x and F.dropout(x, 0.0) is x
    assert F.dropout(x, 0.5, training=False) is x


def test_dropout_reproducible_with_manual_seed():
    """The same seed draws the same mask."""
    hookgrad.manual_seed(11)
    a = F.dropout(hookgrad.ones(20), 0.5).tolist()
    hookgrad.manual_seed(11)
    b = F.dropout(hookgrad.ones(20), 0.5).tolist()
    assert a == b and 0.0 in a


def test_dropout_inplace_overwrites_input():
    """inplace=True writes the dropped values into the input and bumps its version."""
    x = hookgrad.ones(1000)
    out = nn.Dropout(0.5, inplace=True)(x)
    assert out is x and x._version == 1 and (x.numpy() == 0).any()


def test_dropout_probability_validated():
    """p outside [0, 1] raises ValueError."""
    with pytest.raises(ValueError, match=r"between 0 and 1, but got -0\.1"):
        F.dropout(hookgrad.ones(2), -0.1)


def test_linear_wrong_feature_count_names_both_shapes():
    """Linear(3, 2) on a (4, 5) input raises RuntimeError naming 4x5 and 3x2."""
    with pytest.raises(
        RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(4x5 and 3x2\)"
    ):
        nn.Linear(3, 2)(hookgrad.ones(4, 5))


def test_cross_entropy_target_out_of_range_raises_index_error():
    """A class index equal to C raises IndexError; ignore_index is exempt."""
    with pytest.raises(IndexError, match=r"Target 3 is out of bounds\."):
        nn.CrossEntropyLoss()(hookgrad.zeros(2, 3), hookgrad.tensor([0, 3]))
    loss = nn.CrossEntropyLoss(ignore_index=3)(hookgrad.zeros(2, 3), hookgrad.tensor([0, 3]))
    assert loss.item() == pytest.approx(np.log(3))


def test_cross_entropy_float_target_must_match_input_shape():
    """A probability target of another shape raises RuntimeError."""
    with pytest.raises(RuntimeError, match="Expected target size"):
        F.cross_entropy(hookgrad.zeros(2, 3), hookgrad.zeros(2, 4))


def test_embedding_rejects_float_indices():
    """Embedding indices must be integers."""
    with pytest.raises(RuntimeError, match="'indices' to have one of the following scalar types"):
        nn.Embedding(3, 2)(hookgrad.tensor([1.0]))


def test_softmax_without_dim_warns_and_picks_torch_default():
    """Softmax() with no dim warns and uses dim 1 for 2-D input."""
    x = hookgrad.tensor([[1.0, 2.0], [3.0, 5.0]])
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        out = nn.Softmax()(x)
    assert np.allclose(out.numpy().sum(axis=1), 1.0)


def test_pad_values_and_crop():
    """F.pad pads the last dims with the value and crops with negative amounts."""
    x = hookgrad.tensor([[1.0, 2.0, 3.0]])
    assert F.pad(x, (1, 0), value=9.0).tolist() == [[9.0, 1.0, 2.0, 3.0]]
    assert F.pad(x, (-1, 1, 1, 0)).tolist() == [[0.0, 0.0, 0.0], [2.0, 3.0, 0.0]]


def test_conv2d_known_values():
    """A 2x2 all-ones kernel sums each 2x2 window (plus bias)."""
    x = hookgrad.arange(9, dtype=hookgrad.float32).reshape(1, 1, 3, 3)
    out = F.conv2d(x, hookgrad.ones(1, 1, 2, 2), hookgrad.tensor([0.5]))
    assert out.tolist() == [[[[8.5, 12.5], [20.5, 24.5]]]]


def test_layer_norm_normalises_rows():
    """Without affine, each row has mean 0 and (biased) variance 1 up to eps."""
    x = hookgrad.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 10.0, 10.0, 14.0]])
    out = F.layer_norm(x, (4,), eps=0.0).numpy()
    assert np.allclose(out.mean(axis=1), 0.0, atol=1e-6) and np.allclose(out.var(axis=1), 1.0)


def test_layer_norm_shape_mismatch():
    """A trailing shape that is not normalized_shape raises RuntimeError."""
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*, 3\]"):
        F.layer_norm(hookgrad.ones(2, 4), (3,))
