"""docs/plugins/event_log.md, promise by promise: hooks chosen, sampling, selectors, the veto path.

Expected summaries are computed with numpy here from the tensors the engine handed to an
independent global hook or from the plain values of the run.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import hookgrad
from hookgrad.hookspecs import HOOK_EVENTS, OptimizerStepPreEvent, hookimpl
from hookgrad.plugins.event_log import EventLog
from hookgrad.testing import capture_events, global_hook_counts

nn = hookgrad.nn
PHASES = [model.model_fields["phase"].default for model in HOOK_EVENTS.values()]


def _model() -> nn.Sequential:
    hookgrad.manual_seed(3)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))


def _train(table: Mapping[str, Any], steps: int = 1, *others: tuple[str, object]) -> list[dict]:
    """``steps`` training steps under event_log(``table``); its records, in order."""
    model = _model()
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    x = hookgrad.randn(5, 3, requires_grad=True)
    plugin = EventLog(EventLog.Config.model_validate(table))
    with capture_events(*others, ("event_log", plugin)) as capture:
        for _ in range(steps):
            optimizer.zero_grad()
            (model(x) ** 2).mean().backward()
            optimizer.step()
    return capture.of_plugin("event_log")


def _summary_of(array: np.ndarray) -> dict[str, Any]:
    a = array.astype(np.float64)
    return {
        "shape": list(array.shape),
        "norm": float(np.sqrt(np.sum(a**2))),
        "mean": float(a.mean()),
        "min": float(a.min()),
        "max": float(a.max()),
    }


def _assert_summary(summary: Mapping[str, Any], array: np.ndarray) -> None:
    for key, value in _summary_of(array).items():
        assert summary[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key


# ---------------------------------------------------------------------- configuration
@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"hooks": ["full_backward"]}, "hooks"),
        ({"hooks": "backward"}, "hooks"),
        ({"hooks": []}, "hooks"),
        ({"every_n_steps": 0}, "every_n_steps"),
        ({"every_n_steps": 1.5}, "every_n_steps"),
        ({"hook": ["backward"]}, "hook"),
    ],
)
def test_bad_tables_fail_naming_the_key(table: dict[str, Any], field: str) -> None:
    """'hooks ... At least one' of the eight phases; 'every_n_steps (≥ 1)'; no unknown key."""
    with pytest.raises(ValidationError) as info:
        EventLog.Config.model_validate(table)
    assert {e["loc"][0] for e in info.value.errors()} == {field}


def test_the_eight_phases_are_the_documented_ones() -> None:
    """The hooks table lists eight phases; each is accepted alone."""
    assert sorted(PHASES) == sorted(
        [
            "forward_pre",
            "forward",
            "backward_pre",
            "backward",
            "backward_begin",
            "backward_end",
            "optimizer_step_pre",
            "optimizer_step_post",
        ]
    )
    for phase in PHASES:
        assert EventLog.Config(hooks=(phase,)).hooks == (phase,)


# ---------------------------------------------------------------------- one phase at a time
@pytest.mark.parametrize("phase", PHASES)
def test_each_phase_writes_only_its_own_events(phase: str) -> None:
    """A record for every event of the chosen hook, and none for a hook left out."""
    records = _train({"hooks": [phase]})
    assert records and {r["phase"] for r in records} == {phase}
    hook = next(h for h, m in HOOK_EVENTS.items() if m.model_fields["phase"].default == phase)
    assert {r["hook"] for r in records} == {hook}
    assert all(r["plugin"] == "event_log" and r["kind"] == "event" for r in records)
    json.dumps(records, allow_nan=False)


@pytest.mark.parametrize("phase", ["forward_pre", "forward", "backward_pre", "backward"])
def test_module_phases_write_one_record_per_module_call(phase: str) -> None:
    """Module hooks fire 'for every selected module on every call': root, 0, 1, 2 per step."""
    records = _train({"hooks": [phase]}, steps=2)
    names = sorted((r["step"], r["module_name"]) for r in records)
    assert names == sorted((s, n) for s in (0, 1) for n in ("", "0", "1", "2"))


@pytest.mark.parametrize("phase", ["backward_begin", "backward_end", "optimizer_step_post"])
def test_run_phases_write_one_record_per_step(phase: str) -> None:
    """Run events belong to no module: one record per step, without module fields."""
    records = _train({"hooks": [phase]}, steps=3)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert all("module_name" not in r for r in records)


@pytest.mark.parametrize(("every", "expected"), [(2, [0, 2, 4]), (5, [0]), (1, [0, 1, 2, 3, 4])])
def test_every_n_steps_writes_steps_0_n_2n(every: int, expected: list[int]) -> None:
    """'Write the events of steps 0, N, 2N, ... only' for run events too."""
    records = _train({"hooks": ["backward_end"], "every_n_steps": every}, steps=5)
    assert [r["step"] for r in records] == expected


# ---------------------------------------------------------------------- values
def test_backward_end_record_summarises_the_loss() -> None:
    """The backward_end record carries the loss as a TensorSummary of its value."""
    model = _model()
    x = hookgrad.randn(5, 3)
    plugin = EventLog(EventLog.Config(hooks=("backward_end", "backward_begin")))
    with capture_events(("event_log", plugin)) as capture:
        loss = (model(x) ** 2).mean()
        loss.backward()
    begin, end = capture.of_plugin("event_log")
    assert (begin["phase"], end["phase"]) == ("backward_begin", "backward_end")
    assert begin["gradient"] is None  # 'None: ones for a scalar loss'
    _assert_summary(end["loss"], loss.detach().numpy())
    assert end["loss"]["shape"] == []


def test_full_backward_records_equal_what_a_global_hook_sees() -> None:
    """backward records: grad_input/grad_output summaries of each call, null for None."""
    model = _model()
    seen: dict[str, tuple[list, list]] = {}
    names = {id(m): n for n, m in model.named_modules()}

    def spy(module: Any, grad_input: Any, grad_output: Any) -> None:
        copy = [None if g is None else g.numpy().copy() for g in grad_input]
        seen[names[id(module)]] = (copy, [g.numpy().copy() for g in grad_output])

    handle = nn.modules.module.register_module_full_backward_hook(spy)
    plugin = EventLog(EventLog.Config())
    try:
        with (
            pytest.warns(UserWarning, match="Full backward hook is firing"),
            capture_events(("event_log", plugin)) as capture,
        ):
            model(hookgrad.randn(5, 3)).sum().backward()
    finally:
        handle.remove()
    records = capture.of_plugin("event_log")
    assert {r["module_name"] for r in records} == set(seen)
    for record in records:
        grad_input, grad_output = seen[record["module_name"]]
        for summary, array in zip(record["grad_input"], grad_input, strict=True):
            if array is None:
                assert summary is None
            else:
                _assert_summary(summary, array)
        for summary, array in zip(record["grad_output"], grad_output, strict=True):
            _assert_summary(summary, array)
    first = next(r for r in records if r["module_name"] == "0")
    assert first["grad_input"] == [None]  # 'the first module's ... grad_input [null]'


def test_nonfinite_values_do_not_break_the_log(tmp_path: Path) -> None:
    """'Non-finite values do not break the log': moments over finite entries, counts of others."""
    log = tmp_path / "events.jsonl"
    x = hookgrad.tensor([[1.0, math.nan, math.inf, -2.0]], requires_grad=True)
    model = nn.Sequential(nn.Identity())
    config = {"plugins": {"event_log": {"hooks": ["forward"]}}, "events": {"jsonl": str(log)}}
    with hookgrad.Runtime(config, environ={}):
        model(x)
    line = next(line for line in log.read_text().splitlines() if '"event_log"' in line)
    assert "NaN" not in line and "Infinity" not in line
    output = json.loads(line)["output"]
    assert output["nan"] == 1 and output["inf"] == 1 and output["nonfinite"] == 2
    _assert_summary(
        {k: output[k] for k in ("norm", "mean", "min", "max")} | {"shape": [2]},
        np.array([1.0, -2.0]),
    )


# ---------------------------------------------------------------------- selectors and veto
def test_selectors_do_not_apply_to_backward_begin_and_end() -> None:
    """'Selectors do not apply to backward_begin and backward_end', which belong to no module."""
    table = {"hooks": ["backward_begin", "backward_end", "backward"], "exclude": ["*"]}
    records = _train(table)
    assert [r["phase"] for r in records] == ["backward_begin", "backward_end"]


def test_module_types_choose_the_parameters_of_optimizer_events() -> None:
    """At the optimizer step the selectors 'choose the parameters, by their owning module'."""
    records = _train({"hooks": ["optimizer_step_pre"], "exclude": ["2"]})
    [record] = records
    assert sorted(record["parameters"]) == ["0.bias", "0.weight"]
    for entry in record["parameters"].values():
        assert entry["grad"] is not None and entry["param"]["shape"]


class _Veto:
    @hookimpl(tryfirst=True)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> bool:
        return False


def test_a_vetoed_step_has_a_skipped_post_record_naming_the_plugin() -> None:
    """'A step vetoed by an earlier plugin writes no optimizer_step_pre record ... vetoed_by'."""
    records = _train({"hooks": ["optimizer_step_pre", "optimizer_step_post"]}, 1, ("veto", _Veto()))
    [record] = records
    assert record["phase"] == "optimizer_step_post"
    assert record["skipped"] is True and record["vetoed_by"] == "veto"


def test_optimizer_step_post_shows_the_updated_parameters() -> None:
    """The optimizer_step_post record holds 'the updated parameters' (after the SGD step)."""
    model = _model()
    optimizer = hookgrad.optim.SGD(model.named_parameters(), lr=0.5)
    plugin = EventLog(EventLog.Config(hooks=("optimizer_step_pre", "optimizer_step_post")))
    (model(hookgrad.randn(4, 3)) ** 2).sum().backward()
    before = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
    grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    with capture_events(("event_log", plugin)) as capture:
        optimizer.step()
    pre, post = capture.of_plugin("event_log")
    for name in before:
        _assert_summary(pre["parameters"][name]["param"], before[name])
        _assert_summary(post["parameters"][name]["param"], before[name] - 0.5 * grads[name])
        _assert_summary(post["parameters"][name]["grad"], grads[name])


def test_only_optimizer_hooks_leave_module_calls_on_the_fast_path() -> None:
    """Only optimizer_step_post: no module hook once the first step has named the model."""
    before = global_hook_counts()
    model = nn.Linear(2, 1)
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.1)
    plugin = EventLog(EventLog.Config(hooks=("optimizer_step_post",)))
    with capture_events(("event_log", plugin)):
        model(hookgrad.ones(1, 2)).sum().backward()
        optimizer.step()
        assert global_hook_counts() == before
    backward_log = ("event_log", EventLog(EventLog.Config(hooks=("backward",))))
    with warnings.catch_warnings(), capture_events(backward_log):
        warnings.simplefilter("error")  # the runtime's own hooks raise no engine warning
        model(hookgrad.ones(1, 2)).sum().backward()
        optimizer.step()
        assert global_hook_counts()["backward"] == before["backward"] + 1


def test_the_jsonl_file_is_appended_to_by_a_second_run(tmp_path: Path) -> None:
    """'The JSON-lines file is appended to, so a second run adds to the first one's records.'"""
    log = tmp_path / "events.jsonl"
    config = {"plugins": {"event_log": {"hooks": ["forward"]}}, "events": {"jsonl": str(log)}}
    model = nn.Sequential(nn.Identity())
    counts = []
    for _ in range(2):
        with hookgrad.Runtime(config, environ={}):
            model(hookgrad.ones(2))
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        counts.append(sum(1 for r in lines if r.get("plugin") == "event_log"))
    assert counts == [2, 4]  # root and child forward, once per run


def test_no_sink_no_records_and_no_error() -> None:
    """'No sink, no records': a runtime without [events] runs event_log without failing."""
    model = nn.Sequential(nn.Identity())
    with hookgrad.Runtime({"plugins": {"event_log": {"hooks": ["forward"]}}}, environ={}) as rt:
        out = model(hookgrad.ones(2))
    np.testing.assert_array_equal(out.numpy(), [1.0, 1.0])
    assert rt.memory is None or rt.memory.records == []


def _records_of(records: Sequence[Mapping[str, Any]], phase: str) -> list[Mapping[str, Any]]:
    return [r for r in records if r["phase"] == phase]


def test_every_record_has_step_and_phase_and_no_envelope_clash() -> None:
    """'step and phase always'; the envelope keys plugin, kind, hook are never overwritten."""
    records = _train({"hooks": PHASES}, steps=2)
    assert {r["phase"] for r in records} == set(PHASES)
    for record in records:
        assert isinstance(record["step"], int) and record["plugin"] == "event_log"
        assert record["kind"] == "event" and record["hook"].startswith("hookgrad_")
    assert len(_records_of(records, "optimizer_step_pre")) == 2


class _BrokenSink:
    """A sink whose every write fails."""

    def __init__(self) -> None:
        self.calls = 0

    def write(self, record: Mapping[str, Any]) -> None:
        self.calls += 1
        raise OSError("disk full")

    def flush(self) -> None:
        """Nothing buffered."""

    def close(self) -> None:
        """Nothing to release."""


def test_a_failing_sink_is_a_sink_warning_and_training_goes_on() -> None:
    """'a failing sink does not [raise]: the runtime reports it as a SinkWarning and goes on';
    the other sinks still get every record."""
    from hookgrad.runtime import SinkWarning

    model = nn.Sequential(nn.Identity())
    broken = _BrokenSink()
    plugin = EventLog(EventLog.Config(hooks=("forward",)))
    with capture_events(("event_log", plugin)) as capture:
        capture.runtime.sinks.add(broken)
        with pytest.warns(SinkWarning, match="disk full") as caught:
            for _ in range(3):
                model(hookgrad.ones(1))
    assert len([w for w in caught if issubclass(w.category, SinkWarning)]) == 1
    assert broken.calls == 6 and len(capture.of_plugin("event_log")) == 6


def test_optimizer_events_name_parameters_after_a_watched_model() -> None:
    """'runtime.watch(model)' names the optimizer's parameters when no module hook runs."""
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
    optimizer = hookgrad.optim.SGD(model.parameters(), lr=0.0)
    for p in model.parameters():
        p.grad = hookgrad.ones(*p.shape)
    names = []
    for watch in (False, True):
        plugin = EventLog(EventLog.Config(hooks=("optimizer_step_pre",)))
        with capture_events(("event_log", plugin)) as capture:
            if watch:
                capture.runtime.watch(model)
            optimizer.step()
        [record] = capture.of_plugin("event_log")
        names.append(sorted(record["parameters"]))
    assert names[0] == ["param0", "param1", "param2", "param3"]
    assert names[1] == ["0.bias", "0.weight", "2.bias", "2.weight"]
