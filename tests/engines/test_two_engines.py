"""One config, both engines: the demo trained on hookgrad and on torch from the same weights
under ``examples/hookgrad.toml`` writes the same event records, NaN injection included; so does
the third-party plugin of ``examples/third_party_plugin``, installed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from hookgrad._demo import NanInjection, make_task, run
from hookgrad.runtime import PluginCatalog, Runtime

pytest.importorskip("torch")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_CONFIG = EXAMPLES / "hookgrad.toml"
STEPS = 30
# float32 arithmetic in a different order (BLAS, reductions) drifts over training steps:
# compare values to this relative tolerance, counts and names exactly.
REL = 2e-3
ABS = 1e-6


def _records(
    engine: str,
    model: str,
    injection: NanInjection | None,
    config: Path = EXAMPLE_CONFIG,
) -> list[dict[str, Any]]:
    """Every plugin record of a STEPS-step demo run on ``engine`` under ``config``, in order
    (plugins from a fresh scan of the installed distributions)."""
    task = make_task(model, seed=1, engine=engine)
    overrides = {"engine": engine, "events": {"memory": True, "jsonl": None}}
    catalog = PluginCatalog()
    with Runtime(config, overrides=overrides, environ={}, catalog=catalog) as runtime:
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


def test_an_installed_third_party_plugin_writes_the_same_records_on_torch(
    install_distribution: Any, tmp_path: Path
) -> None:
    """examples/third_party_plugin's gradnorm, installed as a distribution and activated by a
    [plugins.gradnorm] table added to examples/hookgrad.toml, unchanged: on the torch twin of
    the demo MLP (same weights, NaN injection included) it writes the records it writes on the
    hookgrad model."""
    source = EXAMPLES / "third_party_plugin" / "src" / "hookgrad_gradnorm" / "__init__.py"
    install_distribution(
        "hookgrad-gradnorm-example",
        "0.1.0",
        {"gradnorm": "hookgrad_gradnorm:GradNormLogger"},
        {"hookgrad_gradnorm/__init__.py": source.read_text(encoding="utf-8")},
    )
    config = tmp_path / "hookgrad.toml"
    gradnorm = "\n[plugins.gradnorm]\nevery_n_steps = 3\n"
    config.write_text(EXAMPLE_CONFIG.read_text(encoding="utf-8") + gradnorm, encoding="utf-8")
    injection = NanInjection(13, "2")  # runtime step 12
    numpy_records, torch_records = (
        [r for r in _records(engine, "mlp", injection, config) if r["plugin"] == "gradnorm"]
        for engine in ("hookgrad", "torch")
    )
    steps = {r["step"] for r in numpy_records}
    assert steps == set(range(0, STEPS, 3))
    assert {r["module_name"] for r in numpy_records} == {"", "0", "1", "2", "3", "4"}
    assert any(math.isnan(r["data"]["grad_output_norm"]) for r in numpy_records)
    assert len(torch_records) == len(numpy_records)
    for i, (a, b) in enumerate(zip(numpy_records, torch_records)):
        _same(a, b, f"record {i} ({a['module_name']!r}, step {a['step']})")
