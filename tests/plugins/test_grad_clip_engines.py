"""grad_clip on torch tensors: the same records and gradients as on hookgrad tensors.

Each hook implementation is driven with events built from torch tensors and from hookgrad
tensors of the same values; on torch, ``mode = "norm"`` leaves the gradients bit for bit as
``torch.nn.utils.clip_grad_norm_`` does.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

import hookgrad
from hookgrad.engines import engine_named
from hookgrad.hookspecs import FullBackwardEvent, OptimizerStepPreEvent
from hookgrad.plugins.grad_clip import GradClip
from hookgrad.testing import capture_events

torch = pytest.importorskip("torch")

SHAPES = {"fc.weight": (4, 3), "fc.bias": (4,), "conv.weight": (2, 2, 2), "gain": (), "b.w": (3,)}
MODES: list[dict[str, Any]] = [
    {"mode": "norm", "max_norm": 1.5},
    {"mode": "norm", "max_norm": 1.5, "norm_type": math.inf},
    {"mode": "norm", "max_norm": 1.5, "norm_type": 1.0},
    {"mode": "norm", "max_norm": 100.0},
    {"mode": "per_module", "max_norm": 1.0},
    {"mode": "value", "clip_value": 0.5},
    {"mode": "value", "clip_value": 10.0},
    {"mode": "agc", "agc_clipping": 0.05},
    {"mode": "autoclip", "percentile": 50.0},
]


def arrays(scale: float, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: (rng.standard_normal(s) * scale).astype(np.float32) for n, s in SHAPES.items()}


def parameters(lib: Any, weights: dict[str, np.ndarray], grads: dict[str, np.ndarray]):
    """(name, leaf) pairs of ``lib`` holding ``weights``, each with its grad (if in grads)."""
    named = []
    for name, w in weights.items():
        p = lib.tensor(w.copy(), requires_grad=True)
        if name in grads:
            p.grad = lib.tensor(grads[name].copy())
        named.append((name, p))
    return tuple(named)


def step_records(settings: dict[str, Any], steps: list[tuple[tuple[str, Any], ...]]):
    """Call grad_clip's step hook once per step with those parameters; its records."""
    plugin = GradClip(GradClip.Config(**settings))
    with capture_events(("grad_clip", plugin)) as capture:
        for step, named in enumerate(steps):
            event = OptimizerStepPreEvent(
                step=step, phase="optimizer_step_pre", optimizer_type="SGD", parameters=named
            )
            plugin.hookgrad_optimizer_step_pre(event=event)
    return capture.of_plugin("grad_clip")


def assert_same_records(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> None:
    """Records equal key for key, numbers to float32 tolerance."""
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert {k: v for k, v in a.items() if k not in ("data", "time")} == {
            k: v for k, v in b.items() if k not in ("data", "time")
        }
        assert a["data"].keys() == b["data"].keys()
        for key, value in b["data"].items():
            if isinstance(value, float):
                assert a["data"][key] == pytest.approx(value, rel=2e-6), key
            else:
                assert a["data"][key] == value, key


def grads_of(named: tuple[tuple[str, Any], ...]) -> dict[str, np.ndarray | None]:
    return {n: None if p.grad is None else p.grad.detach().numpy().copy() for n, p in named}


@pytest.mark.parametrize("settings", MODES, ids=lambda s: "-".join(map(str, s.values())))
def test_every_step_mode_gives_the_same_records_and_grads_on_torch(settings):
    """Three steps (a big, a small, a mid gradient; one parameter without): same everything."""
    weights = arrays(1.0, 0)
    plans = [arrays(scale, seed) for scale, seed in ((3.0, 1), (0.01, 2), (0.4, 3))]
    for plan in plans:
        del plan["conv.weight"]
    h_steps = [parameters(hookgrad, weights, g) for g in plans]
    t_steps = [parameters(torch, weights, g) for g in plans]
    assert_same_records(step_records(settings, t_steps), step_records(settings, h_steps))
    for h, t in zip(h_steps, t_steps):
        for (name, a), b in zip(grads_of(h).items(), grads_of(t).values()):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_allclose(b, a, rtol=2e-6, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0], ids=str)
@pytest.mark.parametrize("scale", [3.0, 0.01], ids=["clipped", "below_max"])
def test_norm_on_torch_is_clip_grad_norm_bit_for_bit(norm_type, scale):
    """mode norm leaves every torch gradient torch.equal to clip_grad_norm_'s."""
    weights, grads = arrays(1.0, 0), arrays(scale, 5)
    named = parameters(torch, weights, grads)
    reference = parameters(torch, weights, grads)
    step_records({"max_norm": 1.5, "norm_type": norm_type}, [named])
    torch.nn.utils.clip_grad_norm_([p for _, p in reference], 1.5, norm_type)
    for (name, p), (_, q) in zip(named, reference):
        assert torch.equal(p.grad, q.grad), name


def test_per_module_on_torch_is_clip_grad_norm_per_module_bit_for_bit():
    """per_module: each owner's gradients torch.equal clip_grad_norm_ of that owner alone."""
    weights, grads = arrays(1.0, 0), arrays(2.0, 6)
    named, reference = parameters(torch, weights, grads), parameters(torch, weights, grads)
    step_records({"mode": "per_module", "max_norm": 1.0}, [named])
    owners: dict[str, list[Any]] = {}
    for name, p in reference:
        owners.setdefault(name.rpartition(".")[0], []).append(p)
    for params in owners.values():
        torch.nn.utils.clip_grad_norm_(params, 1.0)
    for (name, p), (_, q) in zip(named, reference):
        assert torch.equal(p.grad, q.grad), name


@pytest.mark.parametrize("mode", ["norm", "per_module", "autoclip"])
def test_error_if_nonfinite_raises_torchs_error_on_both_engines(mode):
    """An inf gradient: the RuntimeError text torch raises, and no gradient changed (for
    per_module, not even those of the modules before the one at fault)."""
    weights, grads = arrays(1.0, 0), arrays(3.0, 7)
    grads["b.w"][1] = np.inf  # the last module
    with pytest.raises(RuntimeError) as expected:
        torch.nn.utils.clip_grad_norm_(
            [p for _, p in parameters(torch, weights, grads)], 1.0, error_if_nonfinite=True
        )
    for lib in (hookgrad, torch):
        named = parameters(lib, weights, grads)
        with pytest.raises(RuntimeError) as got:
            step_records({"mode": mode, "error_if_nonfinite": True}, [named])
        assert str(got.value) == str(expected.value)
        for name, g in grads_of(named).items():
            np.testing.assert_array_equal(g, grads[name])


def test_grad_input_on_torch_gives_the_same_clamp_and_record():
    """The full backward hook clamps torch grad_input as hookgrad's, None kept, same record."""
    values = np.array([[np.nan, 3.0, -0.5], [0.25, -4.0, 1.0]], np.float32)
    plugin = GradClip(GradClip.Config(mode="grad_input", clip_value=1.0))
    results = []
    for lib in (hookgrad, torch):
        grad = lib.tensor(values.copy())
        event = FullBackwardEvent(
            module_name="fc",
            module_type="Linear",
            call_index=0,
            step=4,
            grad_input=(None, grad),
            grad_output=(grad,),
        )
        with capture_events(("grad_clip", plugin)) as capture:
            replaced = plugin.hookgrad_full_backward(event=event)
            within = plugin.hookgrad_full_backward(
                event=event.model_copy(update={"grad_input": (lib.tensor([0.5, np.nan]),)})
            )
        assert within is None and replaced is not None and replaced[0] is None
        np.testing.assert_array_equal(grad.numpy(), values)  # the input itself is kept
        results.append((replaced[1].numpy(), capture.of_plugin("grad_clip")))
    (h_clamped, h_records), (t_clamped, t_records) = results
    np.testing.assert_array_equal(t_clamped, h_clamped)
    assert_same_records(t_records, h_records)
    assert [r["data"]["nonfinite"] for r in t_records] == [True]


def _torch_runtime(config: dict[str, Any]) -> hookgrad.Runtime:
    """A runtime whose training-loop points watch torch (until Runtime takes an engine)."""
    runtime = hookgrad.Runtime(config, environ={})
    runtime._loop.engines = (engine_named("torch"),)
    return runtime


def _train(model: Any, clip: bool) -> None:
    """Three SGD steps on a fixed batch; ``clip``: clip_grad_norm_ to 0.5 by hand."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(1)) * 5
    for _ in range(3):
        optimizer.zero_grad()
        (model(x) ** 2).sum().backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()


def test_a_torch_training_loop_under_the_runtime_is_clip_grad_norm_bit_for_bit():
    """A plain torch loop under grad_clip (norm) ends with the weights of the same loop
    calling clip_grad_norm_ itself, and records each step's clip."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    reference = copy.deepcopy(model)
    config = {"plugins": {"grad_clip": {"max_norm": 0.5}}, "events": {"memory": True}}
    with _torch_runtime(config) as runtime:
        _train(model, clip=False)
    _train(reference, clip=True)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.equal(p, q), name
    assert runtime.memory is not None
    records = [r for r in runtime.memory.records if r.get("plugin") == "grad_clip"]
    assert [(r["step"], r["data"]["clipped"]) for r in records] == [(0, True), (1, True), (2, True)]
    assert all(r["data"]["post_norm"] == pytest.approx(0.5, rel=1e-6) for r in records)
