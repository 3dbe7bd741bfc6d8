"""Event sinks: where event and log records go (a JSON-lines file, memory, several at once).

A record is a JSON-safe mapping (``event.summary()`` plus a few fields, or a log entry). The
JSON-lines file keeps every completed step through a crash: the runtime flushes the sinks when a
step ends, and the file itself (:mod:`._logfile`) writes whole lines only. It is also flushed on
``close()``, at interpreter exit (an uncaught exception included) and right after any record
whose ``"level"`` is ``"error"`` or ``"critical"``.
"""

from __future__ import annotations

import json
import os
import warnings
import weakref
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final, NamedTuple, Protocol, runtime_checkable

import numpy as np

from ..hookspecs._stats import json_float
from ._logfile import Durability, LogFile

__all__ = ["EventSink", "JsonLinesSink", "MemorySink", "SinkSet", "SinkWarning", "encode_record"]

_FLUSH_LEVELS: Final = ("error", "critical")
_JSON_LEAVES: Final = (str, int, float, bool, type(None))


@runtime_checkable
class EventSink(Protocol):
    """Anything that takes records: ``write`` each one, ``flush`` buffers, ``close`` at the end."""

    def write(self, record: Mapping[str, Any]) -> None:
        """Take one record; the sink must not keep a reference to a mutable one."""

    def flush(self) -> None:
        """Push buffered records to their destination."""

    def close(self) -> None:
        """Flush and release resources; calling it again does nothing."""


class MemorySink:
    """Keeps a shallow copy of every record in ``records``; for tests and notebooks."""

    __slots__ = ("records",)

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, record: Mapping[str, Any]) -> None:
        self.records.append(dict(record))

    def flush(self) -> None:
        """Nothing to flush."""

    def close(self) -> None:
        """Keeps the records, so they can be read after the runtime closes."""

    def clear(self) -> None:
        """Forget every record."""
        self.records.clear()

    def __repr__(self) -> str:
        return f"MemorySink(<{len(self.records)} records>)"


class JsonLinesSink:
    """Appends each record to ``path`` as one JSON object per line (UTF-8, compact).

    numpy scalars and arrays become numbers and lists; any other non-JSON value raises
    TypeError naming its key, and nothing of that record is written. Every line is RFC 8259
    JSON: a float that is not finite is written as the string ``"NaN"``, ``"Infinity"`` or
    ``"-Infinity"`` (as protobuf's JSON mapping does); :func:`hookgrad.runtime.read_events`
    reads them back as floats. The parent folder is created; an existing file is appended to
    only if it is a hookgrad log (LogFileError otherwise).

    Records wait as whole lines until :meth:`flush`, which the runtime calls when each step
    ends (``durability``: see :mod:`hookgrad.runtime._logfile`); a record whose ``"level"`` is
    ``"error"`` or ``"critical"`` is written at once, with everything before it. Lines are
    appended whole, so threads, runtimes and processes may share one file. The file is closed
    by ``close()``, by garbage collection of the sink or at interpreter exit, whichever comes
    first, and flushed then.
    """

    __slots__ = ("__weakref__", "_file", "_finalizer")

    def __init__(self, path: str | os.PathLike[str], *, durability: Durability = "step") -> None:
        self._file = LogFile(Path(path), durability)
        # finalize holds the file, not the sink: no cycle keeps the sink alive, and the file
        # is still closed (flushed) at exit. Calling it in close() unregisters it.
        self._finalizer = weakref.finalize(self, self._file.close)

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, record: Mapping[str, Any]) -> None:
        try:
            line = encode_record(record)
        except TypeError as error:
            raise TypeError(f"{self!r}: {error}") from None
        self._file.append(line + "\n", urgent=record.get("level") in _FLUSH_LEVELS)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def __enter__(self) -> JsonLinesSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JsonLinesSink({str(self.path)!r})"


def encode_record(record: Mapping[str, Any]) -> str:
    """``record`` as one line of compact RFC 8259 JSON (non-finite floats as strings).

    Raises TypeError naming the first key whose value JSON cannot take.
    """
    data = record if isinstance(record, dict) else dict(record)
    try:
        try:
            return _ENCODER.encode(data)
        except ValueError as error:
            if not str(error).startswith("Out of range float"):
                raise
            # A float that is not finite: rare, so the walk is paid only then.
            return _ENCODER.encode(_finite_json(data))
    except TypeError:
        raise TypeError(_unserializable(record)) from None


def _finite_json(value: Any) -> Any:
    """``value`` with every non-finite float (numpy's included) replaced by its string."""
    if isinstance(value, float | np.floating):
        return json_float(float(value))
    if isinstance(value, Mapping):
        return {key: _finite_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_json(item) for item in value]
    if isinstance(value, np.ndarray):
        return _finite_json(value.tolist())
    return value


def _to_json(obj: Any) -> Any:
    """``json`` default: numpy scalars and arrays to Python numbers and lists."""
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        value = obj.item()
        if isinstance(value, _JSON_LEAVES):
            return value
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


_ENCODER: Final = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=_to_json, allow_nan=False
)


def _unserializable(record: Mapping[str, Any]) -> str:
    """Why ``record`` cannot be written: the first key holding a value JSON cannot take."""
    for key, culprit in _walk(record, ""):
        if isinstance(culprit, _BadKey):
            return (
                f"cannot write the dict key {culprit.key!r} under {key or 'the record'!r} as "
                "JSON (keys must be str, int, float, bool or None)"
            )
        try:
            json.dumps(culprit, default=_to_json)
        except (TypeError, ValueError):
            return (
                f"cannot write {type(culprit).__name__} at key {key!r} as JSON (accepted: str, "
                "int, float, bool, None, lists, dicts, numpy scalars and arrays)"
            )
    return "record is not JSON serializable"


class _BadKey(NamedTuple):
    key: object


def _walk(value: Any, key: str) -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every leaf; a dict key JSON cannot take comes as a _BadKey."""
    if isinstance(value, Mapping):
        for name, item in value.items():
            if not isinstance(name, _JSON_LEAVES):
                yield key, _BadKey(name)
            yield from _walk(item, f"{key}.{name}" if key else str(name))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, f"{key}[{index}]")
    else:
        yield key, value


class SinkWarning(RuntimeWarning):
    """A sink raised; the record still went to the other sinks. ``sink`` and ``error`` say which."""

    def __init__(self, message: str, sink: EventSink, error: BaseException) -> None:
        super().__init__(message)
        self.sink = sink
        self.error = error


class SinkSet:
    """Fans records out to several sinks; one sink raising does not stop the others.

    The first exception from each sink is reported as a SinkWarning naming the sink; later
    ones from the same sink are counted in ``errors`` (keyed by ``id(sink)``) but not reported
    again. The sink keeps receiving records: a bad record must not silence a good file.
    """

    __slots__ = ("_sinks", "errors")

    def __init__(self, sinks: Iterable[EventSink] = ()) -> None:
        self._sinks: list[EventSink] = list(sinks)
        self.errors: dict[int, int] = {}  # id(sink) -> how many times it raised

    @property
    def sinks(self) -> tuple[EventSink, ...]:
        return tuple(self._sinks)

    def add(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def remove(self, sink: EventSink) -> None:
        """Stop sending to ``sink`` (without closing it)."""
        self._sinks.remove(sink)
        self.errors.pop(id(sink), None)

    def write(self, record: Mapping[str, Any]) -> None:
        for sink in self._sinks:
            try:
                sink.write(record)
            except Exception as exc:
                self._report(sink, "write", exc)

    def flush(self) -> None:
        for sink in self._sinks:
            try:
                sink.flush()
            except Exception as exc:
                self._report(sink, "flush", exc)

    def close(self) -> None:
        """Close every sink, even if some raise."""
        for sink in self._sinks:
            try:
                sink.close()
            except Exception as exc:
                self._report(sink, "close", exc)

    def _report(self, sink: EventSink, action: str, exc: Exception) -> None:
        count = self.errors.get(id(sink), 0)
        self.errors[id(sink)] = count + 1
        if count == 0:
            message = (
                f"event sink {sink!r} raised in {action}(): {type(exc).__name__}: {exc}; the "
                "other sinks go on, further errors from this sink are not reported"
            )
            warnings.warn(SinkWarning(message, sink, exc), stacklevel=3)

    def __len__(self) -> int:
        return len(self._sinks)

    def __iter__(self) -> Iterator[EventSink]:
        return iter(tuple(self._sinks))

    def __enter__(self) -> SinkSet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SinkSet({self._sinks!r})"
