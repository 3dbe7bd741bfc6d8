"""torch.compile under the runtime: a compiled model, or a compiled training step, writes the
records and reaches the weights of the same training uncompiled (docs/torch.md, "torch.compile")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hookgrad._demo import make_task
from hookgrad.hookspecs import ForwardEvent, hookimpl
from hookgrad.runtime import Runtime

torch = pytest.importorskip("torch")

EXAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "hookgrad.toml"
STEPS = 6
NAN_AT = 2  # the step whose input batch holds a NaN
BACKENDS = ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]


def _compile_works() -> bool:
    try:
        return bool(torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1)) == 2)
    except Exception:  # no dynamo on this Python or platform
        return False


pytestmark = [
    pytest.mark.skipif(not _compile_works(), reason="torch.compile unavailable here"),
    # torch's own compile path calls its deprecated torch.jit.script_method: not ours to fix
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
]


def _train(
    compiled: str | None, backend: str = "eager", config: Any = EXAMPLE_CONFIG, **options: Any
) -> tuple[str, dict[str, Any]]:
    """STEPS steps of the demo MLP on torch under ``config``, a NaN in the input of step
    NAN_AT; ``compiled``: None, "model" (``torch.compile(model)``), "model called before"
    (and called once before the runtime starts) or "step" (the function doing forward,
    backward and optimizer step compiled), the model given to
    ``runtime.watch``. The plugin records as JSON text, and the final weights."""
    torch.compiler.reset()  # compile afresh: no code compiled by an earlier run is reused
    task = make_task("mlp", seed=1, engine="torch")
    model = task.model
    if compiled in ("model", "model called before"):
        model = torch.compile(task.model, backend=backend, **options)
    if compiled == "model called before":  # compiled before the runtime installs its hooks
        model(task.x)
    optimizer = torch.optim.SGD(task.model.parameters(), lr=task.lr, momentum=0.9)

    def step(x: Any) -> None:
        optimizer.zero_grad()
        task.loss_fn(model(x), task.y).backward()
        optimizer.step()

    if compiled == "step":
        step = torch.compile(step, backend=backend, **options)
    poisoned = task.x.clone()
    poisoned[0, 0] = float("nan")
    overrides = {"engine": "torch", "events": {"memory": True, "jsonl": None}}
    with Runtime(config, overrides=overrides, environ={}) as runtime:
        runtime.watch(model)  # names the parameters: no call spotting needed
        for index in range(STEPS):
            step(poisoned if index == NAN_AT else task.x)
        assert runtime.memory is not None
        records = [r for r in runtime.memory.records if "plugin" in r]
    return json.dumps(records), task.model.state_dict()


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's notes on hooks and graph breaks
@pytest.mark.parametrize("compiled", ["model", "model called before", "step"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_training_writes_the_records_of_the_uncompiled_one(
    compiled: str, backend: str
) -> None:
    """Under examples/hookgrad.toml, a compiled model (even one first run before the runtime
    started) or training step: the plugin records
    (module names without "_orig_mod.", the NaN step skipped, clipping, loss scale) and the
    final weights are those of the uncompiled run: exactly with the eager and aot_eager
    backends, which run torch's own kernels; the same records with values to float32
    tolerance with inductor, whose fused kernels round differently."""
    expected, weights = _train(None)
    records, compiled_weights = _train(compiled, backend)
    kinds = {(r["plugin"], r["kind"], r["step"]) for r in json.loads(expected)}
    assert {("grad_scale", "skip_step", NAN_AT), ("nan_guard", "nonfinite", NAN_AT)} <= kinds
    assert ("grad_clip", "clip", NAN_AT + 1) in kinds
    if backend != "inductor":
        assert records == expected
        torch.testing.assert_close(compiled_weights, weights, rtol=0, atol=0, equal_nan=True)
        return
    assert _events(records) == _events(expected)
    assert _clip_norms(records) == pytest.approx(_clip_norms(expected), rel=1e-5)
    torch.testing.assert_close(compiled_weights, weights)


def _events(records: str) -> list[tuple[Any, ...]]:
    """Each record's plugin, kind, step and module name, in order."""
    return [(r["plugin"], r["kind"], r["step"], r["module_name"]) for r in json.loads(records)]


def _clip_norms(records: str) -> list[float]:
    """grad_clip's total norm before clipping, at each step it clipped."""
    return [r["data"]["pre_norm"] for r in json.loads(records) if r["plugin"] == "grad_clip"]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fullgraph_compile_refuses_module_plugins_and_takes_loop_point_ones() -> None:
    """fullgraph=True: with a plugin on module events (nan_guard, grad_stats) torch raises at
    the first call, naming the runtime's hook; with loop-point plugins only (grad_clip) and
    the model watched, no module hook is installed: the model compiles whole and the records
    and weights (NaN from step NAN_AT on: no guard) are the uncompiled run's."""
    with pytest.raises(torch._dynamo.exc.Unsupported, match=r"torch\.compiler\.disable"):
        _train("model", fullgraph=True)
    clip_only = {"plugins": {"grad_clip": {"max_norm": 0.5}}}
    expected, weights = _train(None, config=clip_only)
    records, compiled_weights = _train("model", config=clip_only, fullgraph=True)
    assert '"grad_clip"' in expected
    assert records == expected
    torch.testing.assert_close(compiled_weights, weights, rtol=0, atol=0, equal_nan=True)


class _ForwardNames:
    """Records the module name of every hookgrad_forward event."""

    def __init__(self) -> None:
        self.names: list[str] = []

    @hookimpl
    def hookgrad_forward(self, event: ForwardEvent) -> None:
        self.names.append(event.module_name)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_forward_events_of_a_compiled_model_fire_at_every_call_and_stop_with_the_runtime(
    backend: str,
) -> None:
    """A plugin on forward events sees each call of a compiled model's modules, named as in
    the model, at every call; once the runtime is closed, calls of the same compiled code
    reach it no more."""
    torch.compiler.reset()
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    model = torch.compile(net, backend=backend)
    plugin = _ForwardNames()
    with Runtime({}, environ={}, engine="torch") as runtime:
        runtime.register(plugin)
        for _ in range(3):
            model(torch.ones(4, 2)).sum().backward()
    assert plugin.names == ["0", "1", "2", ""] * 3
    model(torch.ones(4, 2)).sum().backward()
    assert len(plugin.names) == 12
