"""Reading a JSON-lines event log back: records with their line numbers, numbers as floats.

The JSON-lines sink writes floats that are not finite as the strings ``"NaN"``, ``"Infinity"``
and ``"-Infinity"`` (the protobuf JSON mapping), so every line is RFC 8259 JSON; older logs have
the bare tokens ``NaN`` and ``Infinity``. :func:`read_events` gives both back as floats. On
disk a float NaN and the string ``"NaN"`` look the same, so the reader decides by key: the
three strings become floats everywhere except under the keys in :data:`TEXT_KEYS`, which hold
names and labels (a module named ``"NaN"`` stays a name).

A kill can cut the line being written, so an unreadable **last** line is skipped with a
warning naming it; an unreadable line anywhere else means the file is not an intact log and
raises :class:`LogFormatError` naming the file and the line.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from ..hookspecs._stats import NONFINITE_JSON

__all__ = ["TEXT_KEYS", "LogFormatError", "LogLineWarning", "read_events"]

NONFINITE: Final = {text: float(value) for value, text in NONFINITE_JSON.items()}
"""The strings the sink writes for non-finite floats, and the floats they stand for."""

TEXT_KEYS: Final = frozenset(
    {
        # record envelopes: PluginRecord, event summaries, structlog entries
        "plugin",
        "kind",
        "hook",
        "module_name",
        "module_type",
        "phase",
        "dtype",
        "event",
        "level",
        "logger",
        "timestamp",
        # the built-in plugins' data
        "param",
        "module",
        "tensor",
        "stage",
        "role",
        "reason",
        "mode",
    }
)
"""Keys whose string values are names or labels, never numbers: kept as strings."""


class LogFormatError(ValueError):
    """A line of an event log that is not a JSON object, other than a cut last line.

    ``str(error)`` is ``FILE:LINE: reason``; ``path``, ``line`` and ``reason`` carry the parts.
    """

    def __init__(self, path: str | os.PathLike[str], line: int, reason: str) -> None:
        super().__init__(f"{os.fspath(path)}:{line}: {reason}")
        self.path = Path(path)
        self.line = line
        self.reason = reason


class LogLineWarning(UserWarning):
    """The last line of an event log could not be read (cut by a kill) and was skipped."""


def read_events(
    path: str | os.PathLike[str], warn: Callable[[str], None] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, record)`` for each JSON object of the log at ``path``, in order.

    Line numbers count from 1 and lines end at ``\\n`` only. Blank lines are skipped. An
    unreadable last line (not UTF-8, not JSON, nested too deeply, not an object) is skipped
    with ``warn("FILE:LINE: ...; last line skipped")``, by default a :class:`LogLineWarning`;
    one elsewhere raises :class:`LogFormatError`. Raises OSError when the file cannot be read.
    """
    lines = _numbered_lines(Path(path))
    pending = next(lines, None)
    while pending is not None:
        number, raw = pending
        pending = next(lines, None)
        try:
            yield number, _record(raw)
        except _Unreadable as error:
            if pending is not None:
                raise LogFormatError(path, number, str(error)) from None
            message = f"{os.fspath(path)}:{number}: {error}; last line skipped (cut by a kill?)"
            if warn is None:
                warnings.warn(LogLineWarning(message), stacklevel=2)
            else:
                warn(message)


def _numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of ``path`` as bytes, with their numbers from 1."""
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if raw.strip():
                yield number, raw


class _Unreadable(Exception):
    """Why one line is not a record (internal: read_events adds the file and line)."""


def _record(raw: bytes) -> dict[str, Any]:
    """One line as a record, or _Unreadable saying why not."""
    try:
        text = raw.rstrip(b"\r\n").decode("utf-8")
    except UnicodeDecodeError as error:
        byte = f"0x{raw[error.start]:02x}"
        raise _Unreadable(f"not UTF-8 (byte {byte} at offset {error.start})") from None
    try:
        record = _decoder(raw).decode(text)
    except json.JSONDecodeError as error:
        raise _Unreadable(f"not JSON ({error.msg}: column {error.colno})") from None
    except ValueError as error:  # e.g. an integer with more digits than Python converts
        raise _Unreadable(f"not JSON ({error})") from None
    except RecursionError:
        raise _Unreadable("not JSON (nested too deeply)") from None
    if not isinstance(record, dict):
        raise _Unreadable(f"not a JSON object but {_json_type(record)}")
    return record


def _decoder(raw: bytes) -> json.JSONDecoder:
    """The decoder for ``raw``: one that turns strings back into floats only if it may hold one.

    Most lines hold none; the object hook costs as much as the parsing, so it runs only on
    lines with ``NaN``, ``Infinity`` or a ``\\u`` escape (which could spell either).
    """
    if b"NaN" in raw or b"Infinity" in raw or b"\\u" in raw:
        return _WITH_NONFINITE
    return _PLAIN


def _numbers_back(obj: dict[str, Any]) -> dict[str, Any]:
    """``json`` object hook: the non-finite strings outside TEXT_KEYS as floats."""
    for key, value in obj.items():
        if key not in TEXT_KEYS:
            obj[key] = _number_back(value)
    return obj


def _number_back(value: Any) -> Any:
    if isinstance(value, str):
        return NONFINITE.get(value, value)
    if isinstance(value, list):
        return [_number_back(item) for item in value]
    return value


_PLAIN: Final = json.JSONDecoder()
_WITH_NONFINITE: Final = json.JSONDecoder(object_hook=_numbers_back)


def _json_type(value: object) -> str:
    """``an array``, ``a string``, ...: the JSON name of a parsed value."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"
