"""make_logger and capture_logs: level filtering, routing to stderr or sinks, no global state."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import structlog

from hookgrad.runtime import (
    JsonLinesSink,
    MemorySink,
    SinkSet,
    SinkWarning,
    capture_logs,
    load_config,
    make_logger,
)


class Exploding:
    """A value whose repr raises: proves a filtered call never looks at its arguments."""

    def __repr__(self) -> str:
        raise AssertionError("a filtered log call rendered its arguments")


def without_timestamps(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "timestamp"} for r in records]


def test_level_filters_what_reaches_the_sinks() -> None:
    """At "info", debug calls vanish and info, warning, error reach the sink as dicts."""
    sink = MemorySink()
    log = make_logger("info", sink)
    log.debug("hidden", value=Exploding())
    log.info("step done", step=3)
    log.warning("slow", seconds=1.5)
    log.error("nan", module="layers.0")
    assert without_timestamps(sink.records) == [
        {"step": 3, "event": "step done", "level": "info"},
        {"seconds": 1.5, "event": "slow", "level": "warning"},
        {"module": "layers.0", "event": "nan", "level": "error"},
    ]
    assert all(r["timestamp"].endswith("Z") for r in sink.records)


@pytest.mark.parametrize("level", ["debug", "info", "warning", "error", 30])
def test_each_level_keeps_itself_and_above(level: str | int) -> None:
    """A logger at a level passes that level and the more severe ones only (ints too)."""
    sink = MemorySink()
    log = make_logger(level, [sink])
    for method in ("debug", "info", "warning", "error"):
        getattr(log, method)(method)
    names = ["debug", "info", "warning", "error"]
    start = names.index(level if isinstance(level, str) else "warning")
    assert [r["event"] for r in sink.records] == names[start:]


def test_unknown_level_is_rejected() -> None:
    """A level name structlog does not know raises ValueError listing the valid ones."""
    with pytest.raises(ValueError, match=r"unknown log level 'verbose'; valid levels: debug, info"):
        make_logger("verbose")


def test_console_output_goes_to_the_stream_without_colours() -> None:
    """Without sinks, entries are rendered by ConsoleRenderer on the stream, no ANSI codes."""
    stream = io.StringIO()
    log = make_logger("info", stream=stream)
    log.debug("hidden")
    log.info("step done", step=3)
    output = stream.getvalue()
    assert output.count("\n") == 1
    assert "[info     ] step done" in output and "step=3" in output
    assert "\x1b[" not in output


def test_console_output_defaults_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """The default stream is sys.stderr at the time make_logger is called."""
    make_logger("warning").warning("careful", plugin="guard")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "careful" in captured.err and "plugin=guard" in captured.err


def test_bound_values_reach_every_entry() -> None:
    """initial_values and bind() add keys to each entry."""
    sink = MemorySink()
    log = make_logger("info", sink, run="r1").bind(plugin="grad_clip")
    log.info("clipped", norm=2.0)
    (record,) = sink.records
    assert (record["run"], record["plugin"], record["norm"]) == ("r1", "grad_clip", 2.0)


def test_sink_entries_are_json_safe(tmp_path: Path) -> None:
    """Values JSON cannot take are logged as their repr; numpy values and tuples go through."""
    path = tmp_path / "log.jsonl"
    with JsonLinesSink(path) as file:
        log = make_logger("info", file)
        log.info("state", module=object(), norm=np.float32(0.5), shape=(2, 3))
    (record,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert record["module"].startswith("<object object at")
    assert (record["norm"], record["shape"]) == (0.5, [2, 3])


def test_exceptions_are_formatted_into_the_entry() -> None:
    """log.exception() writes level error and the formatted traceback as a string."""
    sink = MemorySink()
    log = make_logger("info", sink)
    try:
        raise ZeroDivisionError("boom")
    except ZeroDivisionError:
        log.exception("plugin failed", plugin="guard")
    (record,) = sink.records
    assert record["level"] == "error"
    assert "ZeroDivisionError: boom" in record["exception"]


def test_an_error_entry_is_on_disk_at_once(tmp_path: Path) -> None:
    """Logging an error through a JsonLinesSink flushes the file immediately."""
    path = tmp_path / "log.jsonl"
    with JsonLinesSink(path) as file:
        log = make_logger("info", file)
        log.info("step", step=1)
        assert path.read_text() == ""
        log.error("diverged", step=2)
        assert [json.loads(line)["event"] for line in path.read_text().splitlines()] == [
            "step",
            "diverged",
        ]


def test_a_failing_sink_warns_instead_of_raising_into_the_caller() -> None:
    """A sink that raises is reported as SinkWarning; the call returns and other sinks get it."""

    class Broken:
        def write(self, record: Mapping[str, Any]) -> None:
            raise OSError("gone")

        def flush(self) -> None:
            pass

        def close(self) -> None:
            pass

    good = MemorySink()
    log = make_logger("info", [Broken(), good])
    with pytest.warns(SinkWarning, match="raised in write"):
        log.info("a")
        log.info("b")
    assert [r["event"] for r in good.records] == ["a", "b"]


def test_a_given_sink_set_is_used_as_is() -> None:
    """Passing a SinkSet routes through it, so sinks added later receive entries."""
    sinks = SinkSet()
    log = make_logger("info", sinks)
    late = MemorySink()
    sinks.add(late)
    log.info("after")
    assert [r["event"] for r in late.records] == ["after"]


# --------------------------------------------------------------------------------------------
# capture_logs
# --------------------------------------------------------------------------------------------


def test_capture_logs_records_entries_while_active() -> None:
    """Entries are plain dicts (event, level, keywords); after the block nothing is kept."""
    with capture_logs() as capture:
        capture.logger.debug("detail", step=1)
        capture.logger.bind(plugin="guard").warning("skipped")
    capture.logger.info("late")
    assert capture.entries == [
        {"step": 1, "event": "detail", "level": "debug"},
        {"plugin": "guard", "event": "skipped", "level": "warning"},
    ]


def test_capture_logs_honours_its_level() -> None:
    """capture_logs("warning") drops info entries like the runtime's logger would."""
    with capture_logs("warning", run="r") as capture:
        capture.logger.info("quiet")
        capture.logger.error("loud")
    assert capture.entries == [{"run": "r", "event": "loud", "level": "error"}]


# --------------------------------------------------------------------------------------------
# No global state
# --------------------------------------------------------------------------------------------


def test_nothing_configures_structlog_globally(tmp_path: Path) -> None:
    """After config, sinks, loggers and capture_logs, structlog is still unconfigured."""
    defaults = structlog.get_config()
    load_config(cwd=tmp_path, overrides={"log_level": "debug"})
    with JsonLinesSink(tmp_path / "e.jsonl") as file:
        make_logger("debug", [file, MemorySink()]).info("x")
    make_logger("debug", stream=io.StringIO()).info("y")
    with capture_logs() as capture:
        capture.logger.info("z")
    assert structlog.is_configured() is False
    assert structlog.get_config() == defaults


def test_import_hookgrad_does_not_import_the_runtime() -> None:
    """import hookgrad leaves hookgrad.runtime (and its dependencies' set-up) unimported."""
    probe = "import sys, hookgrad; print('hookgrad.runtime' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
