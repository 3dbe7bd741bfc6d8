"""docs/writing-a-plugin.md, promise by promise: the hook table, call order, events, PluginConfig.

Every expected number is worked out by hand from the tiny models used here.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

import numpy as np
import pluggy
import pytest
from pydantic import ValidationError

import hookgrad
from hookgrad import hookspecs
from hookgrad.hookspecs import (
    BackwardBeginEvent,
    BackwardPreEvent,
    ForwardEvent,
    ForwardPreEvent,
    FullBackwardEvent,
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginConfig,
    call_order,
    hookimpl,
    tensor_stats,
)
from hookgrad.testing import capture_events, global_hook_counts

nn = hookgrad.nn


def _scale_layer(factor: float) -> nn.Linear:
    layer = nn.Linear(1, 1)
    with hookgrad.no_grad():
        layer.weight.fill_(factor)
        layer.bias.fill_(0.0)
    return layer


# ---------------------------------------------------------------------- the contract
def test_the_contract_names_are_exported() -> None:
    """Section 1's table: everything a plugin needs is in hookgrad.hookspecs."""
    for name in ("hookimpl", "hookspec", "PROJECT_NAME", "specs", "PluginConfig", "events"):
        assert hasattr(hookspecs, name), name
    for name in ("HOOK_EVENTS", "tensor_stats", "TensorSummary", "call_order"):
        assert hasattr(hookspecs, name), name
    assert hookspecs.PROJECT_NAME == "hookgrad"
    assert set(hookspecs.HOOK_EVENTS) == {
        "hookgrad_forward_pre",
        "hookgrad_forward",
        "hookgrad_backward_pre",
        "hookgrad_full_backward",
        "hookgrad_backward_begin",
        "hookgrad_backward_end",
        "hookgrad_optimizer_step_pre",
        "hookgrad_optimizer_step_post",
    }


class _UnknownParameter:
    @hookimpl
    def hookgrad_forward(self, event: Any, extra: Any) -> None:
        """Asks for a parameter the spec does not have."""


def test_an_implementation_asking_for_an_unknown_argument_is_rejected() -> None:
    """'an implementation may accept fewer parameters than the spec, never others'."""
    with (
        pytest.raises(pluggy.PluginValidationError, match="extra"),
        capture_events(("bad", _UnknownParameter())),
    ):
        pass


class _Wrapper:
    @hookimpl(wrapper=True)
    def hookgrad_forward(self, event: Any) -> Any:
        return (yield)


def test_wrappers_are_not_supported() -> None:
    """'Wrappers are not supported': registering one fails naming the hook and plugin."""
    with (
        pytest.raises(pluggy.PluginValidationError, match="wrapper"),
        capture_events(("wrapping", _Wrapper())),
    ):
        nn.Identity()(hookgrad.ones(1))


# ---------------------------------------------------------------------- what a return does
class _PreReplace:
    @hookimpl
    def hookgrad_forward_pre(self, event: ForwardPreEvent) -> Any:
        return hookgrad.tensor([[10.0]]) if event.module_name == "" else None


class _ForwardDouble:
    @hookimpl
    def hookgrad_forward(self, event: ForwardEvent) -> Any:
        return event.output * 2 if event.module_name == "" else None


class _HalveGradOutput:
    @hookimpl
    def hookgrad_backward_pre(self, event: BackwardPreEvent) -> Any:
        return tuple(None if g is None else g * 0.5 for g in event.grad_output)


class _TripleGradInput:
    @hookimpl
    def hookgrad_full_backward(self, event: FullBackwardEvent) -> Any:
        return tuple(None if g is None else g * 3 for g in event.grad_input)


class _SeedTimesFour:
    @hookimpl
    def hookgrad_backward_begin(self, event: BackwardBeginEvent) -> Any:
        assert event.gradient is None  # 'None: ones for a scalar loss'
        return hookgrad.ones_like(event.loss) * 4


def test_forward_pre_non_tuple_return_becomes_the_only_argument() -> None:
    """forward_pre: a non-None return replaces the args; a non-tuple v becomes (v,)."""
    model = nn.Sequential(_scale_layer(2.0))
    with capture_events(("p", _PreReplace())):
        out = model(hookgrad.tensor([[1.0]]))
    np.testing.assert_array_equal(out.detach().numpy(), [[20.0]])


def test_forward_return_replaces_the_output_before_the_modules_own_hooks() -> None:
    """forward replaces the output; plugins run before the module's own hooks (G-1)."""
    model = nn.Sequential(_scale_layer(2.0))
    seen: list[float] = []
    model.register_forward_hook(lambda m, a, o: seen.append(float(o.detach().numpy()[0, 0])))
    with capture_events(("p", _ForwardDouble())):
        out = model(hookgrad.tensor([[1.5]]))
    assert seen == [6.0]
    np.testing.assert_array_equal(out.detach().numpy(), [[6.0]])


def test_backward_pre_replacement_changes_parameter_gradients() -> None:
    """backward_pre replaces grad_output: 'the module's parameter gradients change too'."""
    layer = _scale_layer(2.0)
    model = nn.Sequential(layer)
    x = hookgrad.tensor([[3.0]], requires_grad=True)
    with capture_events(("p", _HalveGradOutput())):
        model(x).sum().backward()
    # root and layer each halve the gradient: 1 -> 0.25 at the layer's output
    np.testing.assert_allclose(layer.weight.grad.numpy(), [[0.75]])
    np.testing.assert_allclose(x.grad.numpy(), [[0.5]])


def test_full_backward_replacements_compose_over_plugins() -> None:
    """'Replacements compose': two plugins tripling grad_input give 9x per module."""
    model = nn.Sequential(_scale_layer(2.0))
    x = hookgrad.tensor([[1.0]], requires_grad=True)
    with capture_events(("a", _TripleGradInput()), ("b", _TripleGradInput())):
        model(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[2.0 * 9 * 9]])  # layer, then root


def test_backward_begin_replaces_the_seed_gradient() -> None:
    """backward_begin: a return replaces the seed gradient (loss scaling)."""
    w = hookgrad.tensor([1.0, 2.0], requires_grad=True)
    with capture_events(("p", _SeedTimesFour())):
        (w * 3).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [12.0, 12.0])


class _Veto:
    def __init__(self) -> None:
        self.post: list[tuple[bool, str | None, int]] = []

    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> bool:
        return False

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: OptimizerStepPostEvent) -> None:
        self.post.append((event.skipped, event.vetoed_by, event.step))


class _Counter:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        self.calls += 1


def test_the_first_false_ends_the_chain_and_skips_the_step() -> None:
    """'the first False ends the chain, the step is skipped', post fires with skipped=True."""
    p = nn.Parameter(hookgrad.ones(2))
    p.grad = hookgrad.ones(2)
    optimizer = hookgrad.optim.SGD([p], lr=1.0)
    veto, later = _Veto(), _Counter()
    with capture_events(("veto", veto), ("later", later)) as capture:
        optimizer.step()
        optimizer.step()
        assert capture.runtime.step == 2  # 'advances after each optimizer step, ... vetoed'
    assert later.calls == 0
    assert veto.post == [(True, "veto", 0), (True, "veto", 1)]
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, 1.0])


# ---------------------------------------------------------------------- call order
def _named(name: str, **marks: bool) -> object:
    class Impl:
        @hookimpl(**marks)
        def hookgrad_forward(self, event: ForwardEvent) -> None:
            order.append(name)

    return Impl()


order: list[str] = []


def test_registration_order_with_tryfirst_and_trylast() -> None:
    """Registration order; tryfirst before, trylast after; call_order returns exactly this."""
    order.clear()
    plugins = [
        ("late", _named("late", trylast=True)),
        ("a", _named("a")),
        ("early", _named("early", tryfirst=True)),
        ("b", _named("b")),
    ]
    with capture_events(*plugins) as capture:
        nn.Sequential(nn.Identity())[0](hookgrad.ones(1))
        listed = [i.plugin_name for i in call_order(capture.runtime.pm, "hookgrad_forward")]
    assert order == ["early", "a", "b", "late"] == listed


class _Lifecycle:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    @hookimpl
    def hookgrad_configure(self, runtime: Any) -> None:
        self.log.append(f"configure {self.name}")

    @hookimpl
    def hookgrad_unconfigure(self, runtime: Any) -> None:
        self.log.append(f"unconfigure {self.name}")


def test_plugins_are_unconfigured_in_reverse_order_also_on_error() -> None:
    """configure once each; 'unconfigured in reverse order', 'also on error'."""
    log: list[str] = []
    with (
        pytest.raises(KeyError),
        capture_events(("a", _Lifecycle("a", log)), ("b", _Lifecycle("b", log))),
    ):
        raise KeyError("inside the run")
    assert log == ["configure a", "configure b", "unconfigure b", "unconfigure a"]


def test_unregistering_a_plugin_unconfigures_it_at_once() -> None:
    """hookgrad_unconfigure fires once 'when ... the plugin is removed'."""
    log: list[str] = []
    with capture_events(("a", _Lifecycle("a", log)), ("b", _Lifecycle("b", log))) as capture:
        capture.runtime.unregister("a")
        assert log[-1] == "unconfigure a"
    assert log.count("unconfigure a") == 1 and log[-1] == "unconfigure b"


# ---------------------------------------------------------------------- events
def _forward_pre(**changes: Any) -> ForwardPreEvent:
    fields: dict[str, Any] = {
        "module_name": "a",
        "module_type": "Linear",
        "call_index": 0,
        "step": 0,
        "args": (),
        "kwargs": {},
    }
    return ForwardPreEvent(**{**fields, **changes})


@pytest.mark.parametrize(
    "changes",
    [{"step": "1"}, {"step": -1}, {"call_index": 1.0}, {"module_name": 3}, {"surprise": 1}],
    ids=["str_step", "negative_step", "float_index", "int_name", "unknown_field"],
)
def test_payloads_reject_unknown_fields_and_coerce_nothing(changes: dict[str, Any]) -> None:
    """'Payloads are frozen pydantic models that reject unknown fields and coerce nothing.'"""
    with pytest.raises(ValidationError):
        _forward_pre(**changes)


def test_payloads_are_frozen() -> None:
    """Payload models are frozen: assigning a field raises."""
    event = _forward_pre()
    with pytest.raises(ValidationError):
        event.step = 5  # type: ignore[misc]


def test_tensor_stats_are_over_the_finite_entries() -> None:
    """tensor_stats: norm, mean, std (population), min, max over finite; nonfinite; zeros."""
    values = np.array([[1.0, np.nan, np.inf], [0.0, -3.0, -np.inf]], np.float32)
    finite = np.array([1.0, 0.0, -3.0])
    stats = tensor_stats(hookgrad.tensor(values))
    assert stats["shape"] == [2, 3] and stats["dtype"] == "float32"
    assert stats["norm"] == pytest.approx(np.sqrt(10.0))
    assert stats["mean"] == pytest.approx(finite.mean())
    assert stats["std"] == pytest.approx(finite.std())
    assert (stats["min"], stats["max"]) == (-3.0, 1.0)
    assert (stats["nonfinite"], stats["nan"], stats["inf"]) == (3, 1, 2)
    assert stats["zero_fraction"] == pytest.approx(1 / 6)


def test_event_summary_is_strict_json_for_nonfinite_tensors() -> None:
    """event.summary() is 'the JSON-safe dict that sinks write', tensors as summaries."""
    bad = hookgrad.tensor([np.nan, np.inf])
    event = _forward_pre(args=(bad, 3))
    summary = event.summary()
    json.dumps(summary, allow_nan=False)
    assert summary["args"][0]["nonfinite"] == 2 and summary["args"][1] == 3


# ---------------------------------------------------------------------- PluginConfig
def test_plugin_config_defaults() -> None:
    """The common fields' defaults: enabled, ["*"], [], [], "raise", none."""
    c = PluginConfig()
    assert (c.enabled, c.modules, c.exclude, c.module_types) == (True, ("*",), (), ())
    assert (c.on_error, c.class_path) == ("raise", None)


def test_plugin_config_is_frozen_and_rejects_unknown_keys() -> None:
    """'Unknown keys fail validation naming the key; instances are frozen.'"""
    with pytest.raises(ValidationError, match="modulez"):
        PluginConfig.model_validate({"modulez": ["a"]})
    with pytest.raises(ValidationError):
        PluginConfig().enabled = False  # type: ignore[misc]
    with pytest.raises(ValidationError, match="on_error"):
        PluginConfig(on_error="ignore")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("settings", "name", "selected"),
    [
        ({}, "", True),
        ({}, "a.b.c", True),
        ({"modules": ["layers.*"]}, "layers.0", True),
        ({"modules": ["layers.*"]}, "layers.0.act", True),
        ({"modules": ["layers.*"]}, "layers", False),
        ({"modules": ["layers.*"]}, "Layers.0", False),
        ({"modules": ["layers.*"]}, "xlayers.0", False),
        ({"modules": [""]}, "", True),
        ({"modules": [""]}, "a", False),
        ({"modules": ["layers"]}, "layers.0", False),
        ({"modules": ["*"], "exclude": ["head*"]}, "head.fc", False),
        ({"modules": ["head.*"], "exclude": ["head.*"]}, "head.fc", False),
        ({"modules": ["a", "b.?"]}, "b.1", True),
        ({"modules": ["[ab]"]}, "b", True),
    ],
)
def test_selects_follows_the_glob_rules(settings: dict, name: str, selected: bool) -> None:
    """Globs: case-sensitive, whole name, '*' crosses dots, '' the root only, exclusion wins."""
    assert PluginConfig.model_validate(settings).selects(name, "Linear") is selected


def test_module_types_restricts_by_class_name() -> None:
    """module_types: the class is in the list (or the list is empty)."""
    config = PluginConfig(module_types=("Linear",))
    assert config.selects("x", "Linear") and not config.selects("x", "Conv2d")
    assert not PluginConfig(module_types=("linear",)).selects("x", "Linear")


class _Recorder:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.params: list[list[str]] = []

    @hookimpl
    def hookgrad_forward(self, event: ForwardEvent) -> None:
        self.names.append(event.module_name)

    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        self.params.append([n for n, _ in event.parameters])


def test_selectors_filter_module_events_and_optimizer_parameters() -> None:
    """A module event reaches a plugin only if selected; 'Optimizer events carry only the
    parameters of selected modules.'"""
    model = nn.Sequential(nn.Linear(1, 1), nn.Tanh(), nn.Linear(1, 1))
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.0)
    recorder = _Recorder()
    settings = {"rec": {"modules": ["*"], "exclude": ["", "1"]}}
    with capture_events(("rec", recorder), config=settings):
        model(hookgrad.ones(1, 1)).sum().backward()
        optimizer.step()
    assert sorted(recorder.names) == ["0", "2"]
    assert recorder.params == [["0.weight", "0.bias", "2.weight", "2.bias"]]


# ---------------------------------------------------------------------- on_error
class _Broken:
    class Config(PluginConfig):
        pass

    def __init__(self, config: Any = None) -> None:
        self.calls = 0

    @hookimpl
    def hookgrad_forward(self, event: ForwardEvent) -> None:
        self.calls += 1
        raise ArithmeticError("plugin bug")


@pytest.mark.parametrize(("mode", "calls"), [("warn", 3), ("disable", 1)])
def test_on_error_warn_goes_on_and_disable_stops_calling(mode: str, calls: int) -> None:
    """on_error: "warn" (log, go on) or "disable" (log, stop calling it); output unchanged."""
    plugin = _Broken()
    layer = nn.Identity()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with capture_events(("broken", plugin), config={"broken": {"on_error": mode}}) as cap:
            outs = [layer(hookgrad.ones(1) * i) for i in range(3)]
    assert plugin.calls == calls
    assert [float(o.numpy()[0]) for o in outs] == [0.0, 1.0, 2.0]
    assert any("broken" in str(w.message) for w in caught)
    assert any(r.get("event") == "plugin_error" for r in cap.records)


def test_on_error_raise_propagates_the_plugins_exception() -> None:
    """on_error "raise" (the default): the plugin's own exception class propagates."""
    with pytest.raises(ArithmeticError, match="plugin bug"), capture_events(("b", _Broken())):
        nn.Identity()(hookgrad.ones(1))


# ---------------------------------------------------------------------- running it
class _ForwardNoop:
    @hookimpl
    def hookgrad_forward(self, event: ForwardEvent) -> None:
        return None


def test_runtime_context_undoes_every_engine_hook() -> None:
    """'Both work as context managers that undo everything on exit.'"""
    before = global_hook_counts()
    with hookgrad.Runtime({}, environ={}) as rt:
        rt.register(_ForwardNoop(), name="noop")
        assert global_hook_counts()["forward"] > before["forward"]
    assert global_hook_counts() == before and rt.closed


def test_configure_closes_the_previous_default_runtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """'hookgrad.configure() sets up the default runtime, and closes the previous one first.'"""
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("HOOKGRAD_")]:
        monkeypatch.delenv(name)
    first = hookgrad.configure({})
    second = hookgrad.configure({})
    try:
        assert first.closed and not second.closed
    finally:
        second.close()


def test_a_disabled_table_is_not_imported() -> None:
    """'enabled = false skips it without importing it' (a class_path that does not exist)."""
    table = {"plugins": {"ghost": {"enabled": False, "class_path": "no_such_pkg.mod:Ghost"}}}
    with hookgrad.Runtime(table, environ={}) as rt:
        assert "ghost" not in rt.plugins


def test_capture_events_ignores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """capture_events 'reads no file, no environment variable and no entry point'."""
    monkeypatch.setenv("HOOKGRAD_PLUGINS", "grad_clip,nan_guard")
    with capture_events(("noop", _ForwardNoop())) as capture:
        assert set(capture.runtime.plugins) == {"noop"}
    assert capture.runtime.closed


def test_emit_validates_records_naming_the_bad_field() -> None:
    """runtime.emit takes a PluginRecord (or its mapping); a malformed one is rejected."""
    with capture_events() as capture:
        capture.runtime.emit({"plugin": "p", "kind": "note", "data": {"x": 1}})
        with pytest.raises(ValidationError, match="kind"):
            capture.runtime.emit({"plugin": "p", "data": {}})
        with pytest.raises(ValidationError):
            capture.runtime.emit({"plugin": "p", "kind": "k", "data": {"bad": object()}})
    assert capture.of_plugin("p") == [
        {"plugin": "p", "kind": "note", "step": 0, "module_name": None, "data": {"x": 1}, "rank": 0}
    ]


class _Voter:
    def __init__(self, verdict: object) -> None:
        self.verdict = verdict

    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> object:
        return self.verdict


def _step_under(verdict: object) -> np.ndarray:
    p = nn.Parameter(hookgrad.ones(1))
    p.grad = hookgrad.ones(1)
    optimizer = hookgrad.optim.SGD([p], lr=1.0)
    with capture_events(("voter", _Voter(verdict))):
        optimizer.step()
    return p.detach().numpy()


def test_false_vetoes_and_none_lets_the_step_go_on() -> None:
    """'hookgrad_optimizer_step_pre ... False vetoes the step'; None lets it go on."""
    np.testing.assert_array_equal(_step_under(False), [1.0])
    np.testing.assert_array_equal(_step_under(None), [0.0])


def test_numpy_false_vetoes_as_false_does() -> None:
    """A plugin returning numpy's False (np.isfinite(...).all()) vetoes like False."""
    np.testing.assert_array_equal(_step_under(np.False_), [1.0])


@pytest.mark.parametrize("verdict", [0, "no"], ids=["zero", "string"])
def test_a_return_other_than_none_or_false_is_an_error_naming_the_plugin(verdict: object):
    """The spec allows False (veto) or None (go on); anything else is a misuse error."""
    with pytest.raises((RuntimeError, TypeError), match="voter"):
        _step_under(verdict)


@pytest.mark.parametrize(
    "values",
    [[1e-40], [1e-20, -3e-20, 0.0], [1e-22] * 50],
    ids=["subnormal", "tiny", "many_tiny"],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tensor_stats_norm_of_a_vanishing_gradient(values: list[float], dtype: str) -> None:
    """tensor_stats 'norm' is the L2 norm also when the squares underflow the dtype."""
    array = np.array(values, dtype=dtype)
    reference = float(np.sqrt(np.sum((array.astype(np.float64) * 1e20) ** 2)) / 1e20)
    stats = tensor_stats(hookgrad.tensor(array))
    assert stats["norm"] == pytest.approx(reference, rel=1e-6)
    assert stats["std"] == pytest.approx(float(array.astype(np.float64).std()), rel=1e-5)
