"""``hookgrad report`` on hostile logs: a report, or one error naming the file and line.

Every case checks the same contract: exit 0 with a table, findings and an SVG that parses as
XML, holds only printable text and finite coordinates (the numbers drawn are checked on the
picture's matplotlib artists); or exit 1 with one ``Error: FILE:LINE:`` message. Never a traceback, and no character from the log reaches the terminal or the SVG
unescaped (no ANSI escape, no control character).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookgrad._plot import Picture, draw
from hookgrad._report import gradient_flow
from hookgrad._report_records import READS, RecordError, plugin_entries, read_entries
from hookgrad._visible import visible
from hookgrad.cli import main

SVG = "{http://www.w3.org/2000/svg}"
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HOSTILE_NAMES = [
    "\x1b[31mred\x1b[0m",
    "<script>alert(1)</script>",
    "a & b",
    "]]>",
    "tab\tnewline\nreturn\rnul\x00bell\x07",
    "\u202eevil",  # right-to-left override
    "\x9b31m",  # the one-byte CSI of C1
    "lone \ud800 surrogate",
    "\ufffe",
    "NaN",
    "$x^2$ \\frac{",  # mathtext to matplotlib, a plain name here
]
_COORDINATES = ("x", "y", "width", "height", "d", "transform", "viewBox")


pytestmark = pytest.mark.usefixtures("in_empty_folder")


def _record(
    plugin: str, kind: str, step: int, module_name: str | None = None, **data: Any
) -> dict[str, Any]:
    return {"plugin": plugin, "kind": kind, "step": step, "module_name": module_name, "data": data}


def _norm(step: int, module: str, norm: Any, stage: str = "pre_clip") -> dict[str, Any]:
    return _record("grad_stats", "module_grad", step, module, stage=stage, norm=norm)


def _clip(step: int, pre: Any, post: Any, **more: Any) -> dict[str, Any]:
    return _record("grad_clip", "clip", step, pre_norm=pre, post_norm=post, **more)


def _write(lines: list[Any], name: str = "events.jsonl") -> Path:
    """Records (dicts, dumped as JSON with bare NaN) or raw lines (str, bytes), one per line."""
    path = Path(name)
    with path.open("wb") as f:
        for line in lines:
            if isinstance(line, dict):
                line = json.dumps(line)
            f.write(line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line)
            f.write(b"\n")
    return path


def _report(*args: str) -> Result:
    return CliRunner().invoke(main, ["report", *args])


def _no_crash(result: Result) -> None:
    """No traceback: the command ended by sys.exit, and printed only printable text."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    for stream in (result.output, result.stderr):
        assert "Traceback" not in stream
        assert all(c.isprintable() for c in stream.replace("\n", "")), repr(stream)


def _svg(path: Path = Path("gradient_flow.svg")) -> ET.Element:
    """The picture, checked: printable text, valid XML, every coordinate finite."""
    content = path.read_text(encoding="utf-8")
    assert all(c.isprintable() for c in content.replace("\n", "")), "raw control character"
    root = ET.fromstring(content)
    for element in root.iter():
        for key in _COORDINATES:
            assert not re.search("nan|inf", element.get(key, ""), re.IGNORECASE), element.attrib
    return root


def _ok(result: Result) -> Picture:
    """The report succeeded with a valid SVG; the picture of its log, drawn again (line
    warnings are the report's to print)."""
    _no_crash(result)
    assert result.exit_code == 0, result.output + result.stderr
    _svg()
    log = read_entries(Path("events.jsonl"), warn=lambda message: None)
    return draw(gradient_flow(log.entries))


def _error(result: Result) -> str:
    """The one error line of a failed report (exit 1), after any warnings."""
    _no_crash(result)
    assert result.exit_code == 1, result.output + result.stderr
    *warnings, last = result.stderr.splitlines()
    assert all(w.startswith("warning: ") for w in warnings)
    assert last.startswith("Error: ")
    return last


def _titles(picture: Picture, kind: str) -> list[str]:
    """The tooltips of the numbered artists of ``kind`` (``nonfinite-0``, ...), in order."""
    return [title for gid, title in picture.titles.items() if gid.rpartition("-")[0] == kind]


def _texts(root: ET.Element) -> list[str]:
    """Every text the SVG shows (tick labels, legend, titles of panels)."""
    return [e.text or "" for e in root.iter(f"{SVG}text")]


# --------------------------------------------------------------------------------------------
# Numbers a genuine log holds: zero, NaN, inf, huge
# --------------------------------------------------------------------------------------------


def test_zero_norms_are_drawn_on_the_floor_of_the_log_axis() -> None:
    """A layer whose gradient is 0 (once a math domain error) sits on the axis, marked ≤."""
    _write([_norm(0, "fc", 0.5), _norm(1, "fc", 0.0), _norm(2, "fc", 0), _clip(0, 0.0, 0.0)])
    picture = _ok(_report("events.jsonl"))
    layers, steps = picture.figure.axes
    assert (layers.get_ylim(), steps.get_ylim()) == ((0.1, 1.0), (1.0, 10.0))
    assert list(picture.artist("module-norm-0").get_ydata()) == [0.5, 0.1, 0.1]
    assert list(picture.artist("clip-pre").get_ydata()) == [1.0]
    assert {"≤0.1", "1", "≤1", "10"} <= set(_texts(_svg()))


def test_nonfinite_values_are_triangles_at_the_top() -> None:
    """NaN and ±inf, as strings (new logs), bare tokens (old) or grad_clip's null, are marked."""
    _write(
        [
            _norm(0, "fc", 1.0),
            '{"plugin": "grad_stats", "kind": "module_grad", "step": 1, "module_name": "fc", '
            '"data": {"stage": "pre_clip", "norm": "NaN"}}',
            _norm(2, "fc", math.inf),
            _clip(0, 2.0, 1.0, clipped=True),
            _clip(1, None, None, clipped=False, nonfinite=True),
            _record("grad_scale", "scale", 0, scale=65536.0),
            _record("grad_scale", "scale", 1, scale="Infinity"),
        ]
    )
    result = _report("events.jsonl")
    picture = _ok(result)
    assert _titles(picture, "nonfinite") == [
        "the gradient norm of module 'fc': nan at step 2, inf at step 3",
        "the norm before clipping: nan at step 2",
        "the norm after clipping: nan at step 2",
        "the loss scale: inf at step 2",
    ]
    triangles = [picture.artist(f"nonfinite-{n}") for n in range(4)]
    assert [(t.get_marker(), list(t.get_xdata()), list(t.get_ydata())) for t in triangles] == [
        ("^", [2, 3], [0.95, 0.95]),
        ("^", [2], [0.95]),
        ("^", [2], [0.95]),
        ("^", [2], [0.95]),
    ]  # y in the panel's height: near its top
    assert all(t.get_transform() == t.axes.get_xaxis_transform() for t in triangles)
    assert list(picture.artist("module-norm-0").get_xdata()) == [1]  # the finite point only
    assert "NaN or inf (at the top)" in _texts(_svg())
    assert re.search(r"^fc +3 +inf +nan +inf ", result.output, re.MULTILINE), result.output


@pytest.mark.parametrize("huge", [1e308, sys.float_info.max, 10**300, 5e-324])
def test_extreme_values_stay_inside_the_panel(huge: float) -> None:
    """The largest floats, a huge integer and the smallest subnormal are drawn, clamped."""
    _write([_norm(0, "fc", huge), _norm(1, "fc", 1.0), _clip(0, huge, 1.0)])
    picture = _ok(_report("events.jsonl"))
    layers = picture.figure.axes[0]
    bottom, top = layers.get_ylim()
    assert 0 < bottom < top < math.inf
    ys = picture.artist("module-norm-0").get_ydata()
    assert all(bottom <= y <= top for y in ys) and ys[1] == 1.0


def test_huge_steps_are_placed() -> None:
    """The largest step a record may carry (2**63 - 1) still has an x position."""
    _write([_norm(2**63 - 1, "fc", 1.0)])
    _ok(_report("events.jsonl"))


# --------------------------------------------------------------------------------------------
# Strings from the log: escaped for the terminal and the SVG
# --------------------------------------------------------------------------------------------


def test_hostile_names_are_escaped_on_screen_and_in_the_svg() -> None:
    """ANSI escapes, markup, control characters and surrogates show as escapes, nowhere raw."""
    records: list[Any] = []
    for step, name in enumerate(HOSTILE_NAMES):
        records.append(_norm(step, name, 1.0))
        records.append(
            _record("nan_guard", "nonfinite", step, name, phase=name, tensor=name, role="producer")
        )
        records.append(_record("nan_guard", "skip_step", step, None, reason=name, module=name))
    _write([json.dumps(r, ensure_ascii=True) for r in records])
    result = _report("events.jsonl")
    picture = _ok(result)
    shown = [visible(name) for name in HOSTILE_NAMES]
    assert _titles(picture, "module-norm") == [
        f"the gradient norm of module '{name}'" for name in shown
    ]
    root = _svg()
    assert not list(root.iter(f"{SVG}script")) and not list(root.iter("script"))
    assert {"a & b", "]]>", "$x^2$ \\frac{"} <= set(_texts(root))  # legend rows, as they are
    assert "\\x1b[31mred\\x1b[0m" in result.output and "\x1b" not in result.output
    assert "produced by module '\\u202eevil' (\\u202eevil)" in result.output
    assert "<script>alert(1)</script>" in result.output  # text, harmless on a terminal


def test_visible_escapes_what_is_not_printable() -> None:
    """Each non-printable character becomes its Python escape; printable text is unchanged."""
    assert visible("a\x1b[31mb") == "a\\x1b[31mb"
    assert visible("x\ty\u202ez\ud800") == "x\\ty\\u202ez\\ud800"
    assert visible("fc.0 … <&>") == "fc.0 … <&>"
    assert visible(visible("\x00\n")) == "\\x00\\n"


# --------------------------------------------------------------------------------------------
# Malformed input: one error naming the file, the line and the key
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        (
            {**_norm(0, "fc", 1.0), "step": "2"},
            "grad_stats module_grad record: step: Input should be a valid integer, got '2'",
        ),
        (
            {**_norm(0, "fc", 1.0), "step": -1},
            "grad_stats module_grad record: step: Input should be greater than or equal to 0"
            ", got -1",
        ),
        (
            {**_norm(0, "fc", 1.0), "step": 2**64},
            "grad_stats module_grad record: step: Input should be less than or equal to "
            "9223372036854775807, got 18446744073709551616",
        ),
        (
            {**_norm(0, "fc", 1.0), "module_name": ["fc"]},
            "grad_stats module_grad record: module_name: Input should be a valid string, "
            "got ['fc']",
        ),
        (
            {**_norm(0, "fc", 1.0), "data": "oops"},
            "grad_stats module_grad record: data: Input should be a valid dictionary, got 'oops'",
        ),
        (
            _record("grad_stats", "module_grad", 0, "fc", norm=1.0),
            "grad_stats module_grad record: data.stage: Field required",
        ),
        (
            _norm(0, "fc", "\x1b[2J"),
            "grad_stats module_grad record: data.norm: Input should be a valid number, "
            "got '\\x1b[2J'",
        ),
        (
            _norm(0, "fc", True),
            "grad_stats module_grad record: data.norm: Input should be a valid number, got True",
        ),
        (
            _clip(0, 1.0, 1.0, clipped="yes"),
            "grad_clip clip record: data.clipped: Input should be a valid boolean, got 'yes'",
        ),
        (
            _record("grad_scale", "scale", 0, scale={"x": 1}),
            "grad_scale scale record: data.scale: Input should be a valid number, got {'x': 1}",
        ),
        (
            _record("my\x1bplugin", "skip_step", 0, reason=5),
            "my\\x1bplugin skip_step record: data.reason: Input should be a valid string, got 5",
        ),
        (
            _record("nan_guard", "zeroed", 0, count=1.5),
            "nan_guard zeroed record: data.count: Input should be a valid integer, got 1.5",
        ),
        (
            {**_norm(0, "fc", 1.0), "rank": -1},
            "grad_stats module_grad record: rank: Input should be greater than or equal to 0, "
            "got -1",
        ),
    ],
)
def test_a_record_of_the_wrong_shape_is_one_error_naming_line_and_key(
    record: dict[str, Any], problem: str
) -> None:
    """Exit 1 with FILE:LINE, the record's plugin and kind, the key and the value; no SVG."""
    _write([_norm(0, "fc", 1.0), record, _norm(1, "fc", 1.0)])
    assert _error(_report("events.jsonl")) == f"Error: events.jsonl:2: {problem}"
    assert not Path("gradient_flow.svg").exists()


def test_the_same_records_from_memory_raise_record_error() -> None:
    """plugin_entries (the demo's path) raises RecordError, a ValueError, for a wrong record."""
    with pytest.raises(RecordError, match=r"^grad_clip clip record: data.pre_norm: ") as caught:
        plugin_entries([_clip(0, "big", 1.0)])
    assert isinstance(caught.value, ValueError)


def test_a_records_rank_is_read_and_may_be_absent() -> None:
    """A record's rank is kept in its entry and its JSON form; one without (an older log) is
    rank 0."""
    entries = plugin_entries([{**_norm(0, "fc", 1.0), "rank": 2}, _norm(1, "fc", 1.0)])
    assert [e.rank for e in entries] == [2, 0]
    assert [e.record()["rank"] for e in entries] == [2, 0]


def test_records_the_report_does_not_read_may_hold_anything() -> None:
    """Log entries, event summaries and other plugins' records of any shape are left out."""
    _write(
        [
            {"event": "\x1b[31m", "level": 5},
            {"plugin": "event_log", "kind": "event", "hook": ["x"], "step": "no"},
            {"plugin": "grad_stats", "kind": "param_grad", "step": None, "data": 5},
            {"plugin": ["grad_stats"], "kind": "module_grad"},
            {"plugin": "grad_stats"},
            _norm(0, "fc", 1.0),
        ]
    )
    picture = _ok(_report("events.jsonl"))
    assert _titles(picture, "module-norm") == ["the gradient norm of module 'fc'"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"{oops", "not JSON (Expecting property name enclosed in double quotes: column 2)"),
        (b"\xff\xfe{}", "not UTF-8 (byte 0xff at offset 0)"),
        (b"[" * 50_000 + b"]" * 50_000, "not JSON (nested too deeply)"),
        (b"[1, 2]", "not a JSON object but an array"),
    ],
)
def test_an_unreadable_line_before_the_last_is_one_error(line: bytes, reason: str) -> None:
    """Only the last line may be cut: an unreadable line elsewhere stops the report."""
    _write([_norm(0, "fc", 1.0), line, _norm(1, "fc", 1.0)])
    assert _error(_report("events.jsonl")) == f"Error: events.jsonl:2: {reason}"


def test_an_unreadable_last_line_is_skipped_with_a_warning() -> None:
    """A cut last line (no newline, half a UTF-8 character) warns naming the line; exit 0."""
    Path("events.jsonl").write_bytes(json.dumps(_norm(0, "fc", 1.0)).encode() + b'\n{"a": "\xc3')
    result = _report("events.jsonl")
    _ok(result)
    assert result.stderr == (
        "warning: events.jsonl:2: not UTF-8 (byte 0xc3 at offset 7); "
        "last line skipped (cut by a kill?)\n"
    )


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc")
def test_a_file_that_fails_to_read_is_one_error() -> None:
    """An OSError while reading (EIO from /proc/self/mem at offset 0) exits 1 naming the file."""
    result = _report("/proc/self/mem", "--out", "picture.svg")
    assert _error(result) == "Error: cannot read /proc/self/mem: Input/output error"


# --------------------------------------------------------------------------------------------
# Any input at all
# --------------------------------------------------------------------------------------------

_NONFINITE = st.sampled_from(["NaN", "Infinity", "-Infinity"])
_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text() | _NONFINITE
_JSON = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_NUMBERS = st.floats() | st.integers(min_value=-(10**30), max_value=10**30) | _NONFINITE
_NAMES = st.text() | st.sampled_from(HOSTILE_NAMES)
_GOOD_DATA: dict[str, st.SearchStrategy[Any]] = {
    "stage": st.sampled_from(["pre_clip", "post_clip"]) | st.text(),
    "norm": _NUMBERS,
    "max_abs": _NUMBERS | st.none(),
    "nonfinite": st.integers(0, 10**20) | st.booleans(),
    "skipped": st.booleans(),
    "update_ratio": _NUMBERS | st.none(),
    "pre_norm": _NUMBERS | st.none(),
    "post_norm": _NUMBERS | st.none(),
    "clipped": st.booleans(),
    "scale": _NUMBERS | st.none(),
    "role": st.sampled_from(["producer", "propagator"]) | _NAMES,
    "phase": _NAMES,
    "tensor": _NAMES,
    "count": st.integers(0, 10**20) | st.none(),
    "reason": _NAMES | st.none(),
    "module": _NAMES | st.none(),
}
_KINDS = st.sampled_from([*READS, ("third_party", "skip_step"), ("x", "y")])


def _mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` 19 times in 20, else any JSON value: most logs read, some fail."""
    return st.integers(0, 19).flatmap(lambda n: _JSON if n == 0 else good)


@st.composite
def _records(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly the records the report reads, with mostly right and sometimes wrong values."""
    plugin, kind = draw(_KINDS)
    keys = draw(st.sets(st.sampled_from(sorted(_GOOD_DATA)), max_size=6))
    if kind == "module_grad":
        keys |= {"stage", "norm"}
    data = {key: draw(_mostly(_GOOD_DATA[key])) for key in sorted(keys)}
    return {
        "plugin": plugin,
        "kind": kind,
        "step": draw(_mostly(st.integers(0, 2**63 - 1) | st.integers(0, 50))),
        "module_name": draw(_mostly(st.none() | _NAMES)),
        "data": draw(_mostly(st.just(data))),
    }


def _check_any_outcome(result: Result) -> None:
    """Either a report with a valid picture, or one error naming events.jsonl (and its line)."""
    if result.exit_code == 0:
        _ok(result)
    else:
        assert re.fullmatch(r"Error: events\.jsonl(:\d+)?: .+", _error(result))
        assert not Path("gradient_flow.svg").exists()


@FAST
@given(st.lists(_records(), min_size=1, max_size=8), st.booleans())
def test_any_records_give_a_report_or_one_error(
    records: list[dict[str, Any]], ascii_only: bool
) -> None:
    """Arbitrary JSON in the fields the report reads: never a crash, never raw output."""
    Path("gradient_flow.svg").unlink(missing_ok=True)
    _write([json.dumps(r, ensure_ascii=ascii_only) for r in records])
    _check_any_outcome(_report("events.jsonl"))


@FAST
@given(st.binary(max_size=300))
def test_any_bytes_give_a_report_or_one_error(content: bytes) -> None:
    """Whatever the file holds: a report, or one error naming the file; never a traceback."""
    Path("gradient_flow.svg").unlink(missing_ok=True)
    Path("events.jsonl").write_bytes(content)
    _check_any_outcome(_report("events.jsonl"))


# --------------------------------------------------------------------------------------------
# The installed command
# --------------------------------------------------------------------------------------------


def _installed(*args: str) -> subprocess.CompletedProcess[bytes]:
    command = shutil.which("hookgrad", path=str(Path(sys.executable).parent))
    assert command is not None, "the hookgrad console script is not installed"
    return subprocess.run([command, *args], capture_output=True, timeout=120, check=False)


def test_installed_command_reports_a_hostile_log_without_escapes(tmp_path: Path) -> None:
    """The real hookgrad process: zero and NaN norms, an ANSI name; exit 0, no ESC on stdout."""
    _write([_norm(0, "\x1b[31mfc", 0.0), _norm(1, "\x1b[31mfc", math.nan), _clip(0, 0.0, 0.0)])
    done = _installed("report", "events.jsonl", "--out", "picture.svg")
    assert done.returncode == 0, done.stderr.decode()
    assert b"\x1b" not in done.stdout + done.stderr and b"Traceback" not in done.stderr
    assert b"\\x1b[31mfc" in done.stdout
    _svg(tmp_path / "picture.svg")


def test_installed_command_names_a_bad_line(tmp_path: Path) -> None:
    """The real hookgrad process: a bad line in the middle is one error line, exit 1."""
    _write([_norm(0, "fc", 1.0), b"\xff", _norm(1, "fc", 1.0)])
    done = _installed("report", "events.jsonl")
    assert done.returncode == 1
    assert done.stderr == b"Error: events.jsonl:2: not UTF-8 (byte 0xff at offset 0)\n"
    assert not (tmp_path / "gradient_flow.svg").exists()
