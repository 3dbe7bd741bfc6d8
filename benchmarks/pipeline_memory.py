"""Resident memory of a long run with the built-in pipeline on: it must not grow with the run.

Trains the D workload (32 Linear+Tanh layers, batch 16) under a runtime running nan_guard,
grad_stats (every step) and grad_clip, with no sink, so only what the runtime and the plugins
keep in memory counts. Resident memory (``VmRSS``) is read after 100 steps and after 10,000;
the target (pipeline-speed issue) is a difference under 1 MB.

    python benchmarks/pipeline_memory.py --steps 10000
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

from _harness import markdown_table, one_thread
from _workloads import WORKLOADS, build_model, framework_trainer, make_problem
from builtin_plugins import PIPELINE

import hookgrad

TARGET_MB = 1.0
FIRST = 100


def resident_mb() -> float:
    """The process's resident memory now, from /proc/self/status (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status: this benchmark needs Linux")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    args = parser.parse_args(argv)
    workload = WORKLOADS["D"]
    problem = make_problem(workload)
    trainer = framework_trainer(
        hookgrad, build_model(hookgrad, workload, problem), workload, problem
    )
    readings = []
    with one_thread(), hookgrad.Runtime(PIPELINE, environ={}):
        for step in range(1, args.steps + 1):
            trainer.step()
            if step in (FIRST, args.steps):
                gc.collect()
                readings.append((step, resident_mb()))
    (first, early), (last, late) = readings
    growth = late - early
    verdict = "PASS" if growth < TARGET_MB else "FAIL"
    print(
        markdown_table(["steps", "resident MB"], [[first, f"{early:.1f}"], [last, f"{late:.1f}"]])
    )
    print()
    print(
        markdown_table(
            ["target", "growth", "verdict"], [[f"< {TARGET_MB} MB", f"{growth:.2f} MB", verdict]]
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
