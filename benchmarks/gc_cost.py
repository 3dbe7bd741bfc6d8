"""What Python's cyclic garbage collector takes of a training step, bare and with the pipeline.

hookgrad's graph, hook wrappers and payloads are Python objects: a step that keeps more than
700 of them alive at once (the collector's first threshold) sets off a young collection, and
the survivors it promotes set off full ones, which walk every object of the process. This
script trains S and D under the built-in pipeline of ``builtin_plugins.py`` (and bare), counts
the collections of each generation per step and the time spent in them (``gc.callbacks``,
wall clock), and gives their share of the step's time measured alongside.

    python benchmarks/gc_cost.py --workloads S,D --steps 1000
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from _harness import describe_environment, markdown_table, one_thread
from _workloads import WORKLOADS, build_model, framework_trainer, make_problem
from builtin_plugins import PIPELINE

import hookgrad


@contextmanager
def _collections() -> Iterator[dict[int, list[float]]]:
    """Per generation: [collections, seconds spent in them], while the block runs."""
    counts: dict[int, list[float]] = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
    started: dict[int, float] = {}

    def callback(phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]
        if phase == "start":
            started[generation] = time.perf_counter()
        else:
            counts[generation][0] += 1
            counts[generation][1] += time.perf_counter() - started[generation]

    gc.callbacks.append(callback)
    try:
        yield counts
    finally:
        gc.callbacks.remove(callback)


def _measure(name: str, pipeline: bool, steps: int) -> list[object]:
    workload = WORKLOADS[name]
    problem = make_problem(workload)
    step = framework_trainer(
        hookgrad, build_model(hookgrad, workload, problem), workload, problem
    ).step
    runtime = hookgrad.Runtime(PIPELINE, environ={}) if pipeline else None
    with runtime if runtime is not None else nullcontext():
        for _ in range(steps):  # warm up: records kept, names learnt
            step()
        with _collections() as counts:
            start = time.perf_counter()
            for _ in range(steps):
                step()
            elapsed = time.perf_counter() - start
    per_step = [
        f"{counts[g][0] / steps:.3f} / {counts[g][1] / steps * 1e6:.0f} us" for g in (0, 1, 2)
    ]
    in_gc = sum(seconds for _, seconds in counts.values())
    column = "pipeline" if pipeline else "bare"
    return [name, column, *per_step, f"{elapsed / steps * 1e3:.3f} ms", f"{in_gc / elapsed:.1%}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="S,D")
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)
    warnings.simplefilter("default")  # the default filters, as every benchmark here
    rows = []
    with one_thread():
        print("\n".join(describe_environment()))
        for name in args.workloads.split(","):
            print(f"timing {name} ...", file=sys.stderr, flush=True)
            for pipeline in (False, True):
                rows.append(_measure(name, pipeline, args.steps))
    headers = [
        "workload",
        "column",
        "gen 0 per step / time",
        "gen 1",
        "gen 2",
        "step",
        "share in GC",
    ]
    print("\nCollections per step and the time in them (wall clock)\n")
    print(markdown_table(headers, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
