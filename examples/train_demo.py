"""Train a small MLP on two interleaved spirals with hookgrad, written exactly as for PyTorch.

The data set is generated in code (deterministic for a given ``--seed``), so the run needs no
download. Every ``--log-every`` steps it prints the full-batch loss and accuracy; at the end the
final accuracy. The training code is ``hookgrad._demo`` (also run by ``hookgrad demo``).

    python examples/train_demo.py               # 200 steps
    python examples/train_demo.py --steps 60 --log-every 10
"""

from __future__ import annotations

import argparse
import sys

from hookgrad._demo import train


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
