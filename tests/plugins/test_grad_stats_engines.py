"""grad_stats on torch tensors: the same hook events give the same records as on hookgrad's.

The plugin's hooks are driven with payloads built from torch tensors and from hookgrad tensors
of the same values (parameters, gradients with NaN/Inf and zeros, an in-place clip between
the pre- and post-clip records, a step that moves the weights, a vetoed step, a module call's
grad_output). The records must be equal: names, kinds, steps, keys in order, counts and
histograms exactly, the other numbers to float32 tolerance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import hookgrad
from hookgrad.engines import engine_named, grad_norms
from hookgrad.hookspecs import FullBackwardEvent, OptimizerStepPostEvent, OptimizerStepPreEvent
from hookgrad.plugins.grad_stats import STATS, GradStats
from hookgrad.testing import capture_events

torch = pytest.importorskip("torch")


def values() -> tuple[list[tuple[str, np.ndarray, np.ndarray | None]], np.ndarray]:
    """(name, weight, gradient) of a few layers, and a grad_output, all float32."""
    rng = np.random.default_rng(5)

    def draw(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    bad = draw(2, 3)
    bad[0, 1], bad[1, 2], bad[1, 0] = np.nan, -np.inf, 0.0
    params = [
        ("0.weight", draw(3, 4), draw(3, 4)),
        ("0.bias", draw(3), np.zeros(3, np.float32)),
        ("2.weight", draw(2, 3), bad),
        ("2.bias", draw(2), draw(2)),
        ("4.weight", draw(70, 80), draw(70, 80)),  # past the numpy side's batch size
        ("4.bias", np.zeros(70, np.float32), draw(70)),  # a zero weight: no update ratio
        ("5.weight", draw(2, 2), None),  # no gradient: no record
    ]
    return params, draw(5, 2)


def records_on(
    lib: ModuleType, after_each: Callable[[str], None] = lambda hook: None, **config: Any
) -> list[dict[str, Any]]:
    """The records of one grad_stats run on ``lib``'s tensors (see the module docstring);
    ``after_each(hook name)`` runs after each hook call; ``config`` overrides settings."""
    params, grad_output = values()
    named = []
    for name, weight, grad in params:
        p = lib.nn.Parameter(lib.tensor(weight))
        p.grad = None if grad is None else lib.tensor(grad)
        named.append((name, p))
    parameters = tuple(named)
    settings = {"summary": False, "histogram_bins": 6, "grad_output": True, **config}
    plugin = GradStats(GradStats.Config(**settings))
    optimizer = {"phase": "optimizer_step_pre", "optimizer_type": "SGD", "parameters": parameters}
    with capture_events(("grad_stats", plugin)):
        backward = {
            "module_name": "2",
            "module_type": "Linear",
            "call_index": 0,
            "step": 0,
            "phase": "backward",
            "grad_input": (None,),
            "grad_output": (lib.tensor(grad_output), None),
        }
        if settings["grad_output"]:
            plugin.hookgrad_full_backward(FullBackwardEvent.trusted(backward))
            after_each("full_backward")
        plugin.hookgrad_optimizer_step_pre(OptimizerStepPreEvent.trusted({"step": 0, **optimizer}))
        after_each("step_pre")
        with lib.no_grad():
            named[0][1].grad.mul_(0.5)  # clips in place: their post-clip records are recomputed
            lib.nn.utils.clip_grad_norm_([named[3][1]], max_norm=0.1)  # torch: a foreach op
            for _, p in named:
                if p.grad is not None:
                    p.sub_(0.1 * p.grad)  # NaN and -Inf reach 2.weight
        post = {**optimizer, "phase": "optimizer_step_post", "vetoed_by": None}
        plugin.hookgrad_optimizer_step_post(
            OptimizerStepPostEvent.trusted({"step": 0, **post, "skipped": False})
        )
        after_each("step_post")
        plugin.hookgrad_optimizer_step_post(  # step 1, vetoed before the statistics
            OptimizerStepPostEvent.trusted({"step": 1, **post, "skipped": True})
        )
        after_each("vetoed step_post")
    return list(plugin.records)


EXACT = ("min", "max", "max_abs", "zero_fraction", "counts", "edges")


def assert_same(mine: Any, reference: Any, where: str) -> None:
    """Equal structure; the EXACT keys and non-floats exactly, other floats to float32
    tolerance."""
    if isinstance(reference, Mapping):
        assert isinstance(mine, Mapping) and list(mine) == list(reference), where
        for key, value in reference.items():
            assert_same(mine[key], value, f"{where}.{key}")
    elif isinstance(reference, list) and not all(isinstance(v, float) for v in reference):
        assert isinstance(mine, list) and len(mine) == len(reference), where
        for i, (a, b) in enumerate(zip(mine, reference, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(reference, float) and not where.endswith(EXACT):
        assert mine == pytest.approx(reference, rel=2e-6, abs=1e-12), where
    else:
        assert mine == reference and type(mine) is type(reference), where


def test_torch_events_give_the_records_of_hookgrad_events() -> None:
    """Pre-clip, post-clip (two gradients clipped in place), update ratios, histograms, a vetoed
    step and a grad_output record: the same records from torch tensors as from hookgrad's."""
    want = records_on(hookgrad)
    got = records_on(torch)
    kinds = [(r["kind"], r["step"], r["module_name"], r["data"].get("stage")) for r in want]
    assert ("grad_output", 0, "2", None) in kinds and (
        "module_grad",
        1,
        "5",
        "post_clip",
    ) not in kinds
    assert len(kinds) == 1 + 2 * (6 + 3) + (6 + 3)
    assert_same(got, want, "records")
    weight_pre = want[1]["data"]
    assert weight_pre["param"] == "0.weight" and weight_pre["stage"] == "pre_clip"
    clipped = {r["data"]["param"]: r["data"] for r in want[10:16]}
    assert clipped["0.weight"]["norm"] == pytest.approx(weight_pre["norm"] / 2)
    assert clipped["2.bias"]["norm"] == pytest.approx(0.1, rel=1e-5)
    post = [r["data"] for r in want if r["kind"] == "param_grad" and r["step"] == 0][6:]
    ratios = {data["param"]: data["update_ratio"] for data in post}
    assert [name for name, ratio in ratios.items() if ratio is None] == ["2.weight", "4.bias"]


def test_a_sampled_step_costs_the_documented_host_syncs(torch_host_syncs: list[str]) -> None:
    """On torch, one sync per kind of number: grad_output 1; pre_clip 2 (summaries, histograms);
    post_clip 3 (the clipped gradient's summary, histograms, update norms); a vetoed step's
    post_clip 2 (no update ratio)."""
    syncs: dict[str, int] = {}

    def count(hook: str) -> None:
        syncs[hook] = len(torch_host_syncs) - sum(syncs.values())

    records_on(torch, count)
    assert syncs == {"full_backward": 1, "step_pre": 2, "step_post": 3, "vetoed step_post": 2}


NORMS_ONLY = {"stats": ["norm"], "histogram_bins": 0, "grad_output": False}


@pytest.mark.parametrize("lib", [hookgrad, torch], ids=["hookgrad", "torch"])
def test_norm_only_records_carry_the_full_records_norms(
    lib: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stats = ["norm"]: the same records with norm as the only statistic, equal to the full
    statistics' norms (over finite entries, 2.weight holding NaN/Inf too); a summary is
    computed only for a gradient whose shared norm is not finite."""
    full = records_on(lib, histogram_bins=0, grad_output=False)
    engine = engine_named("torch" if lib is torch else "hookgrad")
    summarised: list[int] = []
    real = engine.grad_summaries
    monkeypatch.setattr(
        type(engine), "grad_summaries", lambda self, ts: summarised.append(len(ts)) or real(ts)
    )
    norms = records_on(lib, **NORMS_ONLY)
    assert summarised == [1, 1, 1]  # 2.weight: pre_clip, post_clip, the vetoed post_clip
    assert len(norms) == len(full)
    for mine, theirs in zip(norms, full, strict=True):
        assert {k: mine[k] for k in ("kind", "step", "module_name")} == {
            k: theirs[k] for k in ("kind", "step", "module_name")
        }
        kept = [k for k in theirs["data"] if k not in STATS or k == "norm"]
        assert list(mine["data"]) == kept
        for key in kept:
            if key == "norm":
                assert mine["data"]["norm"] == pytest.approx(theirs["data"]["norm"], rel=1e-5)
            else:
                assert mine["data"][key] == theirs["data"][key], key


def test_stats_subset_filters_both_record_kinds() -> None:
    """stats = ["max_abs", "numel"]: param_grad and module_grad records carry just those."""
    records = records_on(hookgrad, stats=["max_abs", "numel"], histogram_bins=0)
    pre = [r["data"] for r in records if r["data"].get("stage") == "pre_clip"]
    assert {tuple(data) for data in pre} == {
        ("param", "stage", "max_abs", "numel"),
        ("stage", "max_abs", "numel"),
    }
    grad_output = next(r["data"] for r in records if r["kind"] == "grad_output")
    assert list(grad_output) == ["call_index", "max_abs", "numel"]


@pytest.mark.parametrize("lib", [hookgrad, torch], ids=["hookgrad", "torch"])
def test_pipeline_shares_one_norm_pass_per_gradient_version(
    lib: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nan_guard + grad_stats (norms) + grad_clip: the gradients are normed once per step
    (nan_guard's pass, reused by grad_stats and grad_clip); the clip carries their norms over
    (scaled by its coefficient), so the post-clip records need no second pass, and the carried
    norms are the clipped gradients' norms; no summary, no other norm kernel."""
    engine = engine_named("torch" if lib is torch else "hookgrad")
    calls: list[str] = []
    for name in ("grad_norms", "grad_summaries", "total_norms", "first_nonfinite"):
        real = getattr(engine, name)  # bound: a method or a function the class binds
        monkeypatch.setattr(
            type(engine),
            name,
            lambda self, *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k),
        )
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Linear(4, 1))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.1)
    plugins = {
        "nan_guard": {"check_backward": False},
        "grad_stats": {"stats": ["norm"], "update_ratio": False, "summary": False},
        "grad_clip": {"max_norm": 1e-3},
    }
    config = {"engine": "torch" if lib is torch else "hookgrad", "plugins": plugins}
    with hookgrad.Runtime(config, environ={}) as rt:
        rt.watch(model)
        for _ in range(3):
            optimizer.zero_grad()
            (model(lib.ones(2, 3)) ** 2).sum().backward()
            optimizer.step()
    assert calls == ["grad_norms"] * 3
    grads = [p.grad for p in model.parameters()]
    carried = grad_norms(grads)
    assert calls == ["grad_norms"] * 3  # served from the carried values
    exact = [float(np.linalg.norm(g.detach().numpy().astype(np.float64))) for g in grads]
    assert carried == pytest.approx(exact, rel=1e-6)
