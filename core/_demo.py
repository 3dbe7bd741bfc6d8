"""The demo training run behind ``hookgrad demo`` and ``examples/train_demo.py``.

A 2-64-64-1 ReLU MLP trained full-batch on two interleaved spirals, written exactly as for
PyTorch. The data set is generated in code (deterministic for a given seed), so the run needs no
download. It lives in the package, not in ``examples/``, because an installed ``hookgrad``
command cannot import a script from a source checkout.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import nn, optim
from ._creation import from_numpy, manual_seed
from ._grad_mode import no_grad
from ._tensor import Tensor

__all__ = ["StepRecord", "accuracy", "build_model", "train", "two_spirals"]

POINTS_PER_CLASS = 200
HIDDEN = 64


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One training step: the loss it minimised and the accuracy after its update."""

    step: int
    loss: float
    accuracy: float


def two_spirals(
    points_per_class: int, seed: int, noise: float = 0.02
) -> tuple[np.ndarray, np.ndarray]:
    """Two spiral arms (one turn each, the second rotated by pi), labelled +1 and -1.

    Returns ``x`` of shape (2n, 2) and ``y`` of shape (2n, 1), float32, points inside the unit disc.
    """
    rng = np.random.default_rng(seed)
    angle = np.sqrt(rng.uniform(0.0, 1.0, points_per_class)) * 2 * math.pi
    radius = angle / (2 * math.pi)
    arm = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    x = np.concatenate([arm, -arm]) + rng.normal(0.0, noise, (2 * points_per_class, 2))
    y = np.concatenate([np.ones(points_per_class), -np.ones(points_per_class)])[:, None]
    return x.astype(np.float32), y.astype(np.float32)


def build_model(hidden: int = HIDDEN) -> nn.Sequential:
    """2 -> hidden -> hidden -> 1 with ReLU: enough capacity for the spirals in ~100 steps."""
    return nn.Sequential(
        nn.Linear(2, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 1),
    )


def accuracy(model: nn.Module, x: Tensor, y: Tensor) -> float:
    """Share of points whose predicted sign matches the label's."""
    with no_grad():
        return float(((model(x) > 0) == (y > 0)).float().mean().item())


def train(
    steps: int,
    log_every: int,
    seed: int,
    *,
    on_step: Callable[[StepRecord], None] | None = None,
    echo: Callable[[str], None] = print,
) -> float:
    """Full-batch SGD with momentum on MSE to the +-1 labels; returns the final accuracy.

    Prints (through ``echo``) a header, a progress line every ``log_every`` steps and on the
    last, and the final accuracy. ``on_step`` receives every step's record; the accuracy
    after each update costs one extra forward, so it is measured only on logged steps unless
    ``on_step`` is given.
    """
    manual_seed(seed)
    x_np, y_np = two_spirals(POINTS_PER_CLASS, seed)
    x, y = from_numpy(x_np), from_numpy(y_np)
    model = build_model()
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(model.parameters(), lr=0.03, momentum=0.9)
    n_params = sum(p.numel() for p in model.parameters())
    echo(f"two spirals: {len(x_np)} points; model: {n_params} parameters")
    start = time.perf_counter()
    for step in range(1, steps + 1):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        logged = step % log_every == 0 or step == steps
        if not (logged or on_step):
            continue
        record = StepRecord(step, loss.item(), accuracy(model, x, y))
        if on_step is not None:
            on_step(record)
        if logged:
            echo(f"step {step:4d}/{steps}  loss {record.loss:.4f}  accuracy {record.accuracy:.3f}")
    final = accuracy(model, x, y)
    echo(f"final accuracy {final:.3f} after {steps} steps ({time.perf_counter() - start:.2f} s)")
    return final
