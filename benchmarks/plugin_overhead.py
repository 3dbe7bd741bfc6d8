"""What the plugin bridge costs: step time with the bridge attached, hookgrad beside torch.

Columns per workload (S and D by default): the bare engine; hookgrad with a ``HookBridge``
attached but no plugin listening (``bridge``: it registers nothing, so the ratio must be noise);
hookgrad with one no-op plugin implementing the four module hookspecs on every module
(``noop_plugin``: four global hooks, one payload per hook call); torch with a global full
backward hook that calls one no-op pluggy implementation (``pluggy_bwd``, the reference of
``../shared/bench/baseline.md``). Each column trains its own copy of the model from the same
weights; global hooks exist only while their column's blocks run. Targets (plugin runtime
issue): ``bridge`` <= 1.02x everywhere, ``noop_plugin`` <= 1.5x on S.

    python benchmarks/plugin_overhead.py --workloads S,D --seconds 10
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pluggy
from _harness import Column, Timings
from _overhead import OverheadReport, overhead_main
from _workloads import Workload, build_model, framework_trainer, make_problem

from hookgrad.hookspecs import PROJECT_NAME, hookimpl, specs
from hookgrad.runtime._bridge import HookBridge

# (engine, variant) -> {workload: the ratio to the bare engine it must stay below}
TARGETS = {
    ("hookgrad", "bridge"): {"S": 1.02, "D": 1.02},
    ("hookgrad", "noop_plugin"): {"S": 1.5},
}
COLUMNS = (("hookgrad", "bridge"), ("hookgrad", "noop_plugin"), ("torch", "pluggy_bwd"))


class NoOpPlugin:
    """Implements the four module hookspecs and does nothing."""

    @hookimpl
    def hookgrad_forward_pre(self, event: Any) -> None:
        return None

    @hookimpl
    def hookgrad_forward(self, event: Any) -> None:
        return None

    @hookimpl
    def hookgrad_backward_pre(self, event: Any) -> None:
        return None

    @hookimpl
    def hookgrad_full_backward(self, event: Any) -> None:
        return None


def _manager(*plugins: object) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(specs)
    for i, plugin in enumerate(plugins):
        pm.register(plugin, name=f"plugin{i}")
    return pm


@contextlib.contextmanager
def _torch_pluggy_hook(torch: ModuleType) -> Iterator[None]:
    """torch's global full backward hook handing each call to one no-op pluggy impl."""
    hook = _manager(NoOpPlugin()).hook.hookgrad_full_backward

    def dispatch(module: Any, grad_input: Any, grad_output: Any) -> None:
        hook(event=(module, grad_input, grad_output))

    handle = torch.nn.modules.module.register_module_full_backward_hook(dispatch)
    try:
        yield
    finally:
        handle.remove()


def _columns(lib: ModuleType, name: str, workload: Workload, seed: int) -> list[Column]:
    problem = make_problem(workload, seed)
    variants = [v for engine, v in COLUMNS if engine == name]
    columns = []
    for variant in ("", *variants):
        model = build_model(lib, workload, problem)
        around: Callable[[], contextlib.AbstractContextManager[object]] | None = None
        if variant == "bridge":
            around = lambda: HookBridge(_manager(), {})  # noqa: E731
        elif variant == "noop_plugin":
            pm = _manager(NoOpPlugin())
            around = lambda pm=pm: HookBridge(pm, {})  # noqa: E731
        elif variant == "pluggy_bwd":
            around = lambda: _torch_pluggy_hook(lib)  # noqa: E731
        trainer = framework_trainer(lib, model, workload, problem)
        columns.append(Column(f"{name}+{variant}" if variant else name, trainer.step, around))
    return columns


def _rows(
    name: str, t: Timings, engines: list[str]
) -> tuple[list[list[object]], list[list[object]]]:
    rows: list[list[object]] = []
    verdicts: list[list[object]] = []
    for engine, variant in COLUMNS:
        if engine not in engines:
            continue
        r = t.ratio(f"{engine}+{variant}", engine)
        rows.append([name, engine, variant, f"{t.median_ms(engine):.3f} ms", r])
        limit = TARGETS.get((engine, variant), {}).get(name)
        if limit is not None:
            verdict = "PASS" if r.median <= limit else "FAIL"
            verdicts.append([name, f"{engine}+{variant}", f"<= {limit:.2f}", r, verdict])
    return rows, verdicts


def main(argv: list[str] | None = None) -> int:
    report = OverheadReport(
        "Hooked / bare step time",
        lambda engines: ["workload", "engine", "column", "bare step", "ratio"],
        "Targets (plugin runtime issue)",
        ["workload", "column", "target", "ratio", "verdict"],
    )
    return overhead_main(argv, __doc__.split("\n\n")[0], _columns, _rows, report)


if __name__ == "__main__":
    sys.exit(main())
