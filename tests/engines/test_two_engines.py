"""One config, both engines: the demo trained on hookgrad and on torch from the same weights
under ``examples/hookgrad.toml`` writes the same event records, NaN injection included."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from hookgrad._demo import NanInjection, make_task, run
from hookgrad.runtime import Runtime

pytest.importorskip("torch")

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "hookgrad.toml"
STEPS = 30
# float32 arithmetic in a different order (BLAS, reductions) drifts over training steps:
# compare values to this relative tolerance, counts and names exactly.
REL = 2e-3
ABS = 1e-6


def _records(engine: str, model: str, injection: NanInjection | None) -> list[dict[str, Any]]:
    """Every plugin record of a STEPS-step demo run on ``engine``, in order."""
    task = make_task(model, seed=1, engine=engine)
    overrides = {"engine": engine, "events": {"memory": True, "jsonl": None}}
    with Runtime(EXAMPLE_CONFIG, overrides=overrides, environ={}) as runtime:
        for _ in run(task, STEPS, 10, runtime=runtime, inject_nan=injection):
            pass
        assert runtime.memory is not None
        return [r for r in runtime.memory.records if "plugin" in r]


def _same(a: Any, b: Any, where: str) -> None:
    """``a`` equals ``b``: containers entry by entry, floats to REL/ABS, the rest exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            _same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
        assert len(a) == len(b), f"{where}: {len(a)} entries != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float | int):
        if math.isnan(a):
            assert math.isnan(b), f"{where}: {a!r} != {b!r}"
        else:
            assert b == pytest.approx(a, rel=REL, abs=ABS), f"{where}: {a!r} != {b!r}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


@pytest.mark.parametrize(
    ("model", "injection"),
    [("mlp", None), ("mlp", NanInjection(12, "2")), ("cnn", NanInjection(7, "3"))],
    ids=["mlp", "mlp-nan", "cnn-nan"],
)
def test_both_engines_write_the_same_records(model: str, injection: NanInjection | None) -> None:
    """Same plugins, same config, same weights: the records match one by one (plugin, kind,
    step, module name exactly; values to float32 drift tolerance)."""
    numpy_records = _records("hookgrad", model, injection)
    torch_records = _records("torch", model, injection)
    kinds = {(r["plugin"], r["kind"]) for r in numpy_records}
    assert {"grad_clip", "grad_scale", "grad_stats"} <= {p for p, _ in kinds}
    assert (("nan_guard", "nonfinite") in kinds) == (injection is not None)
    assert len(torch_records) == len(numpy_records)
    for i, (a, b) in enumerate(zip(numpy_records, torch_records)):
        _same(a, b, f"record {i} ({a['plugin']}/{a['kind']}, step {a['step']})")
