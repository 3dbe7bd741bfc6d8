"""What spike_guard costs per step at its defaults, with and without snapshots, on both engines.

Columns per workload (S and D by default), each a ratio to its own bare engine: a runtime
running ``spike_guard`` at its defaults (``action = "skip"``: the two signals, no snapshot;
``spike_guard``) and with ``action = "rollback"`` (a snapshot of the parameters and the
optimizer's state after every 50th good step; ``spike_guard+rollback``), on hookgrad's engine
and on torch's. Each column trains its own copy of the model from the same weights; a fresh
runtime is started around each timed block. Timed under the default warning filters. Target
(the issue "beyond the anchors"): each under 1.10x of a bare step.

    python benchmarks/guard_plugins.py --workloads S,D --seconds 10
"""

from __future__ import annotations

import sys
from types import ModuleType

from _overhead import Around, VariantBench

import hookgrad

VARIANTS = {
    "spike_guard": {"plugins": {"spike_guard": {}}},
    "spike_guard+rollback": {"plugins": {"spike_guard": {"action": "rollback"}}},
}
COLUMNS = tuple((engine, variant) for engine in ("hookgrad", "torch") for variant in VARIANTS)
TARGETS = {column: {"S": 1.10, "D": 1.10} for column in COLUMNS}


def _around(lib: ModuleType, variant: str) -> Around:
    config = VARIANTS[variant]
    return lambda: hookgrad.Runtime(config, environ={})


BENCH = VariantBench(COLUMNS, _around, TARGETS)


def main(argv: list[str] | None = None) -> int:
    return BENCH.main(
        argv,
        __doc__.split("\n\n")[0],
        "Plugin on / bare step time",
        "Targets (beyond-the-anchors issue)",
    )


if __name__ == "__main__":
    sys.exit(main())
