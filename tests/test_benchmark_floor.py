"""The ``kernels`` column of benchmarks/builtin_plugins.py (docs/performance.md): the pipeline's
engine work by hand, with no runtime, trains exactly as the pipeline does, clip included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

SCRIPT = """
import numpy as np
import hookgrad
import builtin_plugins as bench
from _workloads import WORKLOADS, build_model, framework_trainer, make_problem

bench.PIPELINE["plugins"]["grad_clip"]["max_norm"] = 0.05  # below every step's norm
workload = WORKLOADS["S"]
problem = make_problem(workload)

def trained(variant):
    model = build_model(hookgrad, workload, problem)
    before_step = bench._kernels(hookgrad, variant, model)
    step = framework_trainer(hookgrad, model, workload, problem, before_step=before_step).step
    if variant == "pipeline":
        with hookgrad.Runtime(bench.PIPELINE, environ={}):
            for _ in range(4):
                step()
    else:
        for _ in range(4):
            step()
    return [p.detach().numpy().copy() for p in model.parameters()]

floor, piped, bare = trained("kernels"), trained("pipeline"), trained("")
print(all(np.array_equal(a, b) for a, b in zip(floor, piped, strict=True)))
print(max(float(np.abs(a - b).max()) for a, b in zip(floor, bare, strict=True)))
"""


def test_the_floor_column_trains_as_the_pipeline_does() -> None:
    run = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", SCRIPT],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    same_as_pipeline, away_from_bare = run.stdout.split()
    assert same_as_pipeline == "True"
    assert float(away_from_bare) > 1e-4  # the clip changed every update
