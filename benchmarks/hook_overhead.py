"""What no-op hooks cost: hooked / unhooked step time, hookgrad beside torch, in one run.

Columns per workload (S and D by default): the bare engine, then the same engine with
(a) a no-op global full backward hook, (b) no-op global forward and forward pre-hooks,
(c) a no-op tensor hook on every parameter. Each hooked column trains its own copy of the
model from the same weights; global hooks are registered only while their column's blocks run.
Warnings run under the default filters: with (a), both engines warn twice per step that a
module's inputs need no grad (SEMANTICS B-9), and that cost counts.
Targets: hookgrad (a) <= 1.25x on S and <= 1.3x on D (pipeline-speed issue), (b) and (c)
<= 1.05x (hooks issue).

    python benchmarks/hook_overhead.py --workloads S,D --seconds 10
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from _harness import Column, Timings
from _overhead import OverheadReport, overhead_main
from _workloads import Workload, build_model, framework_trainer, make_problem

VARIANTS = ("bwd_hook", "fwd_hooks", "tensor_hooks")
# variant -> {workload: the hooked/unhooked ratio hookgrad must stay below}
TARGETS = {
    "bwd_hook": {"S": 1.25, "D": 1.3},
    "fwd_hooks": {"S": 1.05, "D": 1.05},
    "tensor_hooks": {"S": 1.05, "D": 1.05},
}


def _noop(*args: Any) -> None:
    return None


@contextlib.contextmanager
def _global_hooks(lib: ModuleType, variant: str) -> Iterator[None]:
    registry = lib.nn.modules.module
    if variant == "bwd_hook":
        handles = [registry.register_module_full_backward_hook(_noop)]
    else:
        handles = [
            registry.register_module_forward_pre_hook(_noop),
            registry.register_module_forward_hook(_noop),
        ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _columns(lib: ModuleType, name: str, workload: Workload, seed: int) -> list[Column]:
    problem = make_problem(workload, seed)
    columns = []
    for variant in ("", *VARIANTS):
        model = build_model(lib, workload, problem)
        around: Callable[[], contextlib.AbstractContextManager[object]] | None = None
        if variant == "tensor_hooks":
            for p in model.parameters():
                p.register_hook(_noop)
        elif variant:
            around = lambda v=variant: _global_hooks(lib, v)  # noqa: E731
        trainer = framework_trainer(lib, model, workload, problem)
        label = name if not variant else f"{name}+{variant}"
        columns.append(Column(label, trainer.step, around))
    return columns


def _rows(
    name: str, t: Timings, engines: list[str]
) -> tuple[list[list[object]], list[list[object]]]:
    rows, verdicts = [], []
    for variant in VARIANTS:
        row: list[object] = [name, variant]
        for engine in engines:
            row.append(t.ratio(f"{engine}+{variant}", engine))
        rows.append(row)
        limit = TARGETS[variant].get(name)
        if limit is not None:
            r = t.ratio(f"hookgrad+{variant}", "hookgrad")
            verdicts.append(
                [name, variant, f"<= {limit:.2f}", r, "PASS" if r.median <= limit else "FAIL"]
            )
    return rows, verdicts


def main(argv: list[str] | None = None) -> int:
    report = OverheadReport(
        "Hooked / unhooked step time",
        lambda engines: ["workload", "hooks", *(f"{e} ratio" for e in engines)],
        "Targets (hooks and pipeline-speed issues)",
        ["workload", "hooks", "target", "hookgrad", "verdict"],
    )
    return overhead_main(argv, __doc__.split("\n\n")[0], _columns, _rows, report)


if __name__ == "__main__":
    sys.exit(main())
