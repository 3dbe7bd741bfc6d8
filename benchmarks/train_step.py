"""Time one training step in hookgrad, torch eager (CPU) and hand-written numpy, interleaved.

The targets come from the engine issue: hookgrad faster than torch eager on every workload, and
within 1.1x of the hand-written numpy floor on L. Trust the ratios (paired, same process, same
round), not the milliseconds: the host's speed drifts. Say which OPENBLAS_* setting a number ran
under; the header prints it.

    python benchmarks/train_step.py                      # all workloads, ~10 s each
    python benchmarks/train_step.py --workloads S,D --seconds 3
    python benchmarks/train_step.py --check              # same update in every column?
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

import numpy as np
from _harness import Column, Timings, describe_environment, markdown_table, measure, one_thread
from _workloads import (
    WORKLOADS,
    Trainer,
    Workload,
    build_model,
    framework_trainer,
    make_problem,
    numpy_trainer,
)

import hookgrad
import hookgrad.nn
import hookgrad.optim

CHECK_RTOL = 1e-5
PAIRS = (("hookgrad", "torch"), ("hookgrad", "numpy"), ("torch", "numpy"))
# (numerator, denominator, the median ratio must be below this, on these workloads)
TARGETS = (("hookgrad", "torch", 1.0, "SMLD"), ("hookgrad", "numpy", 1.1, "L"))


def _optional_torch() -> ModuleType | None:
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


def _trainers(workload: Workload, torch: ModuleType | None, seed: int) -> dict[str, Trainer]:
    """Every column's trainer, each from the same initial weights and batch."""
    problem = make_problem(workload, seed)
    libs = {"hookgrad": hookgrad, "torch": torch}
    trainers = {
        name: framework_trainer(lib, build_model(lib, workload, problem), workload, problem)
        for name, lib in libs.items()
        if lib is not None
    }
    trainers["numpy"] = numpy_trainer(workload, problem)
    return trainers


def _compare(got: list[np.ndarray], expected: list[np.ndarray]) -> float:
    """Largest parameter error, relative to the largest parameter of the same tensor."""
    return max(float(np.max(np.abs(g - e)) / np.max(np.abs(e))) for g, e in zip(got, expected))


def check(workloads: list[Workload], torch: ModuleType | None, seed: int) -> bool:
    """Run one step per column; parameters must match the reference within CHECK_RTOL."""
    reference = "torch" if torch is not None else "numpy"
    rows, ok = [], True
    for workload in workloads:
        trainers = _trainers(workload, torch, seed)
        before = trainers[reference].parameters()
        for trainer in trainers.values():
            trainer.step()
        expected = trainers[reference].parameters()
        update = max(float(np.max(np.abs(e - b))) for e, b in zip(expected, before))
        for name, trainer in trainers.items():
            if name == reference:
                continue
            got = trainer.parameters()
            error = _compare(got, expected)
            abs_error = max(float(np.max(np.abs(g - e))) for g, e in zip(got, expected))
            passed = error <= CHECK_RTOL and update > 0
            ok &= passed
            verdict = "PASS" if passed else "FAIL"
            rows.append([workload.name, f"{name} vs {reference}", f"{error:.1e}"])
            rows[-1] += [f"{abs_error / update:.1e}", verdict]
    header = ["workload", "columns", "max param error / max param"]
    header += ["max param error / largest update", f"rtol {CHECK_RTOL:g}"]
    print(markdown_table(header, rows))
    return ok


def _tables(results: dict[str, Timings], columns: list[str]) -> tuple[str, str]:
    """The step-time table and the targets table."""
    pairs = [(a, b) for a, b in PAIRS if a in columns and b in columns]
    header = ["workload", "rounds", "other load", *(f"{c} ms" for c in columns)]
    header += [f"{a} / {b}" for a, b in pairs]
    rows, target_rows = [], []
    for name, t in results.items():
        load = "n/a" if t.other_load is None else f"{t.other_load:.1%}"
        rows.append([name, t.rounds, load, *(f"{t.median_ms(c):.4g}" for c in columns)])
        rows[-1] += [t.ratio(a, b) for a, b in pairs]
        for a, b, limit, names in TARGETS:
            if name not in names:
                continue
            target = f"{a} / {b} < {limit:.2f}"
            if (a, b) not in pairs:
                target_rows.append([name, target, "n/a", f"SKIPPED ({b} not installed)"])
                continue
            r = t.ratio(a, b)
            target_rows.append([name, target, r, "PASS" if r.median < limit else "FAIL"])
    return (
        markdown_table(header, rows),
        markdown_table(["workload", "target", "measured", "verdict"], target_rows),
    )


def bench(workloads: list[Workload], torch: ModuleType | None, seconds: float, seed: int) -> None:
    """Time every workload and print the step-time table and the issue's targets."""
    rng = np.random.default_rng(seed)
    results: dict[str, Timings] = {}
    columns: list[str] = []
    for workload in workloads:
        trainers = _trainers(workload, torch, seed)
        columns = list(trainers)
        print(f"timing {workload.name} ({workload.describe()}) ...", file=sys.stderr, flush=True)
        steps = [Column(name, trainer.step) for name, trainer in trainers.items()]
        results[workload.name] = measure(steps, seconds, rng)
    times, targets = _tables(results, columns)
    print("\nMedian ms per step; ratios: median of per-round paired ratios (95% CI)\n")
    print(times)
    print("\nTargets (engine issue)\n")
    print(targets)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workloads", default=",".join(WORKLOADS), help="comma-separated subset of %(default)s"
    )
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="time per workload (default %(default)s)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="verify every column computes the same update, then exit",
    )
    parser.add_argument("--seed", type=int, default=0, help="weights, batch and column order")
    args = parser.parse_args(argv)
    unknown = set(args.workloads.split(",")) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workload(s) {sorted(unknown)}; choose from {list(WORKLOADS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    workloads = [WORKLOADS[name] for name in args.workloads.split(",")]
    torch = _optional_torch()
    with one_thread():
        print("\n".join(describe_environment()))
        if torch is None:
            print("torch is not installed: its column is skipped (pip install -e '.[test]')")
        if args.check:
            return 0 if check(workloads, torch, args.seed) else 1
        bench(workloads, torch, args.seconds, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
