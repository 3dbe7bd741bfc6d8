"""The shared driver of the overhead benchmarks: hooked columns as ratios to the bare engine.

A script supplies the columns of one engine on one workload and turns one workload's timings
into table rows and target verdicts; this module parses the common flags, times the
workloads with both engines interleaved (torch when installed) and prints the two tables.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from _harness import Column, Timings, describe_environment, markdown_table, measure, one_thread
from _workloads import WORKLOADS, Workload, build_model, framework_trainer, make_problem

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


# ------------------------------------------------------------------ (engine, variant) columns
Around = Callable[[], AbstractContextManager[object]]


@dataclass(frozen=True)
class VariantBench:
    """A benchmark whose columns are (engine, variant) pairs, each a ratio to its bare engine.

    ``around(lib, variant)`` gives the column's per-block context (None for none): where a
    variant installs its hooks or starts its runtime. ``targets[(engine, variant)][workload]``
    is the ratio that column must stay below. ``before_step(lib, variant, model)``, when
    given, is the trainer's hand-written work between backward and the step for a variant
    (None for none): a column that does a plugin's work without a runtime.
    """

    columns: tuple[tuple[str, str], ...]
    around: Callable[[ModuleType, str], Around | None]
    targets: dict[tuple[str, str], dict[str, float]]
    before_step: Callable[[ModuleType, str, Any], Callable[[], bool] | None] | None = None

    def make_columns(
        self, lib: ModuleType, name: str, workload: Workload, seed: int
    ) -> list[Column]:
        """The bare column of engine ``name`` and one per variant, each with its own model."""
        problem = make_problem(workload, seed)
        variants = [v for engine, v in self.columns if engine == name]
        columns = []
        for variant in ("", *variants):
            model = build_model(lib, workload, problem)
            around = self.around(lib, variant) if variant else None
            before_step = None
            if variant and self.before_step is not None:
                before_step = self.before_step(lib, variant, model)
            trainer = framework_trainer(lib, model, workload, problem, before_step=before_step)
            columns.append(Column(f"{name}+{variant}" if variant else name, trainer.step, around))
        return columns

    def rows(self, name: str, t: Timings, engines: list[str]) -> tuple[Rows, Rows]:
        """One row per (engine, variant) column, and a verdict row per target."""
        rows: Rows = []
        verdicts: Rows = []
        for engine, variant in self.columns:
            if engine not in engines:
                continue
            r = t.ratio(f"{engine}+{variant}", engine)
            rows.append([name, engine, variant, f"{t.median_ms(engine):.3f} ms", r])
            limit = self.targets.get((engine, variant), {}).get(name)
            if limit is not None:
                verdict = "PASS" if r.median <= limit else "FAIL"
                verdicts.append([name, f"{engine}+{variant}", f"<= {limit:.2f}", r, verdict])
        return rows, verdicts

    def main(self, argv: list[str] | None, description: str, title: str, targets_title: str) -> int:
        report = OverheadReport(
            title,
            lambda engines: ["workload", "engine", "column", "bare step", "ratio"],
            targets_title,
            ["workload", "column", "target", "ratio", "verdict"],
        )
        return overhead_main(argv, description, self.make_columns, self.rows, report)


@contextmanager
def global_backward_hook(lib: ModuleType, hook: Callable[..., Any]) -> Iterator[None]:
    """``hook`` as ``lib``'s global full backward hook for the duration of the block."""
    handle = lib.nn.modules.module.register_module_full_backward_hook(hook)
    try:
        yield
    finally:
        handle.remove()
