"""Train a small model with hookgrad, written exactly as for PyTorch, optionally under plugins.

The data set is generated in code (deterministic for a given ``--seed``), so the run needs no
download: two interleaved spirals for the MLP, noisy 8x8 digit glyphs for the CNN. Every
``--log-every`` steps it prints the full-batch loss and accuracy; at the end the final accuracy.
The training code is ``hookgrad._demo`` (also run by ``hookgrad demo``).

With ``--config FILE`` the same, unchanged training runs inside ``hookgrad.Runtime(FILE)``: the
config's plugins (e.g. gradient clipping and statistics) act on it from outside the loop.

    python examples/train_demo.py               # 200 steps
    python examples/train_demo.py --steps 60 --log-every 10 --model cnn
    python examples/train_demo.py --config examples/hookgrad.toml
"""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext

import hookgrad
from hookgrad._demo import MODELS, train


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps", type=int, default=200, help="training steps (default %(default)s)"
    )
    parser.add_argument(
        "--log-every", type=int, default=20, help="print a progress line every N steps"
    )
    parser.add_argument("--seed", type=int, default=0, help="data and weight-init seed")
    parser.add_argument("--model", choices=sorted(MODELS), default="mlp", help="mlp or cnn")
    parser.add_argument("--config", help="a hookgrad config whose plugins the run uses")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.log_every < 1:
        parser.error("--steps and --log-every must be positive")
    with hookgrad.Runtime(args.config) if args.config else nullcontext():
        train(args.steps, args.log_every, args.seed, model=args.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
