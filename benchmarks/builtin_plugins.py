"""What the built-in gradient pipeline costs: step time with plugins on, hookgrad beside torch.

Columns per workload (S and D by default): the bare engine; hookgrad with a runtime running
``nan_guard`` (backward checks on every module call, parameter grads at the step),
``grad_stats`` (every step, pre- and post-clip, update ratio) and ``grad_clip`` (global norm)
on all modules (``pipeline``); torch with a global full backward hook computing
``g.norm().item()`` for every grad_output (``norm_hook``, the reference of
``../shared/bench/baseline.md``: 2.7x on S, 3.3x on D). Each column trains its own copy of the
model from the same weights; a fresh runtime is started around each timed block, so no global
hook leaks into other columns. Targets (built-in plugins issue): ``pipeline`` <= 1.6x on S and
<= 2.0x on D.

    python benchmarks/builtin_plugins.py --workloads S,D --seconds 10
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from _overhead import Around, VariantBench, global_backward_hook

import hookgrad

# (engine, variant) -> {workload: the ratio to the bare engine it must stay below}
TARGETS = {("hookgrad", "pipeline"): {"S": 1.6, "D": 2.0}}
COLUMNS = (("hookgrad", "pipeline"), ("torch", "norm_hook"))

PIPELINE = {
    "plugins": {
        "nan_guard": {"action": "raise"},
        "grad_stats": {"every_n_steps": 1, "summary": False},
        "grad_clip": {"mode": "norm", "max_norm": 1.0},
    }
}


@contextlib.contextmanager
def _torch_norm_hook(torch: ModuleType) -> Iterator[None]:
    """torch's global full backward hook reading the norm of every grad_output."""

    def hook(module: Any, grad_input: Any, grad_output: Any) -> None:
        for g in grad_output:
            if g is not None:
                g.norm().item()

    with global_backward_hook(torch, hook):
        yield


def _around(lib: ModuleType, variant: str) -> Around:
    if variant == "pipeline":
        return lambda: hookgrad.Runtime(PIPELINE, environ={})
    return lambda: _torch_norm_hook(lib)


BENCH = VariantBench(COLUMNS, _around, TARGETS)


def main(argv: list[str] | None = None) -> int:
    return BENCH.main(
        argv,
        __doc__.split("\n\n")[0],
        "Plugins on / bare step time",
        "Targets (built-in plugins issue)",
    )


if __name__ == "__main__":
    sys.exit(main())
