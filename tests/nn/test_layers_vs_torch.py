"""Differential tests: each layer against torch 2.13 with torch's own initial weights.

Every test builds the layer in both libraries, copies torch's parameters into hookgrad via
numpy, runs the same input, back-propagates the same random output gradient, and compares
the outputs and every parameter and input gradient at float32 tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402
import hookgrad.nn as nn  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


def _sync(hg_module, t_module) -> None:
    """Copy torch's parameters and buffers into hookgrad's module by name."""
    state = {k: hookgrad.tensor(v.detach().numpy()) for k, v in t_module.state_dict().items()}
    hg_module.load_state_dict(state)


def _run_both(hg_module, t_module, x: np.ndarray, *, x_grad: bool = True, seed: int = 0):
    """Forward both modules on x, backward sum(out * G); return (hg, torch) outputs and grads."""
    _sync(hg_module, t_module)
    hx = hookgrad.tensor(x, requires_grad=x_grad)
    tx = torch.tensor(x, requires_grad=x_grad)
    h_out, t_out = hg_module(hx), t_module(tx)
    g = np.random.default_rng(seed).standard_normal(t_out.shape).astype(np.float32)
    (h_out * hookgrad.tensor(g)).sum().backward()
    (t_out * torch.tensor(g)).sum().backward()
    return (hx, h_out), (tx, t_out)


def _compare(hg_module, t_module, x: np.ndarray, *, x_grad: bool = True) -> None:
    (hx, h_out), (tx, t_out) = _run_both(hg_module, t_module, x, x_grad=x_grad)
    np.testing.assert_allclose(h_out.detach().numpy(), t_out.detach().numpy(), RTOL, ATOL)
    if x_grad:
        np.testing.assert_allclose(hx.grad.numpy(), tx.grad.numpy(), RTOL, ATOL)
    t_params = dict(t_module.named_parameters())
    h_params = dict(hg_module.named_parameters())
    assert list(h_params) == list(t_params)
    for name, tp in t_params.items():
        np.testing.assert_allclose(
            h_params[name].grad.numpy(), tp.grad.numpy(), RTOL, ATOL, err_msg=name
        )


def _x(*shape: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(8, 5), (2, 3, 5), (5,)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(shape, bias):
    """Linear on 1-D, 2-D and 3-D input, with and without bias."""
    _compare(nn.Linear(5, 7, bias=bias), torch.nn.Linear(5, 7, bias=bias), _x(*shape))


def test_linear_records_one_node_with_torch_edge_order():
    """Linear with bias is one AddmmBackward0 node with edges (bias, input, weight), as torch."""
    layer = nn.Linear(3, 2)
    x = hookgrad.randn(4, 3, requires_grad=True)
    fn = layer(x).grad_fn
    assert fn.name() == torch.nn.Linear(3, 2)(torch.randn(4, 3)).grad_fn.name()
    edges = [e[0] for e in fn.next_functions]
    assert [e.variable for e in edges] == [layer.bias, x, layer.weight]
    assert nn.functional.linear(x, layer.weight).grad_fn.name() == "MmBackward0"


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"stride": 2, "padding": 1},
        {"padding": (2, 1), "dilation": (2, 1)},
        {"groups": 2, "bias": False},
        {"padding": "same", "dilation": 2},
        {"stride": (1, 3), "padding": "valid"},
    ],
)
def test_conv2d(kwargs):
    """Conv2d with stride, padding (ints, pairs, strings), dilation, groups, no bias."""
    _compare(nn.Conv2d(4, 6, 3, **kwargs), torch.nn.Conv2d(4, 6, 3, **kwargs), _x(2, 4, 9, 8))


def test_conv2d_rectangular_kernel_unbatched():
    """Conv2d with a (2, 3) kernel on a (C, H, W) input."""
    _compare(nn.Conv2d(3, 2, (2, 3)), torch.nn.Conv2d(3, 2, (2, 3)), _x(3, 5, 6))


def test_conv2d_channel_mismatch_error_matches_torch():
    """A wrong channel count raises RuntimeError with torch's text."""
    x = _x(1, 4, 5, 5)
    with pytest.raises(RuntimeError) as expected:
        torch.nn.functional.conv2d(torch.tensor(x), torch.zeros(3, 2, 3, 3))
    with pytest.raises(RuntimeError) as got:
        nn.functional.conv2d(hookgrad.tensor(x), hookgrad.zeros(3, 2, 3, 3))
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize(
    ("shape", "kwargs"),
    [
        (4, {}),
        ((3, 4), {"eps": 1e-3}),
        (4, {"elementwise_affine": False}),
        (4, {"bias": False}),
    ],
)
def test_layer_norm(shape, kwargs):
    """LayerNorm over one or two trailing dims, with eps, without affine, without bias."""
    hg, tl = nn.LayerNorm(shape, **kwargs), torch.nn.LayerNorm(shape, **kwargs)
    with torch.no_grad():
        for p in tl.parameters():
            p.uniform_(0.5, 1.5)
    _compare(hg, tl, _x(2, 3, 4) * 3 + 1)


def test_layer_norm_node_name():
    """LayerNorm records torch's NativeLayerNormBackward0."""
    out = nn.LayerNorm(3)(hookgrad.randn(2, 3, requires_grad=True))
    assert out.grad_fn.name() == "NativeLayerNormBackward0"


@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 2}, {"padding_idx": -1}])
def test_embedding(kwargs):
    """Embedding lookup and weight gradient, including a padding row."""
    hg, te = nn.Embedding(6, 4, **kwargs), torch.nn.Embedding(6, 4, **kwargs)
    idx = np.array([[0, 2, 5], [2, 2, 1]])
    _sync(hg, te)
    h_out, t_out = hg(hookgrad.tensor(idx)), te(torch.tensor(idx))
    g = _x(2, 3, 4, seed=5)
    (h_out * hookgrad.tensor(g)).sum().backward()
    (t_out * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(h_out.detach().numpy(), t_out.detach().numpy(), RTOL, ATOL)
    np.testing.assert_allclose(hg.weight.grad.numpy(), te.weight.grad.numpy(), RTOL, ATOL)


def test_embedding_max_norm_renormalises_rows_like_torch():
    """max_norm rescales the looked-up rows of the weight in place, as torch does."""
    hg, te = nn.Embedding(5, 3, max_norm=1.0), torch.nn.Embedding(5, 3, max_norm=1.0)
    _sync(hg, te)
    idx = np.array([1, 3, 3])
    np.testing.assert_allclose(
        hg(hookgrad.tensor(idx)).detach().numpy(), te(torch.tensor(idx)).detach().numpy(), 1e-5
    )
    np.testing.assert_allclose(hg.weight.detach().numpy(), te.weight.detach().numpy(), 1e-5)


def test_embedding_index_out_of_range():
    """An index past the table raises IndexError in both libraries."""
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.nn.Embedding(3, 2)(torch.tensor([3]))
    with pytest.raises(IndexError, match="index out of range in self"):
        nn.Embedding(3, 2)(hookgrad.tensor([3]))


@pytest.mark.parametrize(
    "name",
    ["ReLU", "Tanh", "Sigmoid", "GELU", "LeakyReLU", "Identity", "Flatten"],
)
def test_parameterless_modules(name):
    """Activations, Identity and Flatten match torch on values and input gradients."""
    _compare(getattr(nn, name)(), getattr(torch.nn, name)(), _x(2, 3, 4) * 2)


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("GELU", {"approximate": "tanh"}),
        ("LeakyReLU", {"negative_slope": 0.3}),
        ("Softmax", {"dim": 1}),
        ("LogSoftmax", {"dim": -1}),
        ("Flatten", {"start_dim": 0, "end_dim": 1}),
    ],
)
def test_configured_modules(name, kwargs):
    """Modules with options match torch."""
    _compare(getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs), _x(2, 3, 4) * 2)


def test_inplace_relu_on_intermediate_matches_torch():
    """ReLU(inplace=True) after a Linear matches torch's values and gradients."""
    _compare(
        nn.Sequential(nn.Linear(4, 3), nn.ReLU(inplace=True)),
        torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(inplace=True)),
        _x(5, 4),
    )


def test_dropout_eval_is_identity_and_p1_is_zero():
    """Dropout is the identity in eval mode and zeroes everything at p=1 (as torch)."""
    x = _x(3, 4)
    _compare(nn.Dropout(0.5).eval(), torch.nn.Dropout(0.5).eval(), x)
    _compare(nn.Dropout(1.0), torch.nn.Dropout(1.0), x)


def test_mlp_with_cross_entropy_end_to_end():
    """A Linear-LayerNorm-GELU-Linear classifier with CrossEntropyLoss matches torch."""

    def build(lib):
        return lib.nn.Sequential(
            lib.nn.Linear(6, 8), lib.nn.LayerNorm(8), lib.nn.GELU(), lib.nn.Linear(8, 4)
        )

    hg, tm = build(hookgrad), build(torch)
    _sync(hg, tm)
    x, target = _x(16, 6), np.random.default_rng(2).integers(0, 4, 16)
    h_loss = nn.CrossEntropyLoss(label_smoothing=0.1)(
        hg(hookgrad.tensor(x)), hookgrad.tensor(target)
    )
    t_loss = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(
        tm(torch.tensor(x)), torch.tensor(target)
    )
    h_loss.backward()
    t_loss.backward()
    assert h_loss.item() == pytest.approx(t_loss.item(), rel=1e-5)
    for (name, hp), tp in zip(hg.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(hp.grad.numpy(), tp.grad.numpy(), RTOL, ATOL, err_msg=name)


def test_cnn_end_to_end():
    """Conv2d-ReLU-Flatten-Linear with MSELoss matches torch."""

    def build(lib):
        return lib.nn.Sequential(
            lib.nn.Conv2d(2, 3, 3, padding=1),
            lib.nn.ReLU(),
            lib.nn.Flatten(),
            lib.nn.Linear(3 * 5 * 5, 2),
        )

    hg, tm = build(hookgrad), build(torch)
    _sync(hg, tm)
    x, y = _x(4, 2, 5, 5), _x(4, 2, seed=9)
    nn.MSELoss()(hg(hookgrad.tensor(x)), hookgrad.tensor(y)).backward()
    torch.nn.MSELoss()(tm(torch.tensor(x)), torch.tensor(y)).backward()
    for (name, hp), tp in zip(hg.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(hp.grad.numpy(), tp.grad.numpy(), RTOL, ATOL, err_msg=name)


def test_torch_state_dict_keys_load_strictly():
    """A torch model's state_dict (as numpy) loads strictly into the same hookgrad model."""

    def build(lib):
        return lib.nn.Sequential(
            lib.nn.Embedding(10, 4),
            lib.nn.LayerNorm(4),
            lib.nn.ModuleList([lib.nn.Linear(4, 4), lib.nn.Linear(4, 2)]),
        )

    hg, tm = build(hookgrad), build(torch)
    assert list(hg.state_dict()) == list(tm.state_dict())
    _sync(hg, tm)
    for key, value in tm.state_dict().items():
        np.testing.assert_array_equal(hg.state_dict()[key].numpy(), value.numpy())
