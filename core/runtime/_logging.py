"""The runtime's structlog logger, built per runtime: structlog's global config is never touched.

``make_logger`` wraps its own output with ``structlog.wrap_logger`` and a level-filtering class
from ``structlog.make_filtering_bound_logger``: a call below the level is a bare ``return None``
(no processor runs, no dict is built). Entries go either to stderr, rendered by
``ConsoleRenderer(colors=False)``, or, when sinks are given, to the sinks as dicts
(``event``, ``level``, ``timestamp`` and the call's keywords, made JSON-safe).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, Final, NoReturn, TextIO, cast

import numpy as np
import structlog
from structlog.dev import ConsoleRenderer, plain_traceback
from structlog.processors import TimeStamper, add_log_level, format_exc_info
from structlog.typing import FilteringBoundLogger, Processor

from ._sinks import EventSink, SinkSet

__all__ = ["LogCapture", "capture_logs", "make_logger"]

LEVELS: Final = ("debug", "info", "warning", "error", "critical")
_PLAIN: Final = (str, int, float, bool, type(None), np.generic, np.ndarray)


def make_logger(
    level: str | int = "warning",
    sinks: EventSink | Iterable[EventSink] | None = None,
    *,
    stream: TextIO | None = None,
    **initial_values: Any,
) -> FilteringBoundLogger:
    """A structlog logger emitting ``level`` and above (a name from LEVELS or a logging int).

    With ``sinks`` (one sink or several), each entry is written to them as a dict through a
    SinkSet, so a failing sink warns instead of raising into the caller; values JSON cannot
    take are replaced by their ``repr``. Without, entries are printed to ``stream`` (default:
    ``sys.stderr`` at the time of this call). ``initial_values`` are bound to every entry.
    """
    if sinks is None:
        target: Any = structlog.PrintLogger(stream if stream is not None else sys.stderr)
        processors = _console_processors()
    else:
        target = structlog.ReturnLogger()
        processors = _sink_processors(sinks)
    return _wrap(target, level, processors, initial_values)


def _console_processors() -> list[Processor]:
    return [
        add_log_level,
        TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
        ConsoleRenderer(colors=False, exception_formatter=plain_traceback),
    ]


def _sink_processors(sinks: EventSink | Iterable[EventSink]) -> list[Processor]:
    if isinstance(sinks, SinkSet):
        fan_out = sinks
    elif isinstance(sinks, EventSink):
        fan_out = SinkSet([sinks])
    else:
        fan_out = SinkSet(sinks)
    return [
        add_log_level,
        TimeStamper(fmt="iso", utc=True),
        format_exc_info,
        _json_safe,
        _ToSinks(fan_out),
    ]


def _wrap(
    target: Any, level: str | int, processors: list[Processor], initial_values: dict[str, Any]
) -> FilteringBoundLogger:
    """A concrete (not lazy) filtering bound logger; no structlog default is consulted."""
    try:
        wrapper = structlog.make_filtering_bound_logger(level)
    except (KeyError, ValueError):
        raise ValueError(
            f"unknown log level {level!r}; valid levels: {', '.join(LEVELS)}"
        ) from None
    proxy = structlog.wrap_logger(
        target,
        processors=processors,
        wrapper_class=wrapper,
        context_class=dict,
        cache_logger_on_first_use=True,
        **initial_values,
    )
    return cast(FilteringBoundLogger, proxy.bind())


def _json_safe(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    """Processor: every value JSON (or numpy) can represent, anything else as its repr."""
    return {str(key): _plain(value) for key, value in event_dict.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return repr(value)


class _ToSinks:
    """Last processor: hand the entry to the sinks, then drop it (nothing is printed)."""

    __slots__ = ("sinks",)

    def __init__(self, sinks: SinkSet) -> None:
        self.sinks = sinks

    def __call__(
        self, _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
    ) -> NoReturn:
        self.sinks.write(event_dict)
        raise structlog.DropEvent


# --------------------------------------------------------------------------------------------
# Test helper
# --------------------------------------------------------------------------------------------


class LogCapture:
    """What ``capture_logs`` yields: a ``logger`` to hand to the code under test, ``entries``.

    Each entry is the dict a sink would get, without the timestamp: ``event``, ``level`` and
    the keywords of the call, values untouched (``exc_info`` stays as passed).
    """

    __slots__ = ("_active", "entries", "logger")

    def __init__(self, level: str | int, initial_values: dict[str, Any]) -> None:
        self.entries: list[dict[str, Any]] = []
        self._active = True
        self.logger = _wrap(
            structlog.ReturnLogger(), level, [add_log_level, self._record], initial_values
        )

    def _record(self, _logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> NoReturn:
        if self._active:
            self.entries.append(dict(event_dict))
        raise structlog.DropEvent


@contextmanager
def capture_logs(level: str | int = "debug", **initial_values: Any) -> Iterator[LogCapture]:
    """Capture what a hookgrad logger logs, without structlog's global configuration.

    structlog's own ``structlog.testing.capture_logs`` reconfigures structlog globally; this
    one builds a separate logger instead. Pass ``capture.logger`` wherever the code under test
    takes a logger; entries logged after the block ends are dropped::

        with capture_logs() as capture:
            run(logger=capture.logger)
        assert capture.entries == [{"event": "step", "level": "info", "step": 1}]
    """
    capture = LogCapture(level, initial_values)
    try:
        yield capture
    finally:
        capture._active = False
