"""What each ``[events] durability`` mode costs per step, on the demo workload.

The demo's MLP on two spirals, full batch, SGD with momentum, under a runtime with the plugins
of ``examples/hookgrad.toml`` (grad_scale, nan_guard, grad_stats every step, grad_clip): about
60 records a step. Columns: no event log (``no_log``), then the log with each durability mode,
every column training its own copy of the model from the same weights, interleaved and paired
(``_harness``). The cost of a mode is its ratio to ``buffered`` (64 KiB writes); the cost of
the log itself is ``buffered`` over ``no_log``. Target (reliability issue): the default mode
``step`` costs under 3% of a step, a ratio to ``buffered`` <= 1.03. ``fsync`` depends on the
disk: it is reported, not held to a target.

    python benchmarks/event_log_durability.py --seconds 10
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
from _harness import Column, describe_environment, markdown_table, measure, one_thread

import hookgrad
from hookgrad import optim
from hookgrad._demo import make_task

EXAMPLE_CONFIG = Path(__file__).resolve().parent.parent / "examples" / "hookgrad.toml"
MODES = ("buffered", "step", "fsync")
TARGET = 1.03  # step / buffered


def _column(name: str, events: dict[str, Any], plugins: dict[str, Any]) -> Column:
    """One step of the demo task under a runtime started around each timed block."""
    task = make_task("mlp", seed=0)
    optimizer = optim.SGD(task.model.parameters(), lr=task.lr, momentum=0.9)
    config = {"events": events, "plugins": plugins}

    def step() -> None:
        optimizer.zero_grad()
        task.loss_fn(task.model(task.x), task.y).backward()
        optimizer.step()

    return Column(name, step, lambda: hookgrad.Runtime(config, environ={}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    plugins = tomllib.loads(EXAMPLE_CONFIG.read_text(encoding="utf-8"))["plugins"]
    plugins["grad_stats"]["summary"] = False  # no per-layer table at each block's close
    with tempfile.TemporaryDirectory() as folder, one_thread():
        columns = [_column("no_log", {}, plugins)]
        for mode in MODES:
            events = {"jsonl": str(Path(folder) / f"{mode}.jsonl"), "durability": mode}
            columns.append(_column(mode, events, plugins))
        timings = measure(columns, args.seconds, np.random.default_rng(args.seed))
        log_bytes = (Path(folder) / "step.jsonl").stat().st_size
        print("\n".join(describe_environment()))
    print(f"{timings.rounds} rounds; other load {timings.other_load or 0:.0%}\n")
    rows = [["no_log", f"{timings.median_ms('no_log'):.3f} ms", "", ""]]
    for mode in MODES:
        rows.append(
            [
                mode,
                f"{timings.median_ms(mode):.3f} ms",
                timings.ratio(mode, "buffered"),
                timings.ratio(mode, "no_log"),
            ]
        )
    print(markdown_table(["durability", "step", "/ buffered", "/ no_log"], rows))
    ratio = timings.ratio("step", "buffered")
    verdict = "PASS" if ratio.median <= TARGET else "FAIL"
    print(f"\n(step log: {log_bytes / 1e6:.1f} MB written)")
    print(
        markdown_table(
            ["target", "ratio", "verdict"], [[f"step <= {TARGET}x buffered", ratio, verdict]]
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
