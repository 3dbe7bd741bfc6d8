"""Event sinks: JSON-lines content, buffering that loses nothing, memory, and fan-out."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import warnings
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hookgrad.runtime import EventSink, JsonLinesSink, MemorySink, SinkSet, SinkWarning


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )


class BrokenSink:
    """A sink whose every call raises."""

    def write(self, record: Mapping[str, Any]) -> None:
        raise OSError("disk full")

    def flush(self) -> None:
        raise OSError("disk full")

    def close(self) -> None:
        raise OSError("disk full")

    def __repr__(self) -> str:
        return "BrokenSink()"


def test_every_sink_satisfies_the_protocol(tmp_path: Path) -> None:
    """MemorySink, JsonLinesSink and SinkSet are EventSinks (runtime-checkable protocol)."""
    with JsonLinesSink(tmp_path / "e.jsonl") as jsonl:
        for sink in (MemorySink(), jsonl, SinkSet()):
            assert isinstance(sink, EventSink)
    assert not isinstance(object(), EventSink)


# --------------------------------------------------------------------------------------------
# MemorySink
# --------------------------------------------------------------------------------------------


def test_memory_sink_keeps_copies_until_cleared() -> None:
    """Records are stored as shallow copies, survive close(), and clear() empties them."""
    sink = MemorySink()
    record = {"event": "step", "step": 1}
    sink.write(record)
    record["step"] = 2
    sink.flush()
    sink.close()
    assert sink.records == [{"event": "step", "step": 1}]
    sink.clear()
    assert sink.records == []


# --------------------------------------------------------------------------------------------
# JsonLinesSink
# --------------------------------------------------------------------------------------------


def test_jsonl_writes_one_object_per_line_with_numpy_values(tmp_path: Path) -> None:
    """Each record is a line; numpy scalars become numbers, arrays lists, NaN the string "NaN"."""
    path = tmp_path / "runs" / "a" / "events.jsonl"
    with JsonLinesSink(path) as sink:
        sink.write({"event": "forward", "norm": np.float32(1.5), "shape": (2, 3)})
        sink.write(
            {"event": "grad", "values": np.arange(3), "ok": np.bool_(True), "x": float("nan")}
        )
    first, second = read_lines(path)
    assert first == {"event": "forward", "norm": 1.5, "shape": [2, 3]}
    assert second["values"] == [0, 1, 2] and second["ok"] is True
    assert second["x"] == "NaN"
    assert type(first["norm"]) is float


def test_jsonl_appends_to_an_existing_file(tmp_path: Path) -> None:
    """A second sink on the same path appends after the first one's lines."""
    path = tmp_path / "e.jsonl"
    for run in (1, 2):
        with JsonLinesSink(path) as sink:
            sink.write({"step": 0, "run": run})
    assert read_lines(path) == [{"step": 0, "run": 1}, {"step": 0, "run": 2}]


def test_jsonl_is_buffered_until_flush(tmp_path: Path) -> None:
    """Ordinary records stay in the buffer; flush() writes them all."""
    path = tmp_path / "e.jsonl"
    with JsonLinesSink(path) as sink:
        for step in range(3):
            sink.write({"level": "info", "step": step})
        assert path.read_text(encoding="utf-8") == ""
        sink.flush()
        assert [r["step"] for r in read_lines(path)] == [0, 1, 2]


@pytest.mark.parametrize("level", ["error", "critical"])
def test_jsonl_flushes_at_once_on_an_error_record(tmp_path: Path, level: str) -> None:
    """A record with level error (or critical) is on disk, with all before it, right away."""
    path = tmp_path / "e.jsonl"
    with JsonLinesSink(path) as sink:
        sink.write({"level": "info", "step": 0})
        sink.write({"level": level, "event": "nan gradient"})
        assert read_lines(path) == [
            {"level": "info", "step": 0},
            {"level": level, "event": "nan gradient"},
        ]


def test_jsonl_close_flushes_once_and_refuses_writes(tmp_path: Path) -> None:
    """close() flushes and can be repeated; a later write raises ValueError naming the file."""
    path = tmp_path / "e.jsonl"
    sink = JsonLinesSink(path)
    sink.write({"step": 1})
    sink.close()
    sink.close()
    sink.flush()
    assert sink.closed
    assert read_lines(path) == [{"step": 1}]
    with pytest.raises(ValueError, match=r"event log .*e\.jsonl. is closed"):
        sink.write({"step": 2})


def test_jsonl_refuses_other_objects_naming_the_key(tmp_path: Path) -> None:
    """A value JSON cannot take raises TypeError naming its dotted key; nothing is written."""
    path = tmp_path / "e.jsonl"
    with JsonLinesSink(path) as sink:
        with pytest.raises(TypeError, match=r"cannot write object at key 'stats\.extra\[1\]'"):
            sink.write({"event": "x", "stats": {"extra": [1, object()]}})
        with pytest.raises(TypeError, match=r"cannot write complex128 at key 'z'"):
            sink.write({"z": np.complex128(1j)})
        with pytest.raises(TypeError, match=r"dict key \(1, 2\) under 'table'"):
            sink.write({"table": {(1, 2): 3}})
        sink.write({"event": "after"})
    assert read_lines(path) == [{"event": "after"}]


def test_jsonl_sink_is_not_kept_alive_by_its_exit_hook(tmp_path: Path) -> None:
    """Dropping the last reference collects the sink and closes (flushes) its file."""
    path = tmp_path / "e.jsonl"
    sink = JsonLinesSink(path)
    sink.write({"step": 1})
    ref = weakref.ref(sink)
    del sink
    gc.collect()
    assert ref() is None
    assert read_lines(path) == [{"step": 1}]


@pytest.mark.parametrize("ending", ["", "raise RuntimeError('training crashed')"])
def test_jsonl_keeps_every_event_when_the_process_ends(tmp_path: Path, ending: str) -> None:
    """Without close(), a normal exit or an uncaught exception still flushes every record."""
    path = tmp_path / "e.jsonl"
    result = run_python(
        f"""
        from hookgrad.runtime import JsonLinesSink
        sink = JsonLinesSink({str(path)!r})
        for step in range(1000):
            sink.write({{"level": "info", "step": step}})
        {ending}
        """
    )
    assert ("training crashed" in result.stderr) == bool(ending), result.stderr
    assert [r["step"] for r in read_lines(path)] == list(range(1000))


def test_jsonl_error_record_survives_a_hard_exit(tmp_path: Path) -> None:
    """After an error record, even os._exit (no exit handlers) keeps it and all before it."""
    path = tmp_path / "e.jsonl"
    result = run_python(
        f"""
        import os
        from hookgrad.runtime import JsonLinesSink
        sink = JsonLinesSink({str(path)!r})
        for step in range(5):
            sink.write({{"level": "info", "step": step}})
        sink.write({{"level": "error", "event": "non-finite gradient"}})
        sink.write({{"level": "info", "step": 5}})
        os._exit(3)
        """
    )
    assert result.returncode == 3, result.stderr
    records = read_lines(path)
    assert [r.get("step") for r in records] == [0, 1, 2, 3, 4, None]
    assert records[-1]["event"] == "non-finite gradient"


# --------------------------------------------------------------------------------------------
# SinkSet
# --------------------------------------------------------------------------------------------


def test_sink_set_fans_out_to_every_sink(tmp_path: Path) -> None:
    """write, flush and close reach each sink in order."""
    memory = MemorySink()
    path = tmp_path / "e.jsonl"
    sinks = SinkSet([memory, JsonLinesSink(path)])
    sinks.write({"step": 1})
    sinks.flush()
    assert read_lines(path) == memory.records == [{"step": 1}]
    sinks.close()
    assert len(sinks) == 2
    assert [type(s).__name__ for s in sinks] == ["MemorySink", "JsonLinesSink"]


def test_sink_set_survives_a_failing_sink_and_warns_once() -> None:
    """A raising sink is reported once as SinkWarning naming it; the others get every record."""
    before, after = MemorySink(), MemorySink()
    broken = BrokenSink()
    sinks = SinkSet([before, broken, after])
    with pytest.warns(SinkWarning) as caught:
        for step in range(3):
            sinks.write({"step": step})
        sinks.flush()
        sinks.close()
    assert len(caught) == 1
    warning = caught[0].message
    assert isinstance(warning, SinkWarning)
    assert str(warning).startswith("event sink BrokenSink() raised in write(): OSError: disk full")
    assert warning.sink is broken and isinstance(warning.error, OSError)
    assert before.records == after.records == [{"step": 0}, {"step": 1}, {"step": 2}]
    assert sinks.errors == {id(broken): 5}


def test_sink_set_reports_a_sink_again_after_it_is_re_added() -> None:
    """remove() forgets a sink's error count, so a re-added sink is reported afresh."""
    broken = BrokenSink()
    sinks = SinkSet([broken])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sinks.write({})
        sinks.remove(broken)
        sinks.add(broken)
        sinks.write({})
    assert len(caught) == 2
    assert sinks.sinks == (broken,)
