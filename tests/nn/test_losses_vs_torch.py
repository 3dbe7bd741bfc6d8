"""Differential tests: every loss module against torch 2.13 (values, input and target grads)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402
import hookgrad.nn as nn  # noqa: E402

RTOL, ATOL = 1e-4, 1e-6
_rng = np.random.default_rng(7)


def _f32(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (_rng.standard_normal(shape) * scale).astype(np.float32)


def _compare_loss(name, kwargs, x, target, *, target_grad=False, hg_kwargs=None, t_kwargs=None):
    """Run the loss in both libraries on (x, target); compare value and gradients."""
    hg_loss = getattr(nn, name)(**kwargs, **(hg_kwargs or {}))
    t_loss = getattr(torch.nn, name)(**kwargs, **(t_kwargs or {}))
    hx, tx = hookgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    floating = target.dtype.kind == "f"
    want_t = target_grad and floating
    ht = hookgrad.tensor(target, requires_grad=want_t)
    tt = torch.tensor(target, requires_grad=want_t)
    h_out, t_out = hg_loss(hx, ht), t_loss(tx, tt)
    assert h_out.shape == tuple(t_out.shape)
    g = _rng.standard_normal(t_out.shape).astype(np.float32)
    (h_out * hookgrad.tensor(g)).sum().backward()
    (t_out * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(h_out.detach().numpy(), t_out.detach().numpy(), RTOL, ATOL)
    np.testing.assert_allclose(hx.grad.numpy(), tx.grad.numpy(), RTOL, ATOL)
    if want_t:
        np.testing.assert_allclose(ht.grad.numpy(), tt.grad.numpy(), RTOL, ATOL)


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["MSELoss", "L1Loss"])
def test_regression_losses(name, reduction):
    """MSELoss and L1Loss with every reduction, gradients for input and target."""
    _compare_loss(name, {"reduction": reduction}, _f32(4, 3), _f32(4, 3), target_grad=True)


def test_mse_loss_is_one_fused_node_and_zero_dim():
    """MSELoss returns a 0-d tensor from a single MseLossBackward0 node."""
    out = nn.MSELoss()(hookgrad.randn(3, 2, requires_grad=True), hookgrad.randn(3, 2))
    assert out.shape == () and out.grad_fn.name() == "MseLossBackward0"
    assert out.grad_fn.next_functions[1] == (None, 0)


def test_mse_loss_broadcast_warns_like_torch():
    """A target of another size warns (UserWarning) and broadcasts, matching torch's value."""
    x, y = _f32(3, 2), _f32(2)
    with pytest.warns(UserWarning, match="Using a target size"):
        h = nn.MSELoss()(hookgrad.tensor(x), hookgrad.tensor(y)).item()
    with pytest.warns(UserWarning, match="Using a target size"):
        t = torch.nn.MSELoss()(torch.tensor(x), torch.tensor(y)).item()
    assert h == pytest.approx(t, rel=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_class_indices(reduction, smoothing, weighted):
    """CrossEntropyLoss: class indices with ignore_index, weights, label smoothing."""
    target = np.array([2, -100, 0, 3, 2, 1])
    weight = np.array([0.5, 1.0, 2.0, 1.5], dtype=np.float32)
    kwargs = {"reduction": reduction, "label_smoothing": smoothing}
    _compare_loss(
        "CrossEntropyLoss",
        kwargs,
        _f32(6, 4, scale=3.0),
        target,
        hg_kwargs={"weight": hookgrad.tensor(weight)} if weighted else None,
        t_kwargs={"weight": torch.tensor(weight)} if weighted else None,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_spatial(reduction):
    """CrossEntropyLoss on (N, C, H, W) logits with a custom ignore_index."""
    target = _rng.integers(0, 3, (2, 4, 5))
    target[0, 1, 2] = 9
    kwargs = {"reduction": reduction, "ignore_index": 9, "label_smoothing": 0.1}
    _compare_loss("CrossEntropyLoss", kwargs, _f32(2, 3, 4, 5), target)


def test_cross_entropy_single_sample():
    """CrossEntropyLoss on an unbatched (C,) input with a 0-d target."""
    _compare_loss("CrossEntropyLoss", {}, _f32(5), np.array(3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_probabilities(reduction, weighted):
    """CrossEntropyLoss with probability targets: gradients for logits and targets."""
    probs = _rng.dirichlet(np.ones(4), size=5).astype(np.float32)
    weight = np.array([0.5, 1.0, 2.0, 1.5], dtype=np.float32)
    _compare_loss(
        "CrossEntropyLoss",
        {"reduction": reduction, "label_smoothing": 0.2},
        _f32(5, 4),
        probs,
        target_grad=True,
        hg_kwargs={"weight": hookgrad.tensor(weight)} if weighted else None,
        t_kwargs={"weight": torch.tensor(weight)} if weighted else None,
    )


def test_cross_entropy_all_ignored_is_nan_like_torch():
    """With every target ignored, the mean is nan in both libraries."""
    x, target = _f32(2, 3), np.array([-100, -100])
    h = nn.CrossEntropyLoss()(hookgrad.tensor(x), hookgrad.tensor(target)).item()
    t = torch.nn.CrossEntropyLoss()(torch.tensor(x), torch.tensor(target)).item()
    assert np.isnan(h) and np.isnan(t)


@pytest.mark.parametrize("bad", [3, -2])
def test_cross_entropy_target_out_of_range(bad):
    """A class index outside [0, C) raises IndexError with torch's message."""
    x, target = _f32(2, 3), np.array([0, bad])
    with pytest.raises(IndexError) as expected:
        torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(target))
    with pytest.raises(IndexError) as got:
        nn.functional.cross_entropy(hookgrad.tensor(x), hookgrad.tensor(target))
    assert str(got.value) == str(expected.value) == f"Target {bad} is out of bounds."


def test_cross_entropy_batch_mismatch():
    """Mismatched batch sizes raise ValueError with torch's message."""
    x, target = _f32(2, 3), np.array([0, 1, 1])
    with pytest.raises(ValueError) as expected:
        torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(target))
    with pytest.raises(ValueError) as got:
        nn.functional.cross_entropy(hookgrad.tensor(x), hookgrad.tensor(target))
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(reduction, weighted):
    """NLLLoss on log-probabilities with weights and ignore_index."""
    logp = torch.log_softmax(torch.tensor(_f32(5, 3)), 1).numpy()
    target = np.array([1, 0, 2, -100, 2])
    weight = np.array([0.2, 1.0, 3.0], dtype=np.float32)
    _compare_loss(
        "NLLLoss",
        {"reduction": reduction},
        logp,
        target,
        hg_kwargs={"weight": hookgrad.tensor(weight)} if weighted else None,
        t_kwargs={"weight": torch.tensor(weight)} if weighted else None,
    )


def test_nll_loss_out_of_range():
    """NLLLoss with a target index too large raises IndexError in both libraries."""
    with pytest.raises(IndexError, match=r"Target 5 is out of bounds\."):
        torch.nn.functional.nll_loss(torch.zeros(2, 3), torch.tensor([0, 5]))
    with pytest.raises(IndexError, match=r"Target 5 is out of bounds\."):
        nn.functional.nll_loss(hookgrad.zeros(2, 3), hookgrad.tensor([0, 5]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", ["plain", "weight", "pos_weight", "both"])
def test_bce_with_logits(reduction, options):
    """BCEWithLogitsLoss with element weights and pos_weight, input and target grads."""
    weight = (_rng.random((4, 3)) + 0.5).astype(np.float32)
    pos = np.array([1.0, 3.0, 0.5], dtype=np.float32)
    hk, tk = {}, {}
    if options in ("weight", "both"):
        hk["weight"], tk["weight"] = hookgrad.tensor(weight), torch.tensor(weight)
    if options in ("pos_weight", "both"):
        hk["pos_weight"], tk["pos_weight"] = hookgrad.tensor(pos), torch.tensor(pos)
    target = _rng.random((4, 3)).astype(np.float32)
    _compare_loss(
        "BCEWithLogitsLoss",
        {"reduction": reduction},
        _f32(4, 3, scale=4.0),
        target,
        target_grad=True,
        hg_kwargs=hk,
        t_kwargs=tk,
    )


def test_bce_with_logits_extreme_logits_stay_finite():
    """Logits of +-100 give finite losses and gradients equal to torch's."""
    x = np.array([100.0, -100.0, 0.0], dtype=np.float32)
    _compare_loss("BCEWithLogitsLoss", {}, x, np.array([0.0, 1.0, 0.5], dtype=np.float32))


def test_bce_size_mismatch_raises_value_error():
    """A target of another size raises ValueError (torch's rule)."""
    with pytest.raises(ValueError, match="must be the same as input size"):
        nn.BCEWithLogitsLoss()(hookgrad.zeros(3), hookgrad.zeros(4))


def test_invalid_reduction_raises_value_error():
    """An unknown reduction string raises ValueError at call time, as in torch."""
    loss = nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        loss(hookgrad.zeros(2), hookgrad.zeros(2))


def test_loss_weights_are_buffers_like_torch():
    """Class weights are registered buffers, so they appear in state_dict as in torch."""
    w = np.array([1.0, 2.0], dtype=np.float32)
    h = nn.CrossEntropyLoss(weight=hookgrad.tensor(w))
    t = torch.nn.CrossEntropyLoss(weight=torch.tensor(w))
    assert list(h.state_dict()) == list(t.state_dict()) == ["weight"]
    assert list(nn.BCEWithLogitsLoss().state_dict()) == list(
        torch.nn.BCEWithLogitsLoss().state_dict()
    )
