"""What a scoped tap (``hookgrad.tap``) on one module costs per training step.

Columns per workload (S by default), each its own copy of the model from the same weights,
timed interleaved: the bare hookgrad step; the step with a plain forward hook and a plain full
backward hook on that module doing nothing (what any module hook costs: the engine leaves its
fast paths for hooked calls); the step inside ``hookgrad.tap(model, "2")`` (the second Linear,
forward and backward records, every step); the same with ``capture=True`` (host copies of each
record's tensors). A fresh tap is opened around each timed block, so its records never pile up
over the run. A cost is the median of the per-round differences to the bare step (with the
quartiles: the machine's load moves single rounds a lot). ``--engine torch`` times torch
models instead (the tap then uses the torch engine's module hooks).

    python benchmarks/tap_cost.py --workloads S --seconds 10
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from _harness import Column, describe_environment, markdown_table, measure, one_thread
from _workloads import WORKLOADS, build_model, framework_trainer, make_problem

import hookgrad

MODULE = "2"  # the second Linear of the workloads' Sequential


def _columns(lib: Any, name: str, seed: int) -> list[Column]:
    workload = WORKLOADS[name]
    problem = make_problem(workload, seed)
    columns = []
    for column, capture in (("bare", None), ("hooks", None), ("tap", False), ("tap capture", True)):
        model = build_model(lib, workload, problem)
        trainer = framework_trainer(lib, model, workload, problem)
        around: Any = None
        if column == "hooks":
            around = lambda module=model[int(MODULE)]: _plain_hooks(module)  # noqa: E731
        elif capture is not None:
            around = lambda model=model, capture=capture: hookgrad.tap(  # noqa: E731
                model, MODULE, capture=capture
            )
        columns.append(Column(column, trainer.step, around))
    return columns


@contextmanager
def _plain_hooks(module: Any) -> Iterator[None]:
    """A forward hook and a full backward hook on ``module`` that do nothing, while open."""
    forward = module.register_forward_hook(lambda *args: None)
    backward = module.register_full_backward_hook(lambda *args: None)
    try:
        yield
    finally:
        forward.remove()
        backward.remove()


def _cost(per_step: dict[str, list[float]], column: str) -> str:
    own = sorted((a - b) * 1e6 for a, b in zip(per_step[column], per_step["bare"]))
    low, _, high = statistics.quantiles(own, n=4)
    return f"{statistics.median(own):.0f} us ({low:.0f}-{high:.0f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="S")
    parser.add_argument("--engine", choices=("hookgrad", "torch"), default="hookgrad")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    lib = importlib.import_module(args.engine)
    rng = np.random.default_rng(args.seed)
    rows = []
    with one_thread():
        print("\n".join(describe_environment()))
        for name in args.workloads.split(","):
            print(f"timing {name} ...", file=sys.stderr, flush=True)
            t = measure(_columns(lib, name, args.seed), args.seconds, rng)
            rows.append(
                [
                    name,
                    f"{t.median_ms('bare') * 1e3:.0f} us",
                    _cost(t.per_step, "hooks"),
                    _cost(t.per_step, "tap"),
                    _cost(t.per_step, "tap capture"),
                    t.ratio("hooks", "bare"),
                    t.ratio("tap", "bare"),
                    t.ratio("tap capture", "bare"),
                ]
            )
    header = [
        "workload",
        "bare step",
        "hooks - bare",
        "tap - bare",
        "tap capture - bare",
        "hooks / bare",
        "tap / bare",
        "tap capture / bare",
    ]
    print(f"\n{args.engine}: a tap on module {MODULE!r} (forward and backward, every step)\n")
    print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
