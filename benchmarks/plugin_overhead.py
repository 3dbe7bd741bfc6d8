"""What the plugin bridge costs: step time with the bridge attached, hookgrad beside torch.

Columns per workload (S and D by default): the bare engine; hookgrad with a ``HookBridge``
attached but no plugin listening (``bridge``: it registers nothing, so the ratio must be noise);
hookgrad with one no-op plugin implementing the four module hookspecs on every module
(``noop_plugin``: four global hooks, one payload per hook call); torch with a global full
backward hook that calls one no-op pluggy implementation (``pluggy_bwd``, the reference of
``../shared/bench/baseline.md``). Each column trains its own copy of the model from the same
weights; global hooks exist only while their column's blocks run. Warnings run under the
default filters. Targets: ``bridge`` <= 1.02x everywhere (plugin runtime issue),
``noop_plugin`` <= 1.5x on S and <= 1.6x on D (pipeline-speed issue).

    python benchmarks/plugin_overhead.py --workloads S,D --seconds 10
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pluggy
from _overhead import Around, VariantBench, global_backward_hook

from hookgrad.hookspecs import PROJECT_NAME, hookimpl, specs
from hookgrad.runtime._bridge import HookBridge

# (engine, variant) -> {workload: the ratio to the bare engine it must stay below}
TARGETS = {
    ("hookgrad", "bridge"): {"S": 1.02, "D": 1.02},
    ("hookgrad", "noop_plugin"): {"S": 1.5, "D": 1.6},
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

    with global_backward_hook(torch, dispatch):
        yield


def _around(lib: ModuleType, variant: str) -> Around:
    if variant == "bridge":
        return lambda: HookBridge(_manager(), {})
    if variant == "noop_plugin":
        pm = _manager(NoOpPlugin())
        return lambda: HookBridge(pm, {})
    return lambda: _torch_pluggy_hook(lib)


BENCH = VariantBench(COLUMNS, _around, TARGETS)


def main(argv: list[str] | None = None) -> int:
    return BENCH.main(
        argv,
        __doc__.split("\n\n")[0],
        "Hooked / bare step time",
        "Targets (plugin runtime and pipeline-speed issues)",
    )


if __name__ == "__main__":
    sys.exit(main())
