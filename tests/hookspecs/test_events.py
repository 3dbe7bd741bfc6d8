"""Event payloads: frozen, strict, sharing tensors; JSON summaries and schemas of every model."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad
from hookgrad.hookspecs import (
    HOOK_EVENTS,
    TENSOR_SUMMARY_SCHEMA,
    BackwardBeginEvent,
    Event,
    ForwardEvent,
    ForwardPreEvent,
    FullBackwardEvent,
    ModuleEvent,
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginRecord,
    RunEvent,
    TensorSummary,
    hookimpl,
    specs,
    tensor_stats,
)
from hookgrad.testing import capture_events

from .conftest import MODULE, make_events

ALL_MODELS = [*HOOK_EVENTS.values(), PluginRecord]
SUMMARY_KEYS = set(TENSOR_SUMMARY_SCHEMA["properties"])


def _ids(models: list[type[Event]]) -> list[str]:
    return [m.__name__ for m in models]


# ---------------------------------------------------------------------- model shape
def test_hook_events_name_their_hooks() -> None:
    """HOOK_EVENTS maps each hook to its payload model, whose .hook is that name."""
    for name, model in HOOK_EVENTS.items():
        assert model.hook == name
        assert hasattr(specs, name)


def test_module_and_run_events_share_their_bases() -> None:
    """The four module payloads subclass ModuleEvent, the four loop payloads RunEvent."""
    module = {n for n, m in HOOK_EVENTS.items() if issubclass(m, ModuleEvent)}
    run = {n for n, m in HOOK_EVENTS.items() if issubclass(m, RunEvent)}
    assert module == {
        "hookgrad_forward_pre",
        "hookgrad_forward",
        "hookgrad_backward_pre",
        "hookgrad_full_backward",
    }
    assert run == set(HOOK_EVENTS) - module


@pytest.mark.parametrize(
    ("model", "phase"),
    [
        (ForwardPreEvent, "forward_pre"),
        (ForwardEvent, "forward"),
        (FullBackwardEvent, "backward"),
        (BackwardBeginEvent, "backward_begin"),
        (OptimizerStepPostEvent, "optimizer_step_post"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_phase_is_fixed_per_model(
    events: dict[type[Event], Event], model: type[Event], phase: str
) -> None:
    """Each payload carries its phase by default and refuses another one."""
    event = events[model]
    assert event.phase == phase  # type: ignore[attr-defined]
    data = {**event.__dict__, "phase": "forward_pre" if phase != "forward_pre" else "forward"}
    with pytest.raises(pydantic.ValidationError, match="phase"):
        model(**data)


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize("model", ALL_MODELS, ids=_ids(ALL_MODELS))
def test_events_are_frozen(events: dict[type[Event], Event], model: type[Event]) -> None:
    """Assigning to any field of a payload raises."""
    event = events[model]
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        event.step = 4  # type: ignore[misc]


@pytest.mark.parametrize("model", ALL_MODELS, ids=_ids(ALL_MODELS))
def test_events_reject_unknown_fields(events: dict[type[Event], Event], model: type[Event]) -> None:
    """An extra field is rejected, named in the error."""
    with pytest.raises(pydantic.ValidationError, match="grad_inptu"):
        model(**events[model].__dict__, grad_inptu=())


def test_events_are_strict() -> None:
    """No coercion: a list for a tuple, a float tensor stand-in or a bool step all fail."""
    g = hookgrad.ones(2)
    with pytest.raises(pydantic.ValidationError, match="grad_output"):
        FullBackwardEvent(**MODULE, grad_input=(g,), grad_output=[g])  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError, match="grad_input"):
        FullBackwardEvent(**MODULE, grad_input=(np.ones(2),), grad_output=(g,))
    with pytest.raises(pydantic.ValidationError, match="call_index"):
        FullBackwardEvent(**{**MODULE, "call_index": "0"}, grad_input=(g,), grad_output=(g,))
    with pytest.raises(pydantic.ValidationError, match="step"):
        FullBackwardEvent(**{**MODULE, "step": -1}, grad_input=(g,), grad_output=(g,))


def test_required_fields_have_no_default() -> None:
    """A module payload without its module fields, or a loss event without gradient, fails."""
    g = hookgrad.ones(2)
    partial = {"module_type": "Linear", "call_index": 0, "step": 0}
    with pytest.raises(pydantic.ValidationError, match="module_name"):
        FullBackwardEvent.model_validate({**partial, "grad_input": (g,), "grad_output": (g,)})
    with pytest.raises(pydantic.ValidationError, match="gradient"):
        BackwardBeginEvent.model_validate({"step": 0, "loss": g})


def test_plugin_record_data_must_be_json() -> None:
    """A PluginRecord's data holds JSON values only: a tensor in it is rejected."""
    with pytest.raises(pydantic.ValidationError, match="data"):
        PluginRecord(plugin="p", kind="k", step=0, data={"t": hookgrad.ones(1)})


# ---------------------------------------------------------------------- sharing
def _alias_of(alias: Any, original: hookgrad.Tensor) -> bool:
    """Whether ``alias`` is a read-only alias of ``original``: its memory, not writable."""
    data = alias.detach().numpy()
    return np.shares_memory(data, original.numpy()) and not data.flags.writeable


def test_tensors_are_shared_not_copied() -> None:
    """Every tensor read from a payload is a read-only alias of the one passed in (same
    memory, never copied); the stored objects, which model_dump returns, are the originals."""
    t, g = hookgrad.ones(3), hookgrad.zeros(3)
    event = FullBackwardEvent(**MODULE, grad_input=(t, None), grad_output=(g,))
    assert _alias_of(event.grad_input[0], t) and event.grad_input[1] is None
    assert _alias_of(event.grad_output[0], g)
    fwd = ForwardEvent(**MODULE, args=(t, 1), kwargs={"mask": g}, output=g)
    assert _alias_of(fwd.args[0], t) and fwd.args[1] == 1
    assert _alias_of(fwd.kwargs["mask"], g) and _alias_of(fwd.output, g)
    loss = BackwardBeginEvent(step=0, loss=t, gradient=g)
    assert _alias_of(loss.loss, t) and _alias_of(loss.gradient, g)
    p = hookgrad.nn.Parameter(hookgrad.ones(2))
    step = OptimizerStepPreEvent(step=0, optimizer_type="SGD", parameters=(("w", p),))
    assert step.parameters[0][1] is p  # the step-time gradient API: p.grad, changed in place
    assert event.model_dump()["grad_input"][0] is t  # python-mode dump keeps the objects
    assert event.__dict__["grad_input"][0] is t


@pytest.mark.parametrize("how", ["replaced", "model_copy"])
def test_replacing_one_field_shares_the_rest(how: str) -> None:
    """replaced(field, value), how the runtime passes a replacement on, makes what
    model_copy(update=...) makes: the new value, the other tensors shared, the original kept."""
    t, g, new = hookgrad.ones(3), hookgrad.zeros(3), hookgrad.full((3,), 2.0)
    event = FullBackwardEvent(**MODULE, grad_input=(t,), grad_output=(g,))
    if how == "replaced":
        replaced = event.replaced("grad_input", (new,))
    else:
        replaced = event.model_copy(update={"grad_input": (new,)})
    assert type(replaced) is FullBackwardEvent
    assert replaced.__dict__["grad_input"][0] is new and replaced.__dict__["grad_output"][0] is g
    assert _alias_of(replaced.grad_input[0], new) and _alias_of(replaced.grad_output[0], g)
    assert event.__dict__["grad_input"][0] is t
    assert replaced == event.model_copy(update={"grad_input": (new,)})
    with pytest.raises(pydantic.ValidationError):
        replaced.module_name = "other"  # type: ignore[misc]  # frozen like any event


# ---------------------------------------------------------------------- tensor summaries
def test_summary_numbers_on_a_known_tensor() -> None:
    """Stats are over the finite entries; NaN and Inf are counted; zeros over all entries."""
    t = hookgrad.tensor([[3.0, 0.0, float("nan")], [float("-inf"), -4.0, 0.0]])
    s = tensor_stats(t)
    assert s == {
        "shape": [2, 3],
        "dtype": "float32",
        "norm": 5.0,
        "mean": pytest.approx(-0.25),
        "std": pytest.approx(math.sqrt((3.25**2 + 0.25**2 * 2 + 3.75**2) / 4)),
        "min": -4.0,
        "max": 3.0,
        "nonfinite": 2,
        "nan": 1,
        "inf": 1,
        "zero_fraction": pytest.approx(2 / 6),
    }
    assert t._data[0, 2] != t._data[0, 2]  # the tensor is untouched


def test_summary_of_a_finite_tensor_matches_numpy() -> None:
    """On a finite tensor: norm, mean, population std, min, max as numpy computes them."""
    a = np.array([[0.5, -1.5, 2.0], [0.0, 4.0, -3.0]], dtype=np.float32)
    s = tensor_stats(hookgrad.from_numpy(a))
    assert s["norm"] == pytest.approx(float(np.linalg.norm(a)), rel=1e-6)
    assert s["mean"] == pytest.approx(float(a.mean()), rel=1e-6)
    assert s["std"] == pytest.approx(float(a.std()), rel=1e-6)
    assert (s["min"], s["max"], s["nonfinite"]) == (-3.0, 4.0, 0)
    assert s["zero_fraction"] == pytest.approx(1 / 6)


@pytest.mark.parametrize(
    ("values", "dtype"),
    [([float("nan"), float("inf")], "float32"), ([], "float32")],
    ids=["all-nonfinite", "empty"],
)
def test_summary_without_finite_entries(values: list[float], dtype: str) -> None:
    """No finite entry: norm 0, mean/std/min/max None; an empty tensor has no zero fraction."""
    s = tensor_stats(hookgrad.tensor(values))
    assert (s["norm"], s["mean"], s["std"], s["min"], s["max"]) == (0.0, None, None, None, None)
    assert s["nonfinite"] == len(values)
    assert s["zero_fraction"] == (0.0 if values else None)


def test_summary_of_integer_bool_and_half_tensors() -> None:
    """Integer and bool tensors are summarised as numbers; float16 squares do not overflow."""
    ints = tensor_stats(hookgrad.tensor([1, 2, 0, 3]))
    assert (ints["dtype"], ints["mean"], ints["max"], ints["zero_fraction"]) == (
        "int64",
        1.5,
        3.0,
        0.25,
    )
    flags = tensor_stats(hookgrad.tensor([True, False, True, True]))
    assert (flags["dtype"], flags["mean"], flags["norm"]) == ("bool", 0.75, pytest.approx(3**0.5))
    half = tensor_stats(hookgrad.full((4,), 300.0, dtype=hookgrad.float16))
    assert (half["norm"], half["nonfinite"]) == (600.0, 0)


def test_summary_of_huge_finite_values_is_finite() -> None:
    """Finite values whose squares overflow (float32 and float64) still give the right norm."""
    big32 = tensor_stats(hookgrad.tensor([3e20, -4e20]))
    assert big32["norm"] == pytest.approx(5e20, rel=1e-6) and big32["nonfinite"] == 0
    big64 = tensor_stats(hookgrad.tensor([3e200, -4e200], dtype=hookgrad.float64))
    assert big64["norm"] == pytest.approx(5e200) and big64["std"] == pytest.approx(3.5e200)
    top = tensor_stats(hookgrad.tensor([1e308, -1e308], dtype=hookgrad.float64))  # >= 2**1023
    assert top["norm"] == pytest.approx(math.sqrt(2) * 1e308) and top["std"] == 1e308


def test_summary_std_when_the_mean_dominates() -> None:
    """A tensor far from zero with a small spread (a LayerNorm weight) gets an accurate std."""
    rng = np.random.default_rng(0)
    a = (1000.0 + rng.standard_normal(10_000) * 1e-2).astype(np.float32)
    s = tensor_stats(hookgrad.from_numpy(a))
    assert s["std"] == pytest.approx(float(a.astype(np.float64).std()), rel=1e-3)


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        dtype=st.sampled_from([np.float32, np.float64]),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=6),
        elements=st.floats(-1e6, 1e6, width=32) | st.sampled_from([math.nan, math.inf, -math.inf]),
    )
)
def test_summary_agrees_with_a_masked_numpy_reference(a: np.ndarray) -> None:
    """On any float array: counts exact, moments equal numpy's over the finite entries."""
    s = tensor_stats(hookgrad.from_numpy(a))
    finite = a[np.isfinite(a)].astype(np.float64)
    assert s["shape"] == list(a.shape)
    assert s["nan"] == int(np.isnan(a).sum()) and s["inf"] == int(np.isinf(a).sum())
    assert s["nonfinite"] == a.size - finite.size
    assert s["zero_fraction"] == (None if a.size == 0 else pytest.approx((a == 0).mean()))
    if finite.size == 0:
        assert s["mean"] is None
        return
    assert s["norm"] == pytest.approx(float(np.sqrt((finite**2).sum())), rel=1e-5, abs=1e-6)
    assert s["mean"] == pytest.approx(float(finite.mean()), rel=1e-5, abs=1e-3)
    assert s["std"] == pytest.approx(float(finite.std()), rel=1e-3, abs=1e-3)
    assert (s["min"], s["max"]) == (float(finite.min()), float(finite.max()))


# ---------------------------------------------------------------------- event summaries
@pytest.mark.parametrize("model", ALL_MODELS, ids=_ids(ALL_MODELS))
def test_summary_is_strict_json(events: dict[type[Event], Event], model: type[Event]) -> None:
    """summary() of every payload survives json.dumps without NaN, tensors as summaries."""
    summary = events[model].summary()
    assert json.loads(json.dumps(summary, allow_nan=False)) == summary
    assert summary == json.loads(events[model].model_dump_json())


def test_full_backward_summary_shape(events: dict[type[Event], Event]) -> None:
    """Scalar fields as-is, one TensorSummary per tensor, None for None entries."""
    summary = events[FullBackwardEvent].summary()
    assert {k: summary[k] for k in ("module_name", "module_type", "call_index", "step")} == MODULE
    assert summary["phase"] == "backward"
    assert summary["grad_input"][1] is None
    assert set(summary["grad_input"][0]) == SUMMARY_KEYS
    assert summary["grad_input"][0]["norm"] == 0.5


def test_forward_summary_handles_any_argument() -> None:
    """args/kwargs/output: tensors summarised, scalars kept, NaN floats and objects as text."""
    t = hookgrad.ones(2)
    event = ForwardEvent(
        **MODULE,
        args=(t, 3, float("nan"), "x", [t, None], np.float32(1.5), object),
        kwargs={"nested": {"k": (t,)}},
        output=(t, {"aux": 1.0}),
    )
    s = event.summary()
    assert s["args"][0]["norm"] == pytest.approx(2**0.5)
    assert s["args"][1:4] == [3, "NaN", "x"]
    assert s["args"][4][1] is None and s["args"][5] == 1.5
    assert s["args"][6] == "<class 'object'>"
    assert s["kwargs"]["nested"]["k"][0]["shape"] == [2]
    assert s["output"][1] == {"aux": 1.0}
    json.dumps(s, allow_nan=False)


def test_optimizer_summary_has_param_and_grad_per_name(events: dict[type[Event], Event]) -> None:
    """parameters become {name: {param, grad}}; a parameter without .grad has grad None."""
    summary = events[OptimizerStepPostEvent].summary()
    assert set(summary["parameters"]) == {"weight", "bias"}
    assert summary["parameters"]["weight"]["grad"]["mean"] == 1.0
    assert summary["parameters"]["bias"]["grad"] is None
    assert summary["parameters"]["weight"]["param"]["shape"] == [1, 2]
    assert (summary["skipped"], summary["vetoed_by"]) == (True, "guard")


def test_tensor_summary_typed_dict_matches_the_schema() -> None:
    """TensorSummary's keys are the schema's properties, all required, and a summary validates."""
    assert list(TensorSummary.__annotations__) == list(TENSOR_SUMMARY_SCHEMA["properties"])
    assert TENSOR_SUMMARY_SCHEMA["required"] == list(TENSOR_SUMMARY_SCHEMA["properties"])
    adapter = pydantic.TypeAdapter(TensorSummary)
    summary = tensor_stats(hookgrad.tensor([1.0, float("inf")]))
    assert adapter.validate_python(summary, strict=True) == summary


# ---------------------------------------------------------------------- JSON schemas
@pytest.mark.parametrize("model", ALL_MODELS, ids=_ids(ALL_MODELS))
@pytest.mark.parametrize("mode", ["validation", "serialization"])
def test_json_schema_is_json(model: type[Event], mode: Any) -> None:
    """model_json_schema() works for every payload and is plain JSON, forbidding extra keys."""
    schema = model.model_json_schema(mode=mode)
    assert json.loads(json.dumps(schema, allow_nan=False)) == schema
    assert schema["additionalProperties"] is False
    assert schema["description"]


@pytest.mark.parametrize("model", ALL_MODELS, ids=_ids(ALL_MODELS))
def test_summary_keys_are_the_schema_properties(model: type[Event]) -> None:
    """The summary of a payload has exactly the properties its schema lists, all described."""
    schema = model.model_json_schema(mode="serialization")
    summary = make_events()[model].summary()
    assert set(summary) == set(schema["properties"])
    for name, prop in schema["properties"].items():
        if name != "phase":
            assert prop.get("description"), f"{model.__name__}.{name} has no description"


def test_tensor_fields_are_described_by_the_summary_schema() -> None:
    """A tensor field's schema is the TensorSummary object (nullable where None is allowed)."""
    props = BackwardBeginEvent.model_json_schema()["properties"]
    assert props["loss"] == {**TENSOR_SUMMARY_SCHEMA, "description": props["loss"]["description"]}
    assert {"type": "null"} in props["gradient"]["anyOf"]
    assert TENSOR_SUMMARY_SCHEMA in props["gradient"]["anyOf"]
    grads = FullBackwardEvent.model_json_schema()["properties"]["grad_input"]
    assert grads["type"] == "array"
    assert grads["items"]["anyOf"] == [TENSOR_SUMMARY_SCHEMA, {"type": "null"}]


@pytest.mark.parametrize(
    "record",
    [
        {"plugin": "p", "kind": "k"},
        {"plugin": "p", "kind": "k", "step": 7, "module_name": "a.b", "data": {"x": [1, 2.5]}},
        {"plugin": "p", "kind": "k", "step": -1},
        {"plugin": "p", "kind": "k", "step": True},
        {"plugin": "p", "kind": "k", "extra": 1},
        {"plugin": "p", "kind": "k", "data": {"x": (1,)}},
        {"plugin": "p", "kind": "k", "data": {"x": np.float32(1.0)}},
        {"plugin": 3, "kind": "k"},
        {"kind": "k"},
    ],
)
def test_record_fast_path_agrees_with_the_model(record: dict[str, Any]) -> None:
    """PluginRecord.json_of accepts exactly what the model accepts, with the same result."""
    try:
        expected = PluginRecord.model_validate({"step": 5, **record}).summary()
    except pydantic.ValidationError:
        with pytest.raises(pydantic.ValidationError):
            PluginRecord.json_of(record, step=5)
    else:
        assert PluginRecord.json_of(record, step=5) == expected


class _EveryEvent:
    """Keeps every event the runtime passes, of all eight hooks."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    @hookimpl
    def hookgrad_forward_pre(self, event: Any) -> None:
        self.seen.append(event)

    @hookimpl
    def hookgrad_forward(self, event: Any) -> None:
        self.seen.append(event)

    @hookimpl
    def hookgrad_backward_pre(self, event: Any) -> None:
        self.seen.append(event)

    @hookimpl
    def hookgrad_full_backward(self, event: Any) -> None:
        self.seen.append(event)

    @hookimpl
    def hookgrad_backward_begin(self, event: Any) -> None:
        self.seen.append(event)

    @hookimpl
    def hookgrad_backward_end(self, event: Any) -> None:
        self.seen.append(event)

    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: Any) -> None:
        self.seen.append(event)

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: Any) -> None:
        self.seen.append(event)


def test_trusted_events_equal_validated_ones() -> None:
    """The runtime builds events with ``trusted`` (all fields, in field order): the result equals
    the validated event field for field, in the same order, and behaves like one."""

    recorder = _EveryEvent()
    model = hookgrad.nn.Sequential(hookgrad.nn.Linear(2, 2), hookgrad.nn.Tanh())
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    with capture_events(("recorder", recorder)):
        model(hookgrad.ones(1, 2, requires_grad=True)).sum().backward()
        optimizer.step()
    assert {type(e).hook for e in recorder.seen} == set(HOOK_EVENTS)
    for event in recorder.seen:
        validated = type(event)(**event.__dict__)
        assert event == validated
        assert list(event.__dict__) == list(validated.__dict__) == list(type(event).model_fields)
        assert event.summary() == validated.summary()
        with pytest.raises(pydantic.ValidationError):
            event.step = 1  # frozen
