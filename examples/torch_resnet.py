"""Train a small ResNet-style CNN in plain PyTorch under hookgrad's plugins from a config file.

The training loop is ordinary torch code: ``model(x)``, ``loss.backward()``,
``optimizer.step()``. The only hookgrad line is ``with hookgrad.configure(CONFIG):``, which
runs the config's plugins (by default ``examples/hookgrad.toml``: loss scaling, the NaN guard,
gradient statistics, clipping) on the torch model. The blocks are torchvision's BasicBlock
shape, with ``ReLU(inplace=True)`` and ``out += identity``: in-place ops that torch's own module
backward hooks refuse, and that hookgrad's plugins must work with.

The data are noisy 8x8 digit glyphs generated in code (no download). ``--inject-nan STEP``
puts a NaN into the first block's gradient at that step, to show the guard skipping the step
and naming the module. At the end the script counts the event log's records per plugin and
names the modules nan_guard found producing non-finite gradients.

    python examples/torch_resnet.py                      # 60 steps
    python examples/torch_resnet.py --steps 100 --inject-nan 30
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import torch
from torch import nn

import hookgrad
from hookgrad._demo import glyph_digits
from hookgrad.runtime import read_events

CONFIG = Path(__file__).with_name("hookgrad.toml")


class BasicBlock(nn.Module):
    """conv-bn-relu-conv-bn, plus the input, then relu: all ReLUs in place."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class SmallResNet(nn.Module):
    def __init__(self, channels: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
        )
        self.layer1 = nn.Sequential(BasicBlock(channels), BasicBlock(channels))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.pool(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(out, 1))


def _nan_into_gradient(module: nn.Module, args: object, output: torch.Tensor) -> None:
    def poison(grad: torch.Tensor) -> torch.Tensor:
        grad = grad.clone()
        grad.view(-1)[0] = float("nan")
        return grad

    output.register_hook(poison)


def train(steps: int, log_every: int, seed: int, inject_nan: int | None) -> float:
    torch.manual_seed(seed)
    images, labels = glyph_digits(64, seed)
    x, y = torch.from_numpy(images), torch.from_numpy(labels)
    model = SmallResNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(1, steps + 1):
        optimizer.zero_grad()
        hook = None
        if step == inject_nan:
            hook = model.layer1[0].conv2.register_forward_hook(_nan_into_gradient)
        loss = loss_fn(model(x), y)
        if hook is not None:
            hook.remove()
        loss.backward()
        optimizer.step()
        if step % log_every == 0 or step == steps:
            with torch.no_grad():
                accuracy = (model(x).argmax(1) == y).float().mean().item()
            print(f"step {step:4d}/{steps}  loss {loss.item():.4f}  accuracy {accuracy:.3f}")
    return accuracy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="training steps")
    parser.add_argument("--log-every", type=int, default=20, help="progress line every N steps")
    parser.add_argument("--seed", type=int, default=0, help="data and weight-init seed")
    parser.add_argument("--config", type=Path, default=CONFIG, help="the hookgrad config")
    parser.add_argument("--inject-nan", type=int, metavar="STEP", help="a NaN at this step")
    args = parser.parse_args(argv)
    with hookgrad.configure(args.config) as runtime:
        train(args.steps, args.log_every, args.seed, args.inject_nan)
        log = runtime.config.event_log_path(Path.cwd())
    if log is not None and log.exists():
        records = [r for _, r in read_events(log) if "plugin" in r]
        counts = collections.Counter(f"{r['plugin']}/{r['kind']}" for r in records)
        print(f"event log {log}: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
        producers = {
            r["module_name"]: r["step"]
            for r in records
            if r["kind"] == "nonfinite" and r["data"]["role"] == "producer"
        }
        for module, step in producers.items():
            print(f"nan_guard: module {module!r} produced a non-finite gradient at step {step}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
