"""The gradient-flow picture and run summary of ``hookgrad demo`` and ``hookgrad report``.

Everything here works on event records in their JSON form (dicts as the JSON-lines sink writes
them), so a saved log redraws exactly what the run drew: :func:`read_events` reads a log back,
:func:`render_svg` draws two panels on one step axis and :func:`findings` puts the guard's and
the scaler's decisions into sentences.

Steps are shown as people count them, from 1 (the k-th optimizer step, as the demo's progress
bar and ``loss.csv`` count); records carry the runtime's counter, which starts at 0, so a
record's ``step`` is shown plus :data:`FIRST_STEP`.

The SVG is plain markup, built by hand (no plotting dependency) and deterministic: the same
records give the same bytes (numbers are written with fixed precision, series in record order).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeAlias
from xml.sax.saxutils import escape, quoteattr

__all__ = [
    "FIRST_STEP",
    "Entry",
    "Flow",
    "Marker",
    "Scale",
    "findings",
    "gradient_flow",
    "log_ticks",
    "nice_ticks",
    "plugin_entries",
    "read_events",
    "render_svg",
    "staircase",
]

FIRST_STEP: Final = 1
"""What the first step (record ``step`` 0) is called in pictures and messages."""

Record: TypeAlias = Mapping[str, Any]
Point: TypeAlias = tuple[float, float]

# tab10, the matplotlib default cycle: distinct hues that stay apart on white.
PALETTE: Final = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
SKIP_COLOR: Final = "#d62728"
BACKOFF_COLOR: Final = "#ff7f0e"
SCALE_COLOR: Final = "#9467bd"

# Layout in pixels: the margins hold the y-axis labels (left), the right axis and the legend.
WIDTH: Final = 960
LEFT: Final = 80
RIGHT: Final = 230
TOP: Final = 40
PANEL_HEIGHT: Final = 250
PANEL_GAP: Final = 70
LEGEND_INDENT: Final = 48
LEGEND_ROW: Final = 18
LAYERS_PANEL: Final = ("Gradient norm per layer (grad_stats, before clipping)", "gradient norm")
STEP_PANEL: Final = ("Clipping and loss scaling (grad_clip, grad_scale)", "total gradient norm")


# --------------------------------------------------------------------------------------------
# Reading a log
# --------------------------------------------------------------------------------------------


def read_events(path: Path, warn: Callable[[str], None]) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines log, in file order.

    A line that is not a JSON object is skipped with ``warn("FILE:LINE: ...")``; blank lines
    are skipped silently. Raises OSError when the file cannot be read.
    """
    records = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                warn(f"{path}:{number}: not JSON ({error.msg}); line skipped")
                continue
            if not isinstance(record, dict):
                warn(f"{path}:{number}: not a JSON object; line skipped")
                continue
            records.append(record)
    return records


class Entry(NamedTuple):
    """A plugin record, checked: what the picture and the sentences read."""

    plugin: str
    kind: str
    step: int
    """As shown: the record's ``step`` plus FIRST_STEP."""
    module: str | None
    data: Mapping[str, Any]


def plugin_entries(records: Iterable[Record]) -> list[Entry]:
    """The PluginRecord-shaped dicts among ``records``, in order.

    Log entries (no ``kind``) and dicts whose fields have the wrong types are left out, so a
    hand-edited log cannot break the picture.
    """
    entries = []
    for r in records:
        plugin, kind, step, data = r.get("plugin"), r.get("kind"), r.get("step"), r.get("data", {})
        module = r.get("module_name")
        if (
            isinstance(plugin, str)
            and isinstance(kind, str)
            and type(step) is int
            and isinstance(data, dict)
            and (module is None or isinstance(module, str))
        ):
            entries.append(Entry(plugin, kind, step + FIRST_STEP, module, data))
    return entries


def _number(value: Any) -> float | None:
    """``value`` as a finite float, or None (None, strings, NaN, booleans)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


# --------------------------------------------------------------------------------------------
# What the picture shows
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Marker:
    """A vertical line at ``step`` (shown steps), with a label and a tooltip."""

    step: int
    label: str
    kind: str


@dataclass
class Flow:
    """The series of the picture, pulled out of the records; steps as shown (from 1)."""

    modules: dict[str, list[Point]] = field(default_factory=dict)
    """Pre-clip gradient norm per module (grad_stats ``module_grad``), by qualified name."""
    pre_clip: list[Point] = field(default_factory=list)
    post_clip: list[Point] = field(default_factory=list)
    clipped: list[Point] = field(default_factory=list)
    """(step, pre-clip norm) of the steps grad_clip clipped."""
    log2_scale: list[Point] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)

    def steps(self) -> list[float]:
        """Every step some series or marker has, for the shared x axis."""
        series = [*self.modules.values(), self.pre_clip, self.post_clip, self.log2_scale]
        return [x for points in series for x, _ in points] + [m.step for m in self.markers]


def gradient_flow(records: Iterable[Record]) -> Flow:
    """The picture's series: grad_stats module norms, grad_clip norms, grad_scale's scale."""
    entries = plugin_entries(records)
    producers: dict[int, str | None] = {}
    for e in entries:
        if e.kind == "nonfinite" and e.data.get("role") == "producer":
            producers.setdefault(e.step, e.module)
    flow = Flow()
    for entry in entries:
        _collect(flow, entry, producers)
    return flow


def _collect(flow: Flow, entry: Entry, producers: Mapping[int, str | None]) -> None:
    """Add one record to the series it belongs to; any other record is ignored.

    ``producers``: the module nan_guard named the producer of a non-finite value, per step.
    """
    step, data, source = entry.step, entry.data, (entry.plugin, entry.kind)
    if entry.kind == "skip_step":
        module = data.get("module", producers.get(step))
        label = f"skip: {data.get('reason', entry.plugin)}"
        label += f", from {module!r}" if module is not None else ""
        flow.markers.append(Marker(step, label, "skip_step"))
    elif source == ("grad_scale", "backoff"):
        flow.markers.append(Marker(step, "backoff", "backoff"))
    elif source == ("grad_stats", "module_grad") and data.get("stage") == "pre_clip":
        _append(flow.modules.setdefault(entry.module or "", []), step, data.get("norm"))
    elif source == ("grad_clip", "clip") and entry.module is None:
        _append(flow.pre_clip, step, data.get("pre_norm"))
        _append(flow.post_clip, step, data.get("post_norm"))
        if data.get("clipped"):
            _append(flow.clipped, step, data.get("pre_norm"))
    elif source == ("grad_scale", "scale"):
        scale = _number(data.get("scale"))
        if scale is not None and scale > 0:
            flow.log2_scale.append((step, math.log2(scale)))


def _append(points: list[Point], step: int, value: Any) -> None:
    number = _number(value)
    if number is not None:
        points.append((step, number))


# --------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------


def findings(records: Iterable[Record]) -> list[str]:
    """One sentence per step nan_guard flagged, and a line on clipping and loss scaling."""
    entries = plugin_entries(records)
    lines = [_nonfinite_sentence(step, group) for step, group in _nan_steps(entries).items()]
    return [*lines, *_clip_summary(entries), *_scale_summary(entries)]


def _of(entries: Iterable[Entry], plugin: str, kind: str) -> list[Entry]:
    return [e for e in entries if e.plugin == plugin and e.kind == kind]


def _nan_steps(entries: list[Entry]) -> dict[int, list[Entry]]:
    """Per step nan_guard reported on: its records and any skip_step record of that step."""
    flagged = {e.step for e in entries if e.plugin == "nan_guard"}
    steps: dict[int, list[Entry]] = {}
    for e in entries:
        if e.step in flagged and (e.plugin == "nan_guard" or e.kind == "skip_step"):
            steps.setdefault(e.step, []).append(e)
    return steps


def _nonfinite_sentence(step: int, group: list[Entry]) -> str:
    """``nan_guard: step 30 skipped: non-finite grad_input[0] produced by module '2' (backward)``."""
    skip = next((e for e in group if e.kind == "skip_step"), None)
    culprit = _culprit(group)
    if skip is None:
        return f"nan_guard: step {step}: {culprit}; the step was taken"
    if skip.plugin == "nan_guard":
        return f"nan_guard: step {step} skipped: {culprit}"
    reason = skip.data.get("reason", "")
    return f"nan_guard: step {step}: {culprit}; step skipped by {skip.plugin} ({reason})"


def _culprit(group: list[Entry]) -> str:
    """What the guard found: the first producer, else its skip or zeroed record."""
    for e in group:
        if e.kind == "nonfinite" and e.data.get("role") == "producer":
            where = f"module {e.module!r} ({e.data.get('phase')})"
            return f"non-finite {e.data.get('tensor')} produced by {where}"
    for e in group:
        if e.kind == "skip_step" and e.plugin == "nan_guard":
            return f"non-finite {e.data.get('tensor')} in module {e.data.get('module')!r}"
        if e.kind == "zeroed":
            return f"{e.data.get('count')} non-finite gradient entries set to 0"
    return "non-finite values propagated (no producer named)"


def _clip_summary(entries: list[Entry]) -> Iterator[str]:
    clips = [e for e in _of(entries, "grad_clip", "clip") if e.module is None]
    if clips:
        clipped = sum(1 for e in clips if e.data.get("clipped"))
        yield f"grad_clip: clipped {clipped} of {_count(len(clips), 'step')}"


def _scale_summary(entries: list[Entry]) -> Iterator[str]:
    found = (_number(e.data.get("scale")) for e in _of(entries, "grad_scale", "scale"))
    scales = [s for s in found if s is not None]
    if scales:
        counts = [
            _count(len(_of(entries, "grad_scale", kind)), noun)
            for kind, noun in (("growth", "growth"), ("backoff", "backoff"), ("skip_step", "skip"))
        ]
        yield f"grad_scale: loss scale {scales[0]:g} -> {scales[-1]:g} ({', '.join(counts)})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# --------------------------------------------------------------------------------------------
# Scales and ticks
# --------------------------------------------------------------------------------------------


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round values (1, 2 or 5 times a power of ten) inside [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


def log_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """The powers of ten inside [lo, hi] (both > 0), every k-th so at most ``count`` remain."""
    first = math.ceil(math.log10(lo) - 1e-9)
    last = math.floor(math.log10(hi) + 1e-9)
    exponents = range(first, last + 1)
    stride = max(1, math.ceil(len(exponents) / count))
    return [10.0**e for e in exponents[::stride]]


@dataclass(frozen=True)
class Scale:
    """Maps data in [lo, hi] onto pixels [start, end]; a ``log`` scale maps log10 linearly."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool = False

    @classmethod
    def linear(cls, values: Iterable[float], start: float, end: float) -> Scale:
        """Exactly the range of ``values`` ([0, 1] if none; a single value gets +-1)."""
        data = list(values)
        lo, hi = (min(data), max(data)) if data else (0.0, 1.0)
        return cls(lo, hi, start, end) if hi > lo else cls(lo - 1, hi + 1, start, end)

    @classmethod
    def decades(cls, values: Iterable[float], start: float, end: float) -> Scale:
        """A log scale over the whole decades around the positive ``values`` ([1, 10] if none)."""
        data = [v for v in values if v > 0]
        if not data:
            return cls(1.0, 10.0, start, end, log=True)
        lo = 10.0 ** math.floor(math.log10(min(data)))
        hi = 10.0 ** math.ceil(math.log10(max(data)))
        return cls(lo, hi if hi > lo else lo * 10, start, end, log=True)

    def __call__(self, value: float) -> float:
        transform = math.log10 if self.log else float
        lo, hi = transform(self.lo), transform(self.hi)
        return self.start + (transform(value) - lo) / (hi - lo) * (self.end - self.start)

    def ticks(self) -> list[float]:
        return log_ticks(self.lo, self.hi) if self.log else nice_ticks(self.lo, self.hi)


# --------------------------------------------------------------------------------------------
# SVG helpers
# --------------------------------------------------------------------------------------------


def _f(value: float) -> str:
    """A coordinate with one decimal: stable output, small files."""
    return f"{value:.1f}"


def start_tag(tag: str, attrs: Mapping[str, object]) -> str:
    """``<tag a="1"`` without the closing bracket; attributes in the given order, escaped."""
    return f"<{tag}" + "".join(f" {key}={quoteattr(str(value))}" for key, value in attrs.items())


def element(tag: str, attrs: Mapping[str, object], content: str = "") -> str:
    """``<tag a="1">content</tag>`` (content as is), or ``<tag a="1"/>`` without content."""
    return f"{start_tag(tag, attrs)}>{content}</{tag}>" if content else f"{start_tag(tag, attrs)}/>"


def text(x: float, y: float, content: str, **style: object) -> str:
    """A text element; ``style`` keywords use ``_`` for ``-`` (``text_anchor="end"``)."""
    attrs = {key.replace("_", "-"): value for key, value in style.items()}
    return element("text", {"x": _f(x), "y": _f(y), **attrs}, escape(content))


def line(x1: float, y1: float, x2: float, y2: float, color: str, dash: str = "") -> str:
    attrs = {"x1": _f(x1), "y1": _f(y1), "x2": _f(x2), "y2": _f(y2), "stroke": color}
    return element("line", {**attrs, "stroke-dasharray": dash} if dash else attrs)


def polyline(
    points: Sequence[Point], x: Scale, y: Scale, color: str, attrs: Mapping[str, object]
) -> str:
    """The data points joined by straight lines; ``attrs`` first (class, data-*)."""
    path = " ".join(f"{_f(x(px))},{_f(y(py))}" for px, py in points)
    style = {"fill": "none", "stroke": color, "stroke-width": "1.5"}
    return element("polyline", {**attrs, "points": path, **style})


def staircase(points: Sequence[Point]) -> list[Point]:
    """A value held until the next point's step: what a setting changed at steps looks like."""
    held = list(points[:1])
    for (_, previous), (step, value) in pairwise(points):
        held.extend([(step, previous), (step, value)])
    return held


def _tick(value: float) -> str:
    """A tick label: 0.001, 1, 1e+06."""
    return f"{value:g}"


def _pow2(value: float) -> str:
    return f"2^{value:g}"


@dataclass(frozen=True)
class Panel:
    """One plot area in pixels, its title, and the label of its left axis."""

    top: float
    bottom: float
    title: str
    y_label: str
    left: float = LEFT
    right: float = WIDTH - RIGHT

    def frame(self, x: Scale, y: Scale) -> list[str]:
        """Title, y label, grid lines with left-axis tick labels, x ticks, the border."""
        middle = (self.top + self.bottom) / 2
        turn = f"rotate(-90 20 {_f(middle)})"
        parts = [
            text(self.left, self.top - 10, self.title, font_weight="bold"),
            text(20, middle, self.y_label, text_anchor="middle", transform=turn),
        ]
        for value in y.ticks():
            parts.append(line(self.left, y(value), self.right, y(value), "#e5e5e5"))
            parts.append(text(self.left - 6, y(value) + 4, _tick(value), text_anchor="end"))
        for value in (v for v in x.ticks() if v == int(v)):  # steps are whole numbers
            parts.append(line(x(value), self.bottom, x(value), self.bottom + 5, "#444"))
            parts.append(text(x(value), self.bottom + 18, _tick(value), text_anchor="middle"))
        size = {"width": _f(self.right - self.left), "height": _f(self.bottom - self.top)}
        box = {"x": _f(self.left), "y": _f(self.top), **size, "fill": "none", "stroke": "#444"}
        return [*parts, element("rect", box)]

    def note(self, message: str) -> str:
        """A grey line of text in the middle: why the panel is empty."""
        x, y = (self.left + self.right) / 2, (self.top + self.bottom) / 2
        return text(x, y, message, text_anchor="middle", fill="#777")

    def legend(self, entries: Sequence[tuple[str, str, str]]) -> list[str]:
        """(label, color, look) rows right of the panel; look is line, dash or dot."""
        x = self.right + LEGEND_INDENT
        parts = []
        for row, (name, color, look) in enumerate(entries):
            y = self.top + 8 + row * LEGEND_ROW
            if look == "dot":
                parts.append(
                    element("circle", {"cx": _f(x + 9), "cy": _f(y), "r": 3, "fill": color})
                )
            else:
                parts.append(line(x, y, x + 18, y, color, "4 3" if look == "dash" else ""))
            parts.append(text(x + 24, y + 4, name))
        return parts


def _shorten(name: str, limit: int = 22) -> str:
    """A long qualified name keeps its end, the part that tells layers apart."""
    return name if len(name) <= limit else "\u2026" + name[-(limit - 1) :]


# --------------------------------------------------------------------------------------------
# The picture
# --------------------------------------------------------------------------------------------


def render_svg(flow: Flow) -> str:
    """The two panels on one step axis, with skip and backoff markers across both, as SVG."""
    legend_height = len(flow.modules) * LEGEND_ROW + 16  # a long legend makes the panel taller
    layers = Panel(TOP, TOP + max(PANEL_HEIGHT, legend_height), *LAYERS_PANEL)
    steps = Panel(layers.bottom + PANEL_GAP, layers.bottom + PANEL_GAP + PANEL_HEIGHT, *STEP_PANEL)
    x = Scale.linear(flow.steps() or [FIRST_STEP], LEFT, WIDTH - RIGHT)
    height = steps.bottom + 45
    parts = [
        *_layers(flow, layers, x),
        *_clipping_and_scaling(flow, steps, x),
        *(_marker(marker, x, (layers, steps)) for marker in flow.markers),
        text((LEFT + WIDTH - RIGHT) / 2, height - 12, "step", text_anchor="middle"),
    ]
    size = {"width": WIDTH, "height": _f(height), "viewBox": f"0 0 {WIDTH} {_f(height)}"}
    font = {"font-family": "sans-serif", "font-size": 11}
    header = start_tag("svg", {"xmlns": "http://www.w3.org/2000/svg", **size, **font}) + ">"
    background = element("rect", {"width": "100%", "height": "100%", "fill": "white"})
    return "\n".join([header, background, *parts, "</svg>"]) + "\n"


def _layers(flow: Flow, panel: Panel, x: Scale) -> list[str]:
    """Panel 1: one line per module with grad_stats pre-clip norms, log y axis, legend."""
    norms = [value for points in flow.modules.values() for _, value in points]
    y = Scale.decades(norms, panel.bottom, panel.top)
    parts = panel.frame(x, y)
    if not flow.modules:
        return [*parts, panel.note("no grad_stats module_grad records in this log")]
    entries = []
    for index, (name, points) in enumerate(flow.modules.items()):
        color = PALETTE[index % len(PALETTE)]
        parts.append(polyline(points, x, y, color, {"class": "module-norm", "data-module": name}))
        entries.append((_shorten(name or "(root)"), color, "line"))
    return [*parts, *panel.legend(entries)]


def _clipping_and_scaling(flow: Flow, panel: Panel, x: Scale) -> list[str]:
    """Panel 2: total norm before and after clipping (left, log), loss scale (right, log2)."""
    y = Scale.decades([v for _, v in (*flow.pre_clip, *flow.post_clip)], panel.bottom, panel.top)
    parts = panel.frame(x, y)
    entries = []
    if flow.pre_clip or flow.post_clip:
        parts.append(polyline(flow.pre_clip, x, y, "#555555", {"class": "clip-pre"}))
        parts.append(polyline(flow.post_clip, x, y, PALETTE[0], {"class": "clip-post"}))
        for step, norm in flow.clipped:
            dot = {"class": "clipped", "cx": _f(x(step)), "cy": _f(y(norm)), "r": 2}
            parts.append(element("circle", {**dot, "fill": SKIP_COLOR}))
        entries += [
            ("norm before clipping", "#555555", "line"),
            ("after clipping", PALETTE[0], "line"),
            ("clipped", SKIP_COLOR, "dot"),
        ]
    if flow.log2_scale:
        parts += _scale_line(flow.log2_scale, panel, x)
        entries.append(("loss scale (right axis)", SCALE_COLOR, "line"))
    if not entries:
        return [*parts, panel.note("no grad_clip or grad_scale records in this log")]
    entries += [("skipped step", SKIP_COLOR, "line"), ("scale backoff", BACKOFF_COLOR, "dash")]
    return [*parts, *panel.legend(entries)]


def _scale_line(log2_scale: list[Point], panel: Panel, x: Scale) -> list[str]:
    """The loss scale as a staircase against a right axis in powers of two."""
    values = [value for _, value in log2_scale]
    bounds = [math.floor(min(values)) - 0.5, math.ceil(max(values)) + 0.5]
    y = Scale.linear(bounds, panel.bottom, panel.top)
    parts = [polyline(staircase(log2_scale), x, y, SCALE_COLOR, {"class": "loss-scale"})]
    for value in (v for v in y.ticks() if v == int(v)):
        parts.append(line(panel.right, y(value), panel.right + 5, y(value), SCALE_COLOR))
        parts.append(text(panel.right + 8, y(value) + 4, _pow2(value), fill=SCALE_COLOR))
    return parts


def _marker(marker: Marker, x: Scale, panels: Sequence[Panel]) -> str:
    """A vertical line through every panel; a skipped step is red and labelled."""
    skip = marker.kind == "skip_step"
    color, dash = (SKIP_COLOR, "") if skip else (BACKOFF_COLOR, "4 3")
    px = x(marker.step)
    parts = [element("title", {}, escape(f"step {marker.step}: {marker.label}"))]
    parts += [line(px, panel.top, px, panel.bottom, color, dash) for panel in panels]
    if skip:
        top = panels[-1].top + 6
        turn = f"rotate(-90 {_f(px - 3)} {_f(top)})"
        parts.append(text(px - 3, top, marker.label, text_anchor="end", fill=color, transform=turn))
    return element("g", {"class": f"marker {marker.kind}"}, "".join(parts))
