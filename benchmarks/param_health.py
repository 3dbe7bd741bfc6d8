"""What ``param_health`` costs per training step, on both engines.

Columns per workload (S and D by default), each its own copy of the model from the same
weights, timed interleaved: the bare step; a runtime with ``noop``, a plugin implementing
param_health's two step hooks and doing nothing in them (what the runtime's step events cost
any plugin at the step); a runtime with ``param_health`` at its defaults (every step: a copy of
the weights, their update norms, one zero-row pass per weight gradient). Target (issue 17):
param_health at its defaults under 10% of a bare step, measured as its step time minus noop's.

    python benchmarks/param_health.py --workloads S,D --seconds 10
"""

from __future__ import annotations

import sys
from types import ModuleType

from _harness import Timings
from _overhead import Around, Rows, VariantBench

import hookgrad
from hookgrad.hookspecs import OptimizerStepPostEvent, OptimizerStepPreEvent, hookimpl

COLUMNS = (
    ("hookgrad", "noop"),
    ("hookgrad", "param_health"),
    ("torch", "noop"),
    ("torch", "param_health"),
)
OWN_COST_AT_MOST = 0.10
"""param_health's step time minus noop's, over the bare step, on every workload and engine."""


class NoOp:
    """param_health's step hooks, doing nothing."""

    @hookimpl(trylast=True)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        pass

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: OptimizerStepPostEvent) -> None:
        pass


def _noop_runtime() -> hookgrad.Runtime:
    runtime = hookgrad.Runtime({}, environ={})
    runtime.register(NoOp(), name="noop")
    return runtime


def _around(lib: ModuleType, variant: str) -> Around:
    if variant == "noop":
        return _noop_runtime
    return lambda: hookgrad.Runtime({"plugins": {"param_health": {}}}, environ={})


class _HealthBench(VariantBench):
    """The columns' ratios, and param_health's own cost (its column minus noop's)."""

    def rows(self, name: str, t: Timings, engines: list[str]) -> tuple[Rows, Rows]:
        rows, verdicts = super().rows(name, t, engines)
        for engine in engines:
            noop = t.ratio(f"{engine}+noop", engine).median
            health = t.ratio(f"{engine}+param_health", engine).median
            own = health - noop
            verdict = "PASS" if own <= OWN_COST_AT_MOST else "FAIL"
            limit = f"<= +{OWN_COST_AT_MOST:.2f}"
            verdicts.append([name, f"{engine}: param_health own", limit, f"{own:+.3f}x", verdict])
        return rows, verdicts


BENCH = _HealthBench(COLUMNS, _around, {})


def main(argv: list[str] | None = None) -> int:
    return BENCH.main(
        argv,
        __doc__.split("\n\n")[0],
        "Plugins on / bare step time",
        "Target (issue 17: param_health at its defaults under 10% of a bare step)",
    )


if __name__ == "__main__":
    sys.exit(main())
