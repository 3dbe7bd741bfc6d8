"""What nan_guard itself costs per training step, apart from the module-hook machinery it needs.

Columns per workload (S and D by default), each its own copy of the model from the same
weights, timed interleaved: the bare hookgrad step; a runtime with ``noop``, a plugin that
implements nan_guard's hooks (full backward, backward begin and end, optimizer step pre at
stage GUARD) and does nothing in them, so it pays the dispatch alone; a runtime with
``nan_guard`` at its defaults (action "raise", backward and parameter checks). nan_guard's own
cost is its step time minus noop's, the median of the per-round differences (with the
quartiles: the machine's load moves single rounds a lot).

    python benchmarks/nan_guard_cost.py --workloads S,D --seconds 10
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np
from _harness import Column, describe_environment, markdown_table, measure, one_thread
from _workloads import WORKLOADS, build_model, framework_trainer, make_problem

import hookgrad
from hookgrad.hookspecs import (
    BackwardBeginEvent,
    BackwardEndEvent,
    FullBackwardEvent,
    OptimizerStepPreEvent,
    Stage,
    hookimpl,
    stage,
)


class NoOp:
    """nan_guard's hook implementations at its defaults, doing nothing."""

    @hookimpl
    def hookgrad_full_backward(self, event: FullBackwardEvent) -> None:
        pass

    @hookimpl
    def hookgrad_backward_begin(self, event: BackwardBeginEvent) -> None:
        pass

    @hookimpl
    def hookgrad_backward_end(self, event: BackwardEndEvent) -> None:
        pass

    @hookimpl(tryfirst=True)
    @stage(Stage.GUARD)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        pass


def _noop_runtime() -> hookgrad.Runtime:
    runtime = hookgrad.Runtime({}, environ={})
    runtime.register(NoOp(), name="noop")
    return runtime


def _guard_runtime() -> hookgrad.Runtime:
    return hookgrad.Runtime({"plugins": {"nan_guard": {}}}, environ={})


def _columns(name: str, seed: int) -> list[Column]:
    workload = WORKLOADS[name]
    problem = make_problem(workload, seed)
    columns = []
    for column, around in (("bare", None), ("noop", _noop_runtime), ("nan_guard", _guard_runtime)):
        trainer = framework_trainer(
            hookgrad, build_model(hookgrad, workload, problem), workload, problem
        )
        columns.append(Column(column, trainer.step, around))
    return columns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="S,D")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = []
    with one_thread():
        print("\n".join(describe_environment()))
        for name in args.workloads.split(","):
            print(f"timing {name} ...", file=sys.stderr, flush=True)
            t = measure(_columns(name, args.seed), args.seconds, rng)
            own = sorted((a - b) * 1e6 for a, b in zip(t.per_step["nan_guard"], t.per_step["noop"]))
            quartiles = statistics.quantiles(own, n=4)
            rows.append(
                [
                    name,
                    f"{t.median_ms('bare') * 1e3:.0f} us",
                    f"{t.median_ms('noop') * 1e3:.0f} us",
                    f"{t.median_ms('nan_guard') * 1e3:.0f} us",
                    f"{statistics.median(own):.0f} us ({quartiles[0]:.0f}-{quartiles[2]:.0f})",
                    t.ratio("nan_guard", "bare"),
                ]
            )
    header = ["workload", "bare", "noop", "nan_guard", "nan_guard - noop", "nan_guard / bare"]
    print("\nStep times (medians over rounds) and nan_guard's own cost per step\n")
    print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
