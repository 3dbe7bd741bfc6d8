"""Differential tests for BCELoss / binary_cross_entropy, SmoothL1Loss / smooth_l1_loss and
F.one_hot against torch 2.13 (values, gradients of input and target, node names, errors)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookgrad

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-5, 1e-6


def _both(lib: Any, name: str, kwargs: dict[str, Any], x: np.ndarray, y: np.ndarray) -> Any:
    """(loss value, input grad, target grad, node name) of ``lib.nn.<name>`` on (x, y)."""
    tx, ty = lib.tensor(x, requires_grad=True), lib.tensor(y, requires_grad=True)
    out = getattr(lib.nn, name)(**kwargs)(tx, ty)
    g = np.cos(np.arange(max(out.numel(), 1)) * 0.7).reshape(tuple(out.shape)).astype(np.float32)
    (out * lib.tensor(g)).sum().backward()
    return out.detach().numpy(), tx.grad.numpy(), ty.grad.numpy(), out.grad_fn.name()


def _assert_same(name: str, kwargs: dict[str, Any], x: np.ndarray, y: np.ndarray) -> None:
    ours, theirs = _both(hookgrad, name, kwargs, x, y), _both(torch, name, kwargs, x, y)
    for mine, reference in zip(ours[:3], theirs[:3]):
        assert mine.shape == reference.shape and mine.dtype == reference.dtype
        np.testing.assert_allclose(mine, reference, rtol=RTOL, atol=ATOL)
    assert ours[3] == theirs[3]


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 6),
    reduction=st.sampled_from(["mean", "sum", "none"]),
    beta=st.sampled_from([0.5, 1.0, 2.0]),
    seed=st.integers(0, 2**16),
)
def test_smooth_l1_matches_torch(n: int, reduction: str, beta: float, seed: int) -> None:
    """SmoothL1Loss in both zones, every reduction: value, input and target gradients."""
    rng = np.random.default_rng(seed)
    x, y = (
        rng.uniform(-3, 3, (n, 3)).astype(np.float32),
        rng.uniform(-3, 3, (n, 3)).astype(np.float32),
    )
    _assert_same("SmoothL1Loss", {"reduction": reduction, "beta": beta}, x, y)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 6),
    reduction=st.sampled_from(["mean", "sum", "none"]),
    seed=st.integers(0, 2**16),
)
def test_bce_matches_torch(n: int, reduction: str, seed: int) -> None:
    """BCELoss on probabilities with soft targets, every reduction: value and both gradients."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.01, 0.99, (n, 2)).astype(np.float32)
    y = rng.uniform(0, 1, (n, 2)).astype(np.float32)
    _assert_same("BCELoss", {"reduction": reduction}, x, y)


def test_bce_at_zero_and_one_clamps_as_torch() -> None:
    """Probabilities of exactly 0 and 1: the loss clamps each log at -100 and the gradient's
    denominator at 1e-12, as torch's; a weight scales each element."""
    x = np.array([0.0, 1.0, 0.5, 1.0], np.float32)
    y = np.array([1.0, 0.0, 1.0, 1.0], np.float32)
    _assert_same("BCELoss", {}, x, y)
    w = np.array([1.0, 2.0, 0.5, 3.0], np.float32)
    values = []
    for lib in (hookgrad, torch):
        px = lib.tensor(x, requires_grad=True)
        loss = lib.nn.functional.binary_cross_entropy(
            px, lib.tensor(y), lib.tensor(w), reduction="sum"
        )
        loss.backward()
        values.append((loss.item(), px.grad.numpy()))
    assert values[0][0] == pytest.approx(values[1][0], rel=1e-6)
    np.testing.assert_allclose(values[0][1], values[1][1], rtol=1e-6)


def test_functional_forms_match_modules() -> None:
    """F.smooth_l1_loss and F.binary_cross_entropy give what torch's functional forms give."""
    x, y = np.array([0.2, 0.7, 0.9], np.float32), np.array([0.0, 1.0, 0.5], np.float32)
    for name, kwargs in (("smooth_l1_loss", {"beta": 0.3}), ("binary_cross_entropy", {})):
        ours = getattr(hookgrad.nn.functional, name)(
            hookgrad.tensor(x), hookgrad.tensor(y), **kwargs
        )
        theirs = getattr(torch.nn.functional, name)(torch.tensor(x), torch.tensor(y), **kwargs)
        assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)


@pytest.mark.parametrize(
    ("program", "message_too"),
    [
        (lambda L: L.nn.functional.binary_cross_entropy(L.tensor([1.5]), L.tensor([1.0])), True),
        (
            lambda L: L.nn.functional.binary_cross_entropy(L.tensor([0.5]), L.tensor([1.0, 0.0])),
            False,
        ),
        (lambda L: L.nn.functional.one_hot(L.tensor([0.0, 2.0])), True),
        (lambda L: L.nn.functional.one_hot(L.tensor([0, 3]), 3), True),
        (lambda L: L.nn.functional.one_hot(L.tensor([-1]), 3), True),
    ],
)
def test_errors_match_torch(program: Any, message_too: bool) -> None:
    """Bad probabilities, mismatched sizes and bad class indices raise torch's error types."""
    with pytest.raises(Exception) as theirs:
        program(torch)
    with pytest.raises(type(theirs.value)) as ours:
        program(hookgrad)
    if message_too:
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("num_classes", [-1, 5])
def test_one_hot_matches_torch(num_classes: int) -> None:
    """one_hot of any-shaped int64 indices: int64 rows, class count inferred or given."""
    idx = np.array([[0, 3], [2, 2]], np.int64)
    ours = hookgrad.nn.functional.one_hot(hookgrad.tensor(idx), num_classes)
    theirs = torch.nn.functional.one_hot(torch.tensor(idx), num_classes)
    assert ours.tolist() == theirs.tolist()
    assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype == hookgrad.int64
