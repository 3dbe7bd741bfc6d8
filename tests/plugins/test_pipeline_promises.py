"""The optimizer-step pipeline the plugin pages promise, with all five built-ins on at once.

grad_clip.md, grad_stats.md, event_log.md, nan_guard.md and grad_scale.md each promise one
fixed order, whatever the order of the config tables: unscale (grad_scale) -> guard
(nan_guard) -> pre-clip statistics (grad_stats) -> event_log's step_pre record -> clip
(grad_clip) -> step -> post-clip statistics and event_log's step_post record. The expected
norms come from the same model's gradients computed without any runtime.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import hookgrad

nn = hookgrad.nn
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")
TABLES: dict[str, dict[str, Any]] = {
    "grad_scale": {"init_scale": 1024.0},
    "nan_guard": {},
    "grad_stats": {"summary": False},
    "event_log": {"hooks": ["optimizer_step_pre", "optimizer_step_post"]},
    "grad_clip": {"max_norm": 0.01},
}


def _model() -> nn.Sequential:
    hookgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))


def _plain_grads(x: Any) -> dict[str, np.ndarray]:
    model = _model()
    (model(x) ** 2).sum().backward()
    return {n: p.grad.numpy().astype(np.float64) for n, p in model.named_parameters()}


@pytest.mark.parametrize("reverse", [False, True], ids=["doc_order", "reversed_tables"])
def test_every_stage_sees_the_gradients_its_page_promises(reverse: bool) -> None:
    """Stats and event_log see unscaled, unclipped grads at step_pre, clipped ones at post."""
    x = hookgrad.randn(8, 3)
    plain = _plain_grads(x)
    total = math.sqrt(sum(float((g**2).sum()) for g in plain.values()))
    factor = min(0.01 / (total + 1e-6), 1.0)
    model = _model()
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.0)
    names = list(TABLES)[::-1] if reverse else list(TABLES)
    config = {"plugins": {n: TABLES[n] for n in names}, "events": {"memory": True}}
    with hookgrad.Runtime(config, environ={}) as rt:
        (model(x) ** 2).sum().backward()
        optimizer.step()
    records = rt.memory.records

    def of(plugin: str, kind: str) -> list[dict[str, Any]]:
        return [r for r in records if r.get("plugin") == plugin and r.get("kind") == kind]

    stats = {(r["data"]["param"], r["data"]["stage"]): r for r in of("grad_stats", "param_grad")}
    for name, g in plain.items():
        norm = float(np.linalg.norm(g))
        assert stats[name, "pre_clip"]["data"]["norm"] == pytest.approx(norm, rel=1e-5)
        post = stats[name, "post_clip"]["data"]["norm"]
        assert post == pytest.approx(norm * factor, rel=1e-4)
    pre_event, post_event = of("event_log", "event")
    for name, g in plain.items():
        norm = float(np.linalg.norm(g))
        assert pre_event["parameters"][name]["grad"]["norm"] == pytest.approx(norm, rel=1e-5)
        clipped = post_event["parameters"][name]["grad"]["norm"]
        assert clipped == pytest.approx(norm * factor, rel=1e-4)
    [clip] = of("grad_clip", "clip")
    assert clip["data"]["pre_norm"] == pytest.approx(total, rel=1e-5)
    assert of("nan_guard", "nonfinite") == []
    assert [r["data"] for r in of("grad_scale", "scale")] == [{"scale": 1024.0, "found_inf": False}]


def test_an_overflow_step_stops_the_pipeline_after_the_unscale() -> None:
    """grad_scale vetoes an overflow first: no pre_clip, no clip, no guard error, skipped post."""
    model = _model()
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    config = {"plugins": TABLES, "events": {"memory": True}}
    with hookgrad.Runtime(config, environ={}) as rt:
        (model(hookgrad.randn(8, 3)) ** 2 * math.inf).sum().backward()
        optimizer.step()  # nan_guard's default action is raise: it must not be reached
    records = rt.memory.records
    kinds = [(r["plugin"], r["kind"]) for r in records if "plugin" in r]
    assert ("grad_scale", "skip_step") in kinds and ("grad_clip", "clip") not in kinds
    stages = {r["data"]["stage"] for r in records if r.get("plugin") == "grad_stats"}
    assert stages == {"post_clip"}
    [post] = [r for r in records if r.get("plugin") == "event_log"]
    assert post["phase"] == "optimizer_step_post"
    assert (post["skipped"], post["vetoed_by"]) == (True, "grad_scale")
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), b)
