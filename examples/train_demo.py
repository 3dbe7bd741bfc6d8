"""Train a small MLP on two interleaved spirals with hookgrad, written exactly as for PyTorch.

The data set is generated in code (deterministic for a given ``--seed``), so the run needs no
download. Every ``--log-every`` steps it prints the full-batch loss and accuracy; at the end the
final accuracy.

    python examples/train_demo.py               # 200 steps
    python examples/train_demo.py --steps 60 --log-every 10
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

import hookgrad
from hookgrad import nn, optim


def two_spirals(points_per_class: int, seed: int, noise: float = 0.02) -> tuple[np.ndarray, ...]:
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


def build_model(hidden: int) -> nn.Sequential:
    """2 -> hidden -> hidden -> 1 with ReLU: enough capacity for the spirals in ~100 steps."""
    return nn.Sequential(
        nn.Linear(2, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 1),
    )


def accuracy(model: nn.Module, x: hookgrad.Tensor, y: hookgrad.Tensor) -> float:
    """Share of points whose predicted sign matches the label's."""
    with hookgrad.no_grad():
        return ((model(x) > 0) == (y > 0)).float().mean().item()


def train(steps: int, log_every: int, seed: int) -> float:
    """Full-batch SGD with momentum on MSE to the +-1 labels; returns the final accuracy."""
    hookgrad.manual_seed(seed)
    x_np, y_np = two_spirals(200, seed)
    x, y = hookgrad.from_numpy(x_np), hookgrad.from_numpy(y_np)
    model = build_model(hidden=64)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(model.parameters(), lr=0.03, momentum=0.9)
    print(
        f"two spirals: {len(x_np)} points; model: {sum(p.numel() for p in model.parameters())} parameters"
    )
    start = time.perf_counter()
    for step in range(1, steps + 1):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if step % log_every == 0 or step == steps:
            print(
                f"step {step:4d}/{steps}  loss {loss.item():.4f}  accuracy {accuracy(model, x, y):.3f}"
            )
    final = accuracy(model, x, y)
    print(f"final accuracy {final:.3f} after {steps} steps ({time.perf_counter() - start:.2f} s)")
    return final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps", type=int, default=200, help="training steps (default %(default)s)"
    )
    parser.add_argument(
        "--log-every", type=int, default=20, help="print a progress line every N steps"
    )
    parser.add_argument("--seed", type=int, default=0, help="data and weight-init seed")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.log_every < 1:
        parser.error("--steps and --log-every must be positive")
    train(args.steps, args.log_every, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
