"""The shared driver of the overhead benchmarks: hooked columns as ratios to the bare engine.

A script supplies the columns of one engine on one workload and turns one workload's timings
into table rows and target verdicts; this module parses the common flags, times the
workloads with both engines interleaved (torch when installed) and prints the two tables.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np
from _harness import Column, Timings, describe_environment, markdown_table, measure, one_thread
from _workloads import WORKLOADS, Workload

import hookgrad

Rows = list[list[object]]


@dataclass(frozen=True)
class OverheadReport:
    """How a script lays out its results: table titles and headers (given the engines)."""

    title: str
    headers: Callable[[list[str]], Sequence[str]]
    targets_title: str
    target_headers: Sequence[str]


def optional_torch() -> ModuleType | None:
    """torch pinned to one thread, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


def overhead_main(
    argv: list[str] | None,
    description: str,
    columns_for: Callable[[ModuleType, str, Workload, int], list[Column]],
    rows_for: Callable[[str, Timings, list[str]], tuple[Rows, Rows]],
    report: OverheadReport,
) -> int:
    """Parse ``--workloads/--seconds/--seed``, time every workload, print rows and verdicts."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--workloads", default="S,D")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch = optional_torch()
    engines = ["hookgrad"] + (["torch"] if torch is not None else [])
    rng = np.random.default_rng(args.seed)
    rows: Rows = []
    verdicts: Rows = []
    # Both engines warn that the first layer's input needs no grad (SEMANTICS B-9).
    warnings.simplefilter("ignore", UserWarning)
    with one_thread():
        print("\n".join(describe_environment()))
        for name in args.workloads.split(","):
            workload = WORKLOADS[name]
            columns = columns_for(hookgrad, "hookgrad", workload, args.seed)
            if torch is not None:
                columns += columns_for(torch, "torch", workload, args.seed)
            print(f"timing {name} ...", file=sys.stderr, flush=True)
            timings = measure(columns, args.seconds, rng)
            r, v = rows_for(name, timings, engines)
            rows += r
            verdicts += v
    print(f"\n{report.title}, paired per round (95% CI)\n")
    print(markdown_table(list(report.headers(engines)), rows))
    print(f"\n{report.targets_title}\n")
    print(markdown_table(list(report.target_headers), verdicts))
    return 0
