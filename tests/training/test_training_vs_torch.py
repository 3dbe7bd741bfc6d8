"""End-to-end training: hookgrad and torch follow the same loss curve from the same weights."""

from __future__ import annotations

import numpy as np
import pytest

import hookgrad

torch = pytest.importorskip("torch")

STEPS = 20


def _mlp(nn):
    return nn.Sequential(
        nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3)
    )


def _cnn(nn):
    return nn.Sequential(
        nn.Conv2d(1, 4, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.Conv2d(4, 4, kernel_size=3, stride=2),
        nn.GELU(),
        nn.Flatten(),
        nn.LayerNorm(16),
        nn.Linear(16, 3),
    )


def _copy_weights(source, target) -> None:
    """Give the hookgrad model torch's initial weights."""
    with hookgrad.no_grad():
        for (name, p), (_, q) in zip(source.named_parameters(), target.named_parameters()):
            assert tuple(p.shape) == tuple(q.shape), name
            q.copy_(hookgrad.tensor(p.detach().numpy()))


def _data(kind: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    shape = (32, 4) if kind == "mlp" else (8, 1, 6, 6)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 3, size=shape[0])
    return x, y


def _curve(lib, model, optimizer_name: str, x: np.ndarray, y: np.ndarray) -> list[float]:
    options = {"SGD": {"lr": 0.1, "momentum": 0.9}, "Adam": {"lr": 0.01}}[optimizer_name]
    optimizer = getattr(lib.optim, optimizer_name)(model.parameters(), **options)
    loss_fn = lib.nn.CrossEntropyLoss()
    inputs, targets = lib.tensor(x), lib.tensor(y)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@pytest.mark.parametrize("optimizer_name", ["SGD", "Adam"])
def test_same_loss_curve_as_torch(kind, optimizer_name):
    """20 training steps give torch's losses and final weights within float32 tolerance."""
    torch.manual_seed(0)
    reference = (_mlp if kind == "mlp" else _cnn)(torch.nn)
    model = (_mlp if kind == "mlp" else _cnn)(hookgrad.nn)
    _copy_weights(reference, model)
    x, y = _data(kind)
    expected = _curve(torch, reference, optimizer_name, x, y)
    got = _curve(hookgrad, model, optimizer_name, x, y)
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-5)
    assert expected[-1] < expected[0] * 0.9  # the run really trains
    for p, q in zip(reference.parameters(), model.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-3, atol=1e-4)
