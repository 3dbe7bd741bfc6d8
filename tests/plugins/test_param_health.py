"""param_health: an unused branch, dead units behind a ReLU, frozen and exploding parameters,
each found by name on real models trained on both engines; healthy ones never listed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import hookgrad
from hookgrad.engines import engine_named
from hookgrad.plugins.param_health import DeadUnits, HealthReport, ParamHealth
from hookgrad.runtime import ConfigError
from hookgrad.testing import EventCapture, capture_events

torch = pytest.importorskip("torch")

ENGINES = [pytest.param(hookgrad, id="hookgrad"), pytest.param(torch, id="torch")]
RNG = np.random.default_rng(3)
INPUTS = RNG.standard_normal((16, 4)).astype(np.float32)
TARGETS = RNG.standard_normal((16, 1)).astype(np.float32)
NOTHING = {"unused": [], "dead": [], "frozen": [], "exploding": []}


def _two_heads(lib: Any, *, use_b: bool = True, apart: bool = False) -> Any:
    """A model with heads ``a`` and ``b`` (Linear(4, 1) each) on a shared ``trunk``: it
    returns a's output plus b's; a's alone unless ``use_b`` (b is then an unused branch);
    both, as a pair, with ``apart`` (each head trained on its own loss)."""

    class TwoHeads(lib.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.trunk = lib.nn.Linear(4, 4)
            self.a = lib.nn.Linear(4, 1)
            self.b = lib.nn.Linear(4, 1)

        def forward(self, x: Any) -> Any:
            h = self.trunk(x).tanh()
            if apart:
                return self.a(h), self.b(h)
            return self.a(h) + self.b(h) if use_b else self.a(h)

    lib.manual_seed(0)
    return TwoHeads()


@contextmanager
def _session(lib: Any, config: dict[str, Any] | None = None) -> Iterator[EventCapture]:
    """param_health with ``config`` on an isolated runtime of ``lib``'s engine."""
    plugin = ParamHealth(ParamHealth.Config(**(config or {})))
    engine = "torch" if lib is torch else "hookgrad"
    with capture_events(("param_health", plugin), engine=engine) as capture:
        yield capture


def _step(lib: Any, model: Any, optimizer: Any) -> None:
    """One SGD step of ``model``: MSE on the fixed batch (summed over the outputs of a
    model that returns several)."""
    optimizer.zero_grad()
    outputs = model(lib.tensor(INPUTS))
    y = lib.tensor(TARGETS)
    pairs = outputs if isinstance(outputs, tuple) else (outputs,)
    sum(((out - y) ** 2).mean() for out in pairs).backward()
    optimizer.step()


def _train(
    lib: Any, model: Any, optimizer: Any, steps: int, config: dict[str, Any]
) -> tuple[HealthReport, list[dict[str, Any]]]:
    """``steps`` steps with param_health on: its report at the end, and its records once
    the runtime closed."""
    with _session(lib, config) as capture:
        for _ in range(steps):
            _step(lib, model, optimizer)
        report = _report(capture)
    return report, capture.of_plugin("param_health")


def _report(capture: EventCapture) -> HealthReport:
    plugin = capture.runtime.plugins["param_health"]
    assert isinstance(plugin, ParamHealth)
    return plugin.report()


# ---------------------------------------------------------------------- the four kinds
@pytest.mark.parametrize("lib", ENGINES)
def test_an_unused_branch_is_reported_by_qualified_name_after_window_steps(lib: Any) -> None:
    """Head b never takes part in the loss: its gradients stay None, and after ``window``
    steps (not one before) both its parameters are listed, nothing else is."""
    model = _two_heads(lib, use_b=False)
    optimizer = lib.optim.SGD(model.parameters(), lr=0.05)
    with _session(lib, {"window": 5}) as capture:
        for _ in range(4):
            _step(lib, model, optimizer)
            assert _report(capture).model_dump() == NOTHING
        _step(lib, model, optimizer)
        assert _report(capture).model_dump() == {**NOTHING, "unused": ["b.weight", "b.bias"]}


@pytest.mark.parametrize("lib", ENGINES)
def test_a_linear_before_a_dead_relu_is_reported_with_its_dead_fraction(lib: Any) -> None:
    """Three of the eight outputs of Linear ``0`` get a bias of -100: the ReLU after it never
    fires for them, their weight rows get exactly zero gradients, and ``0`` is reported with
    3/8 of its units dead; the healthy Linear ``2`` is not."""
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 1))
    with lib.no_grad():
        model[0].bias[:3] = -100.0
    optimizer = lib.optim.SGD(model.parameters(), lr=0.05)
    report, _ = _train(lib, model, optimizer, steps=6, config={"window": 6})
    assert report.dead == [DeadUnits(module="0", param="0.weight", fraction=3 / 8)]
    assert (report.unused, report.frozen, report.exploding) == ([], [], [])


@pytest.mark.parametrize("lib", ENGINES)
def test_dead_units_must_stay_dead_for_the_whole_window(lib: Any) -> None:
    """A unit that fires within the window is alive: the bias lifted after two dead steps,
    the units fire at the third and start counting again from zero when the bias is lowered
    once more, so they are listed ``window`` steps after that, not before."""
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 1))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.05)
    with _session(lib, {"window": 3}) as capture:
        for bias in (-100.0, -100.0, 1.0, -100.0, -100.0):
            with lib.no_grad():
                model[0].bias[:3] = bias
            _step(lib, model, optimizer)
            assert _report(capture).dead == []
        with lib.no_grad():
            model[0].bias[:3] = -100.0
        _step(lib, model, optimizer)
        assert _report(capture).dead == [DeadUnits(module="0", param="0.weight", fraction=3 / 8)]


OPTIMIZERS = {
    # plain SGD: the update is lr * grad, from the gradient norms; the others copy the weights
    "sgd": lambda lib, groups, lr: lib.optim.SGD(groups, lr=lr),
    "momentum": lambda lib, groups, lr: lib.optim.SGD(groups, lr=lr, momentum=0.9),
    "adam": lambda lib, groups, lr: lib.optim.Adam(groups, lr=lr),
}


@pytest.mark.parametrize("lib", ENGINES)
@pytest.mark.parametrize("kind", OPTIMIZERS)
@pytest.mark.parametrize("lr", [0.0, 1e-12])
def test_a_parameter_group_with_no_or_a_tiny_learning_rate_is_frozen(
    lib: Any, kind: str, lr: float
) -> None:
    """Head a's group has lr 0 (or 1e-12, whose updates round away in float32): its update
    ratio stays below frozen_below, so its weight is frozen (vectors are not judged); the
    rest, at lr 0.01, are not; under plain SGD, with momentum and under Adam."""
    model = _two_heads(lib)
    groups = [
        {"params": list(model.a.parameters()), "lr": lr},
        {"params": [*model.trunk.parameters(), *model.b.parameters()]},
    ]
    optimizer = OPTIMIZERS[kind](lib, groups, 0.01)
    report, _ = _train(lib, model, optimizer, steps=5, config={"window": 5})
    assert report.model_dump() == {**NOTHING, "frozen": ["a.weight"]}


@pytest.mark.parametrize("lib", ENGINES)
@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_a_huge_learning_rate_makes_its_parameters_exploding(lib: Any, kind: str) -> None:
    """Head a has its own loss and lr 3 (SGD diverges on it), head b its own at lr 0.01:
    every step moves a's weight by more than a tenth of its norm, so it is exploding, b's
    is not (the trunk is frozen at lr 0 to keep the heads apart)."""
    model = _two_heads(lib, apart=True)
    groups = [
        {"params": list(model.a.parameters()), "lr": 3.0},
        {"params": list(model.b.parameters())},
        {"params": list(model.trunk.parameters()), "lr": 0.0},
    ]
    optimizer = OPTIMIZERS[kind](lib, groups, 0.01)
    report, _ = _train(lib, model, optimizer, steps=6, config={"window": 6})
    assert np.isfinite(model.a.weight.detach().numpy()).all()
    assert report.exploding == ["a.weight"]
    assert report.frozen == ["trunk.weight"]
    assert (report.unused, report.dead) == ([], [])


@pytest.mark.parametrize("lib", ENGINES)
def test_a_healthy_model_is_never_listed(lib: Any) -> None:
    """A small MLP training normally with Adam for 30 steps: every list stays empty."""
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1))
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-2)
    report, records = _train(lib, model, optimizer, steps=30, config={"window": 10})
    assert report.model_dump() == NOTHING
    assert [r["data"] for r in records] == [NOTHING]


@pytest.mark.parametrize("lib", ENGINES)
@pytest.mark.parametrize("kind", ["sgd", "momentum"])
@pytest.mark.parametrize(("limit", "exploding"), [(1.9e-3, True), (2.1e-3, False)])
def test_the_update_ratio_is_the_update_norm_over_the_weight_norm(
    lib: Any, kind: str, limit: float, exploding: bool
) -> None:
    """A 2x2 weight of norm 5 (3 and 4 on the diagonal) whose gradient has norm 1, lr 0.01:
    its ratio is 0.002, both under plain SGD (read from the norms) and with momentum (whose
    first step is lr * grad too; the weights are copied): exploding with exploding_above
    1.9e-3, not with 2.1e-3."""
    weight = lib.nn.Parameter(lib.tensor([[3.0, 0.0], [0.0, 4.0]]))
    weight.grad = lib.tensor([[0.6, 0.0], [0.0, 0.8]])
    optimizer = OPTIMIZERS[kind](lib, [weight], 0.01)
    with _session(lib, {"window": 1, "exploding_above": limit}) as capture:
        optimizer.step()
        assert _report(capture).exploding == (["param0"] if exploding else [])


@pytest.mark.parametrize("lib", ENGINES)
def test_plain_sgd_copies_no_weight(lib: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under plain SGD the update ratio needs no copy of the weights: no snapshot is taken."""
    engine = engine_named("torch" if lib is torch else "hookgrad")
    taken: list[int] = []
    monkeypatch.setattr(type(engine), "snapshot", lambda self, ts: taken.append(len(ts)) or [])
    model = _two_heads(lib)
    optimizer = lib.optim.SGD(model.parameters(), lr=0.0)
    report, _ = _train(lib, model, optimizer, steps=2, config={"window": 2})
    assert taken == [] and report.frozen == ["trunk.weight", "a.weight", "b.weight"]


# ---------------------------------------------------------------------- window and skipped steps
def _params(*grads: np.ndarray | None) -> list[tuple[str, Any]]:
    params = []
    for i, grad in enumerate(grads):
        p = hookgrad.nn.Parameter(hookgrad.ones(2, 3))
        p.grad = None if grad is None else hookgrad.tensor(grad)
        params.append((f"layer{i}.weight", p))
    return params


def test_a_vetoed_step_neither_counts_nor_breaks_a_run() -> None:
    """A step some plugin vetoed (here: every second one) leaves every run as it was: with
    window 3, an unused parameter is listed after its third step taken, not its third call."""

    class VetoOdd:
        calls = 0

        @hookgrad.hookspecs.hookimpl(tryfirst=True)
        def hookgrad_optimizer_step_pre(self, event: Any) -> bool | None:
            self.calls += 1
            return False if self.calls % 2 == 0 else None

    params = _params(None)
    optimizer = hookgrad.optim.SGD(params, lr=0.1)
    plugin = ParamHealth(ParamHealth.Config(window=3))
    with capture_events(("veto", VetoOdd()), ("param_health", plugin)):
        for calls in range(1, 6):
            optimizer.step()
            taken = (calls + 1) // 2
            assert plugin.report().unused == (["layer0.weight"] if taken >= 3 else []), calls


def test_a_gradient_appearing_restarts_the_unused_run() -> None:
    """Two None steps, one with a gradient, two None again: never three in a row, not listed."""
    params = _params(None)
    optimizer = hookgrad.optim.SGD(params, lr=0.0)
    plugin = ParamHealth(ParamHealth.Config(window=3))
    with capture_events(("param_health", plugin)):
        for grad in (None, None, np.ones((2, 3), np.float32), None, None):
            params[0][1].grad = None if grad is None else hookgrad.tensor(grad)
            optimizer.step()
        assert plugin.report().unused == []
        optimizer.step()
        assert plugin.report().unused == ["layer0.weight"]


def test_a_step_without_gradient_breaks_the_dead_and_frozen_runs() -> None:
    """window 2 at lr 0 with an all-zero gradient: dead and frozen after two steps; one step
    with no gradient in between, and both start over."""
    zero = np.zeros((2, 3), np.float32)
    params = _params(zero)
    optimizer = hookgrad.optim.SGD(params, lr=0.0)
    plugin = ParamHealth(ParamHealth.Config(window=2))
    dead = [DeadUnits(module="layer0", param="layer0.weight", fraction=1.0)]
    with capture_events(("param_health", plugin)):
        for grad in (zero, None, zero):
            params[0][1].grad = None if grad is None else hookgrad.tensor(grad)
            optimizer.step()
        assert (plugin.report().dead, plugin.report().frozen) == ([], [])
        params[0][1].grad = hookgrad.tensor(zero)
        optimizer.step()
        assert (plugin.report().dead, plugin.report().frozen) == (dead, ["layer0.weight"])


def test_dead_runs_survive_another_weight_coming_and_going() -> None:
    """layer0's gradient is zero at every step while layer1's is there every other step:
    layer0's units count on through the changing set of weights (window 3)."""
    zero, ones = np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)
    params = _params(zero, ones)
    optimizer = hookgrad.optim.SGD(params, lr=0.1)
    plugin = ParamHealth(ParamHealth.Config(window=3))
    with capture_events(("param_health", plugin)):
        for step, other in enumerate((ones, None, ones)):
            params[0][1].grad = hookgrad.tensor(zero)
            params[1][1].grad = None if other is None else hookgrad.tensor(other)
            optimizer.step()
            dead = plugin.report().dead
            assert [d.param for d in dead] == (["layer0.weight"] if step == 2 else []), step


def test_one_healthy_ratio_ends_a_frozen_or_exploding_run() -> None:
    """lr 0, 0.01, 0, 5, 0 on a weight of norm sqrt(6) with gradient 1 everywhere (window 2):
    frozen, healthy, frozen, exploding, frozen: never two in a row, nothing listed; then two
    exploding steps in a row are."""
    params = _params(np.ones((2, 3), np.float32))
    optimizer = hookgrad.optim.SGD(params, lr=0.0)
    plugin = ParamHealth(ParamHealth.Config(window=2))
    with capture_events(("param_health", plugin)):
        for lr in (0.0, 0.01, 0.0, 5.0, 0.0, 5.0):
            optimizer.param_groups[0]["lr"] = lr
            optimizer.step()
            assert plugin.report().model_dump() == NOTHING, lr
        optimizer.step()
        assert plugin.report().exploding == ["layer0.weight"]


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_a_weight_that_is_not_finite_is_exploding(kind: str) -> None:
    """A weight holding NaN has a NaN update ratio, which counts as exploding (both ways of
    measuring the update: read from the norms under plain SGD, compared with a copy under
    Adam)."""
    params = _params(np.ones((2, 3), np.float32))
    with hookgrad.no_grad():
        params[0][1][0, 0] = float("nan")
    optimizer = OPTIMIZERS[kind](hookgrad, [p for _, p in params], 0.01)
    plugin = ParamHealth(ParamHealth.Config(window=1))
    with capture_events(("param_health", plugin)):
        optimizer.step()
        assert plugin.report().exploding == ["param0"]


def test_the_module_selection_chooses_the_parameters_watched() -> None:
    """exclude = ["b"]: the unused head b is not watched, so not reported."""
    model = _two_heads(hookgrad, use_b=False)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.05)
    report, _ = _train(hookgrad, model, optimizer, steps=2, config={"window": 2, "exclude": ["b"]})
    assert report.model_dump() == NOTHING


# ---------------------------------------------------------------------- records
def test_the_report_is_a_health_report_record_when_the_runtime_stops() -> None:
    """Closing the runtime emits one record: plugin param_health, kind health_report, the
    runtime's step, no module, and the report as data (the issue's schema)."""
    params = _params(None, np.zeros((2, 3), np.float32))
    optimizer = hookgrad.optim.SGD(params, lr=0.0)
    plugin = ParamHealth(ParamHealth.Config(window=2))
    with capture_events(("param_health", plugin)) as capture:
        for _ in range(3):
            optimizer.step()
        assert capture.of_plugin("param_health") == []  # nothing before the end
    (record,) = capture.of_plugin("param_health")
    dead = {"module": "layer1", "param": "layer1.weight", "fraction": 1.0}
    assert record == {
        "plugin": "param_health",
        "kind": "health_report",
        "step": 3,
        "module_name": None,
        "data": {
            "unused": ["layer0.weight"],
            "dead": [dead],
            "frozen": ["layer1.weight"],
            "exploding": [],
        },
        "rank": 0,
    }


def test_the_health_report_reaches_the_jsonl_log(tmp_path: Path) -> None:
    """Activated from config, the plugin's report is the last record of events.jsonl."""
    log = tmp_path / "events.jsonl"
    config = {"events": {"jsonl": str(log)}, "plugins": {"param_health": {"window": 1}}}
    params = _params(None)
    optimizer = hookgrad.optim.SGD(params, lr=0.1)
    with hookgrad.Runtime(config, environ={}):
        optimizer.step()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    (record,) = [r for r in records if r.get("plugin") == "param_health"]
    assert (record["kind"], record["data"]["unused"]) == ("health_report", ["layer0.weight"])


def test_report_models_have_the_issue_fields() -> None:
    """report() is a HealthReport: unused, dead ({module, param, fraction}), frozen, exploding."""
    assert list(HealthReport.model_fields) == ["unused", "dead", "frozen", "exploding"]
    assert list(DeadUnits.model_fields) == ["module", "param", "fraction"]
    report = ParamHealth(ParamHealth.Config()).report()
    assert isinstance(report, HealthReport) and report.model_dump() == NOTHING


def test_the_report_as_a_table() -> None:
    """table(): one aligned row per finding with its kind, parameter, module and dead share;
    a healthy report says so in one line."""
    report = HealthReport(
        unused=["head.bias"],
        dead=[DeadUnits(module="enc.0", param="enc.0.weight", fraction=0.375)],
        frozen=[],
        exploding=["enc.2.weight"],
    )
    assert report.table().splitlines() == [
        "kind       parameter     module  dead",
        "unused     head.bias     head    -",
        "dead       enc.0.weight  enc.0   37.5%",
        "exploding  enc.2.weight  enc.2   -",
    ]
    assert HealthReport(**NOTHING).table() == "param_health: every watched parameter is healthy"


def test_it_reads_the_step_only() -> None:
    """No module hook: the plugin implements the two step hooks and its lifecycle, nothing
    else, so module calls keep the engine's fast path."""
    hooks = {name for name in dir(ParamHealth) if name.startswith("hookgrad_")}
    assert hooks == {
        "hookgrad_configure",
        "hookgrad_optimizer_step_pre",
        "hookgrad_optimizer_step_post",
        "hookgrad_unconfigure",
    }


# ---------------------------------------------------------------------- config
BAD_SETTINGS = [
    ({"window": 0}, "window"),
    ({"window": 1_000_001}, "window"),
    ({"window": 2.5}, "window"),
    ({"frozen_below": -1.0}, "frozen_below"),
    ({"exploding_above": 0.0}, "exploding_above"),
    ({"frozen_below": 0.5, "exploding_above": 0.1}, "frozen_below (0.5) must be below"),
    ({"windw": 3}, "windw"),
]


def test_the_defaults_are_the_documented_ones() -> None:
    """window 20, frozen below 1e-7, exploding above 0.1."""
    config = ParamHealth.Config()
    assert (config.window, config.frozen_below, config.exploding_above) == (20, 1e-7, 0.1)


@pytest.mark.parametrize(("settings", "named"), BAD_SETTINGS)
def test_a_bad_setting_is_a_config_error_naming_it(settings: dict[str, Any], named: str) -> None:
    """Each bad value, and an unknown key, fails the runtime's config naming it and the plugin."""
    with pytest.raises(ConfigError) as info:
        hookgrad.Runtime({"plugins": {"param_health": settings}}, environ={})
    assert named in str(info.value) and "param_health" in str(info.value)
    with pytest.raises(ValidationError, match=named.split()[0]):
        ParamHealth.Config(**settings)
