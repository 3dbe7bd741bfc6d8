"""read_events: a JSON-lines log read back with line numbers, non-finite numbers as floats."""

from __future__ import annotations

import json
import math
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookgrad.runtime import JsonLinesSink, LogFormatError, LogLineWarning, read_events

FAST = settings(max_examples=60, deadline=None)


def _log(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "events.jsonl"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8", newline="")
    else:
        path.write_bytes(content)
    return path


def test_records_come_with_their_line_numbers(tmp_path: Path) -> None:
    """Line numbers count every line, blank ones included; blank lines give no record."""
    path = _log(tmp_path, '{"a": 1}\n\n  \r\n{"b": 2}\r\n{"c": 3}')
    assert list(read_events(path)) == [(1, {"a": 1}), (4, {"b": 2}), (5, {"c": 3})]


def test_lines_end_at_newline_only(tmp_path: Path) -> None:
    """A raw U+2028 or NEL in a string (the sink writes them) does not break the line."""
    path = _log(tmp_path, '{"a": "x\u2028y\x85z"}\n{"b": 2}\n')
    assert list(read_events(path)) == [(1, {"a": "x\u2028y\x85z"}), (2, {"b": 2})]


def test_nonfinite_strings_and_bare_tokens_read_as_floats(tmp_path: Path) -> None:
    """'NaN', 'Infinity', '-Infinity' (new logs) and NaN, Infinity (old logs) become floats."""
    new = '{"step": 0, "data": {"norm": "NaN", "hi": "Infinity", "lo": ["-Infinity", 1]}}'
    old = '{"step": 1, "data": {"norm": NaN, "hi": Infinity, "lo": [-Infinity, 1]}}'
    for number, record in read_events(_log(tmp_path, f"{new}\n{old}\n")):
        data = record["data"]
        assert record["step"] == number - 1
        assert math.isnan(data["norm"])
        assert data["hi"] == math.inf and data["lo"] == [-math.inf, 1]


def test_nonfinite_strings_spelled_with_escapes_read_as_floats(tmp_path: Path) -> None:
    """'\\u004eaN' is the string 'NaN' too: the reader looks past JSON escapes."""
    path = _log(tmp_path, '{"x": "\\u004eaN", "y": ["\\u0049nfinity"], "z": "\\u00e9"}\n')
    [(_, record)] = read_events(path)
    assert math.isnan(record["x"]) and record["y"] == [math.inf] and record["z"] == "\u00e9"


def test_names_that_spell_nan_stay_names(tmp_path: Path) -> None:
    """Under a name key (module_name, param, reason, ...) 'NaN' is a string, not a float."""
    record = {
        "plugin": "nan_guard",
        "kind": "skip_step",
        "module_name": "NaN",
        "data": {"module": "Infinity", "param": "-Infinity", "reason": "NaN", "x": "NaN"},
    }
    [(_, back)] = read_events(_log(tmp_path, json.dumps(record) + "\n"))
    assert back["module_name"] == "NaN"
    assert back["data"]["module"] == "Infinity" and back["data"]["param"] == "-Infinity"
    assert back["data"]["reason"] == "NaN" and math.isnan(back["data"]["x"])


def test_what_the_sink_writes_reads_back(tmp_path: Path) -> None:
    """JsonLinesSink's records, non-finite floats included, read back equal (NaN as NaN)."""
    path = tmp_path / "events.jsonl"
    written = [
        {"plugin": "p", "kind": "k", "step": 0, "module_name": "fc", "data": {"v": 0.5}},
        {"plugin": "p", "kind": "k", "step": 1, "module_name": None, "data": {"v": math.inf}},
        {"plugin": "p", "kind": "k", "step": 2, "module_name": "NaN", "data": {"v": math.nan}},
    ]
    with JsonLinesSink(path) as sink:
        for record in written:
            sink.write(record)
    back = [record for _, record in read_events(path)]
    assert [r["data"]["v"] for r in back[:2]] == [0.5, math.inf]
    assert math.isnan(back[2]["data"]["v"]) and back[2]["module_name"] == "NaN"
    assert [{**r, "data": None} for r in back] == [{**r, "data": None} for r in written]


def test_a_cut_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """The last line, cut by a kill, gives a LogLineWarning naming FILE:LINE, not an error."""
    path = _log(tmp_path, '{"a": 1}\n{"b": [1, 2\n\n')
    with pytest.warns(LogLineWarning) as caught:
        assert list(read_events(path)) == [(1, {"a": 1})]
    assert str(caught[0].message) == (
        f"{path}:2: not JSON (Expecting ',' delimiter: column 12); "
        "last line skipped (cut by a kill?)"
    )


def test_the_cut_line_warning_can_go_to_a_callback(tmp_path: Path) -> None:
    """warn=callable receives the message instead of the warnings module."""
    path = _log(tmp_path, b'{"a": 1}\n{"b": "\xc3')  # cut inside a two-byte character
    messages: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(read_events(path, warn=messages.append)) == [(1, {"a": 1})]
    assert messages == [
        f"{path}:2: not UTF-8 (byte 0xc3 at offset 7); last line skipped (cut by a kill?)"
    ]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"{oops", "not JSON (Expecting property name enclosed in double quotes: column 2)"),
        (b'{"a": "\xff"}', "not UTF-8 (byte 0xff at offset 7)"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON (nested too deeply)"),
        (b'{"a": ' + b"9" * 5000 + b"}", "not JSON (Exceeds the limit (4300 digits) for "),
        (b"[1, 2]", "not a JSON object but an array"),
        (b'"NaN"', "not a JSON object but a string"),
        (b"null", "not a JSON object but null"),
        (b"1e999", "not a JSON object but a number"),
    ],
)
def test_a_bad_line_before_the_last_names_file_and_line(
    tmp_path: Path, line: bytes, reason: str
) -> None:
    """An unreadable line that is not the last raises LogFormatError (a ValueError): FILE:LINE."""
    path = _log(tmp_path, b'{"a": 1}\n' + line + b'\n{"a": 2}\n')
    with pytest.raises(LogFormatError) as caught:
        list(read_events(path))
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.path, error.line) == (path, 2)
    assert error.reason.startswith(reason)
    assert str(error) == f"{path}:2: {error.reason}"


@FAST
@given(st.binary(max_size=200))
def test_any_bytes_give_records_or_one_error(content: bytes) -> None:
    """Whatever the file holds, the reader yields dicts or raises LogFormatError, no other error."""
    with tempfile.TemporaryDirectory() as folder:
        path = _log(Path(folder), content)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LogLineWarning)
            try:
                records = list(read_events(path))
            except LogFormatError as error:
                assert error.line >= 1
                return
    assert all(isinstance(record, dict) for _, record in records)
    assert [number for number, _ in records] == sorted({number for number, _ in records})
