"""Watch gradient flow with hooks, written exactly as for PyTorch.

A global full backward hook records the norm of every module's grad_output per step, a
forward hook counts dead ReLU units, and a tensor hook clamps the first layer's weight
gradient. At the end it prints one line per module: its mean gradient norm over the run.

    python examples/gradient_flow.py --steps 50
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import numpy as np

import hookgrad as torch
from hookgrad import nn


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((128, 8)).astype(np.float32))
    y = torch.tensor((rng.standard_normal((128, 1)) > 0).astype(np.float32))
    model = nn.Sequential(
        nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)
    )
    names = {module: name or "model" for name, module in model.named_modules()}

    norms: dict[str, list[float]] = defaultdict(list)
    dead: dict[str, float] = {}

    def record_norm(module, grad_input, grad_output):
        norms[names.get(module, type(module).__name__)].append(grad_output[0].norm().item())

    def count_dead(module, args, output):
        dead[names[module]] = (output == 0).float().mean().item()

    handle = nn.modules.module.register_module_full_backward_hook(record_norm)
    for module in model:
        if isinstance(module, nn.ReLU):
            module.register_forward_hook(count_dead)
    clipped = []
    model[0].weight.register_hook(
        lambda g: clipped.append(g.abs().max().item()) or g.clamp(-0.002, 0.002)
    )

    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.BCEWithLogitsLoss()
    with handle:
        for _ in range(args.steps):
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()

    print(f"final loss {loss.item():.4f} after {args.steps} steps")
    print(
        f"first-layer weight gradient: max |g| before clamping {max(clipped):.4f}, clamped to 0.002"
    )
    for name, values in norms.items():
        print(f"grad_output norm  {name:<18} mean {np.mean(values):.5f} over {len(values)} calls")
    for name, share in dead.items():
        print(f"dead ReLU units   {name:<18} {share:.1%} in the last step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
