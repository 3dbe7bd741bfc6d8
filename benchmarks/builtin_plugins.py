"""What the built-in gradient pipeline costs: step time with plugins on, hookgrad beside torch.

Columns per workload (S and D by default): the bare engine; hookgrad with a runtime running
``nan_guard`` (its defaults: backward checks on every module call, parameter grads at the
step; action ``raise``), ``grad_stats`` (every step, all statistics, pre- and post-clip,
update ratio) and ``grad_clip`` (global norm) on all modules, with no sink (``pipeline``); the
same plus dynamic ``grad_scale`` (``pipeline+scale``); the pipeline's numpy work called by
hand on the hookgrad engine, with no runtime and no hook (``kernels``: the shared gradient
norms and their finiteness, the nine statistics before and, when the clip scaled the
gradients, after the clip, the clip, the weights' snapshot and the update-ratio norms; not
nan_guard's backward screen, which needs module hooks): the floor of this design, which the
pipeline's own overhead is measured against; torch with a global full backward hook
computing ``g.norm().item()`` for every grad_output (``norm_hook``, the reference of
``../shared/bench/baseline.md``: 2.7x on S, 3.3x on D). Each column trains its own copy of the
model from the same weights; a fresh runtime is started around each timed block, so no global
hook leaks into other columns. Timed under the default warning filters. Targets
(pipeline-speed issue): ``pipeline`` <= 1.8x on S and <= 1.4x on D; ``pipeline+scale`` at
most 0.2x above ``pipeline``.

    python benchmarks/builtin_plugins.py --workloads S,D --seconds 10
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from _harness import Timings
from _overhead import Around, Rows, VariantBench, global_backward_hook

import hookgrad
from hookgrad.engines import engine_of
from hookgrad.hookspecs import grad_norms

# (engine, variant) -> {workload: the ratio to the bare engine it must stay below}
TARGETS = {("hookgrad", "pipeline"): {"S": 1.8, "D": 1.4}}
SCALE_COSTS_AT_MOST = 0.2
"""``pipeline+scale`` / bare minus ``pipeline`` / bare, on every workload."""
COLUMNS = (
    ("hookgrad", "kernels"),
    ("hookgrad", "pipeline"),
    ("hookgrad", "pipeline+scale"),
    ("torch", "norm_hook"),
)
MAX_NORM = 1.0

PIPELINE = {
    "plugins": {
        "nan_guard": {"action": "raise"},
        "grad_stats": {"every_n_steps": 1, "summary": False},
        "grad_clip": {"mode": "norm", "max_norm": MAX_NORM},
    }
}
WITH_SCALE = {"plugins": {"grad_scale": {"mode": "dynamic"}, **PIPELINE["plugins"]}}


@contextlib.contextmanager
def _torch_norm_hook(torch: ModuleType) -> Iterator[None]:
    """torch's global full backward hook reading the norm of every grad_output."""

    def hook(module: Any, grad_input: Any, grad_output: Any) -> None:
        for g in grad_output:
            if g is not None:
                g.norm().item()

    with global_backward_hook(torch, hook):
        yield


def _kernels(lib: ModuleType, variant: str, model: Any) -> Callable[[], bool] | None:
    """The ``kernels`` column's work between backward and the step: what the pipeline's
    plugins ask the engine for at their settings here, in the same calls, and nothing else."""
    if variant != "kernels":
        return None
    max_norm = PIPELINE["plugins"]["grad_clip"]["max_norm"]
    params = list(model.parameters())
    engine = engine_of(params[0])
    assert engine is not None
    before: list[list[Any]] = []  # the weights before the last step

    def before_step() -> bool:
        if before:  # grad_stats' update ratio of the last step, whose weights are these
            engine.diff_norms(params, before.pop())
        grads = [p.grad for p in params]
        norms = grad_norms(grads)  # nan_guard's parameter screen; grad_clip's total norm
        if not all(map(math.isfinite, norms)):
            return False
        engine.grad_summaries(grads)  # grad_stats' pre-clip statistics
        total = engine.total_norm_of(grads, norms)
        if engine.clip_with_norm_(grads, max_norm, total) != 1.0:
            engine.grad_summaries(grads)  # post-clip statistics of changed gradients
        before.append(engine.snapshot(params))
        return True

    return before_step


def _around(lib: ModuleType, variant: str) -> Around | None:
    if variant == "kernels":
        return None
    if variant.startswith("pipeline"):
        config = WITH_SCALE if variant == "pipeline+scale" else PIPELINE
        return lambda: hookgrad.Runtime(config, environ={})
    return lambda: _torch_norm_hook(lib)


class _PipelineBench(VariantBench):
    """The columns' own targets, and the cost grad_scale adds to the pipeline."""

    def rows(self, name: str, t: Timings, engines: list[str]) -> tuple[Rows, Rows]:
        rows, verdicts = super().rows(name, t, engines)
        plain = t.ratio("hookgrad+pipeline", "hookgrad").median
        scaled = t.ratio("hookgrad+pipeline+scale", "hookgrad").median
        added = scaled - plain
        verdict = "PASS" if added <= SCALE_COSTS_AT_MOST else "FAIL"
        limit = f"<= +{SCALE_COSTS_AT_MOST:.2f}"
        verdicts.append([name, "grad_scale added", limit, f"{added:+.2f}x", verdict])
        floor = t.ratio("hookgrad+kernels", "hookgrad")
        target = TARGETS[("hookgrad", "pipeline")][name]
        where = "above the target" if floor.median > target else "below the target"
        verdicts.append([name, "kernels alone (the floor)", f"<= {target:.2f}", floor, where])
        return rows, verdicts


BENCH = _PipelineBench(COLUMNS, _around, TARGETS, _kernels)


def main(argv: list[str] | None = None) -> int:
    return BENCH.main(
        argv,
        __doc__.split("\n\n")[0],
        "Plugins on / bare step time",
        "Targets (pipeline-speed issue)",
    )


if __name__ == "__main__":
    sys.exit(main())
