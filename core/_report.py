"""The gradient-flow picture and run summary of ``hookgrad demo`` and ``hookgrad report``.

Everything here works on checked plugin records (:mod:`hookgrad._report_records`), from a
run's memory or read back from its JSON-lines log, so a saved log redraws exactly what the run
drew: :func:`gradient_flow` pulls the series out, :func:`render_svg` draws two panels on one
step axis and :func:`findings` puts the guard's and the scaler's decisions into sentences.

Steps are shown as people count them, from 1 (the k-th optimizer step, as the demo's progress
bar and ``loss.csv`` count); records carry the runtime's counter, which starts at 0, so a
record's ``step`` is shown plus :data:`FIRST_STEP`.

Any number a record may hold is drawn: the log axes clamp zeros (and anything below their
lowest decade) onto the axis, whose lowest tick then reads ``≤``, and a NaN or infinite value
is a triangle at the top of its panel, with a tooltip saying which.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from ._report_records import (
    FIRST_STEP,
    Clip,
    Entry,
    Health,
    LossScale,
    ModuleGrad,
    NonFinite,
    ScaleChange,
    SkipStep,
    Spike,
    Zeroed,
)
from ._svg import (
    Point,
    Scale,
    coordinate,
    element,
    line,
    polyline,
    staircase,
    start_tag,
    text,
    title,
)

__all__ = ["Flow", "Marker", "findings", "gradient_flow", "render_svg"]

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
PRE_CLIP_COLOR: Final = "#555555"
NONFINITE_COLOR: Final = "#444444"

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
    """The series of the picture, pulled out of the records; steps as shown (from 1).

    Values may be zero, huge or not finite: the drawing decides where each goes.
    """

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


def gradient_flow(entries: Iterable[Entry]) -> Flow:
    """The picture's series: grad_stats module norms, grad_clip norms, grad_scale's scale."""
    entries = list(entries)
    producers: dict[int, str | None] = {}
    for e in entries:
        if isinstance(e.data, NonFinite) and e.data.role == "producer":
            producers.setdefault(e.step, e.module)
    flow = Flow()
    for entry in entries:
        _collect(flow, entry, producers)
    return flow


def _collect(flow: Flow, entry: Entry, producers: Mapping[int, str | None]) -> None:
    """Add one entry to the series it belongs to; any other entry is ignored.

    ``producers``: the module nan_guard named the producer of a non-finite value, per step.
    """
    step, data = entry.step, entry.data
    if isinstance(data, SkipStep) and entry.kind != "spike_clipped":  # a clipped step ran
        module = data.module if data.module is not None else producers.get(step)
        what = "rollback" if entry.kind == "rolled_back" else "skip"
        label = f"{what}: {data.reason if data.reason is not None else entry.plugin}"
        label += f", from '{module}'" if module is not None else ""
        flow.markers.append(Marker(step, label, "skip_step"))
    elif isinstance(data, ScaleChange) and entry.kind == "backoff":
        flow.markers.append(Marker(step, "backoff", "backoff"))
    elif isinstance(data, ModuleGrad) and data.stage == "pre_clip":
        flow.modules.setdefault(entry.module or "", []).append((step, data.norm))
    elif isinstance(data, Clip) and entry.module is None:
        pre, post = _clip_norm(data.pre_norm, data), _clip_norm(data.post_norm, data)
        _append(flow.pre_clip, step, pre)
        _append(flow.post_clip, step, post)
        if data.clipped and pre is not None and math.isfinite(pre):
            flow.clipped.append((step, pre))
    elif isinstance(data, LossScale) and data.scale is not None:
        flow.log2_scale.append((step, _log2(data.scale)))


def _clip_norm(norm: float | None, data: Clip) -> float | None:
    """A grad_clip norm: null stands for NaN when the record says a norm was not finite."""
    return math.nan if norm is None and data.nonfinite else norm


def _append(points: list[Point], step: int, value: float | None) -> None:
    if value is not None:
        points.append((step, value))


def _log2(scale: float) -> float:
    """log2 of a loss scale: -inf for 0, NaN for a negative or NaN scale."""
    if scale > 0:
        return math.log2(scale)
    return -math.inf if scale == 0 else math.nan


# --------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------


def findings(entries: Iterable[Entry]) -> list[str]:
    """One sentence per step nan_guard flagged and per spike_guard decision, a line on
    clipping and loss scaling, and param_health's findings."""
    entries = list(entries)
    lines = [_nonfinite_sentence(step, group) for step, group in _nan_steps(entries).items()]
    spikes = [_spike_sentence(e) for e in entries if isinstance(e.data, Spike)]
    health = [line for e in entries if isinstance(e.data, Health) for line in _health(e.data)]
    return [*lines, *spikes, *_clip_summary(entries), *_scale_summary(entries), *health]


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
    skip = next((e for e in group if isinstance(e.data, SkipStep)), None)
    culprit = _culprit(group)
    if skip is None:
        return f"nan_guard: step {step}: {culprit}; the step was taken"
    if skip.plugin == "nan_guard":
        return f"nan_guard: step {step} skipped: {culprit}"
    reason = skip.data.reason if isinstance(skip.data, SkipStep) and skip.data.reason else ""
    return f"nan_guard: step {step}: {culprit}; step skipped by {skip.plugin} ({reason})"


def _culprit(group: list[Entry]) -> str:
    """What the guard found: the first producer, else its skip or zeroed record."""
    for e in group:
        if isinstance(e.data, NonFinite) and e.data.role == "producer":
            where = f"module {_quoted(e.module)} ({e.data.phase})"
            return f"non-finite {e.data.tensor} produced by {where}"
    for e in group:
        if isinstance(e.data, SkipStep) and e.plugin == "nan_guard":
            return f"non-finite {e.data.tensor} in module {_quoted(e.data.module)}"
        if isinstance(e.data, Zeroed):
            return f"{e.data.count} non-finite gradient entries set to 0"
    return "non-finite values propagated (no producer named)"


def _spike_sentence(entry: Entry) -> str:
    """``spike_guard: step 57 skipped: loss 12.4 is a spike (z 48.1; mean 0.52, std 0.24)``."""
    data = entry.data
    assert isinstance(data, Spike)
    value = math.nan if data.value is None else data.value
    if not math.isfinite(value):
        why = f"{data.signal} {value} is not finite"
    else:
        z = "off the scale" if data.z is None else f"{data.z:.3g}"
        why = f"{data.signal} {value:.4g} is a spike (z {z}; mean {_g(data.mean)}, std {_g(data.std)})"
    if entry.kind == "spike_clipped":
        return f"spike_guard: step {entry.step}: {why}; gradients scaled by {_g(data.scale)}"
    if entry.kind == "rolled_back":
        after = "?" if data.snapshot_step is None else data.snapshot_step + FIRST_STEP
        return f"spike_guard: step {entry.step} rolled back to the snapshot of step {after}: {why}"
    return f"spike_guard: step {entry.step} skipped: {why}"


def _health(report: Health) -> list[str]:
    """param_health's report: a line per finding, or that every parameter is healthy."""
    lines = [
        f"param_health: {d.fraction:.1%} of the units of {d.param} (module {_quoted(d.module)}) "
        "are dead"
        for d in report.dead
    ]
    for kind in ("unused", "frozen", "exploding"):
        names: list[str] = getattr(report, kind)
        if names:
            lines.append(f"param_health: {kind}: {', '.join(names)}")
    return lines or ["param_health: every watched parameter is healthy"]


def _g(number: float | None) -> str:
    """A number in 4 significant digits; a missing one as "?"."""
    return "?" if number is None else f"{number:.4g}"


def _quoted(name: str | None) -> str:
    """A module name in quotes (checked text is printable: no repr needed), or None."""
    return "None" if name is None else f"'{name}'"


def _clip_summary(entries: list[Entry]) -> Iterator[str]:
    clips = [e for e in _of(entries, "grad_clip", "clip") if e.module is None]
    if clips:
        clipped = sum(1 for e in clips if isinstance(e.data, Clip) and e.data.clipped)
        yield f"grad_clip: clipped {clipped} of {_count(len(clips), 'step')}"


def _scale_summary(entries: list[Entry]) -> Iterator[str]:
    scales = [
        e.data.scale for e in entries if isinstance(e.data, LossScale) and e.data.scale is not None
    ]
    if scales:
        counts = [
            _count(len(_of(entries, "grad_scale", kind)), noun)
            for kind, noun in (("growth", "growth"), ("backoff", "backoff"), ("skip_step", "skip"))
        ]
        yield f"grad_scale: loss scale {scales[0]:g} -> {scales[-1]:g} ({', '.join(counts)})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# --------------------------------------------------------------------------------------------
# Panels
# --------------------------------------------------------------------------------------------


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
        turn = f"rotate(-90 20 {coordinate(middle)})"
        parts = [
            text(self.left, self.top - 10, self.title, font_weight="bold"),
            text(20, middle, self.y_label, text_anchor="middle", transform=turn),
        ]
        for value in y.ticks():
            parts.append(line(self.left, y(value), self.right, y(value), "#e5e5e5"))
            parts.append(text(self.left - 6, y(value) + 4, y.label(value), text_anchor="end"))
        for value in (v for v in x.ticks() if v == int(v)):  # steps are whole numbers
            parts.append(line(x(value), self.bottom, x(value), self.bottom + 5, "#444"))
            parts.append(text(x(value), self.bottom + 18, x.label(value), text_anchor="middle"))
        width, height = coordinate(self.right - self.left), coordinate(self.bottom - self.top)
        box = {"x": coordinate(self.left), "y": coordinate(self.top), "width": width}
        return [
            *parts,
            element("rect", {**box, "height": height, "fill": "none", "stroke": "#444"}),
        ]

    def note(self, message: str) -> str:
        """A grey line of text in the middle: why the panel is empty."""
        x, y = (self.left + self.right) / 2, (self.top + self.bottom) / 2
        return text(x, y, message, text_anchor="middle", fill="#777")

    def series(
        self, points: Sequence[Point], x: Scale, y: Scale, color: str, what: str, **attrs: str
    ) -> list[str]:
        """A line through the finite points, and a triangle atop the panel for each other one.

        ``what`` names the series in the triangles' tooltips; ``attrs`` go on the line, with
        ``_`` for ``-`` (``data_module``, ``class_``).
        """
        finite = [(step, value) for step, value in points if math.isfinite(value)]
        named = {key.strip("_").replace("_", "-"): value for key, value in attrs.items()}
        parts = [polyline(finite, x, y, color, named)]
        for step, value in points:
            if not math.isfinite(value):
                parts.append(self.nonfinite_mark(x(step), f"step {step}: {what} is {value}", color))
        return parts

    def nonfinite_mark(self, px: float, tooltip: str, color: str) -> str:
        """A small triangle pointing up at the top edge: a value that has no place on the axis."""
        top = self.top + 2
        path = f"M{coordinate(px)},{coordinate(top)} l4,7 h-8 z"
        return element("path", {"class": "nonfinite", "d": path, "fill": color}, title(tooltip))

    def legend(self, entries: Sequence[tuple[str, str, str]]) -> list[str]:
        """(label, color, look) rows right of the panel; look is line, dash, dot or triangle."""
        x = self.right + LEGEND_INDENT
        parts = []
        for row, (name, color, look) in enumerate(entries):
            y = self.top + 8 + row * LEGEND_ROW
            if look == "dot":
                dot = {"cx": coordinate(x + 9), "cy": coordinate(y), "r": 3, "fill": color}
                parts.append(element("circle", dot))
            elif look == "triangle":
                path = f"M{coordinate(x + 9)},{coordinate(y - 4)} l4,7 h-8 z"
                parts.append(element("path", {"d": path, "fill": color}))
            else:
                parts.append(line(x, y, x + 18, y, color, "4 3" if look == "dash" else ""))
            parts.append(text(x + 24, y + 4, name))
        return parts


NONFINITE_LEGEND: Final = ("NaN or inf (at the top)", NONFINITE_COLOR, "triangle")


def _has_nonfinite(*series: Iterable[Point]) -> bool:
    return any(not math.isfinite(value) for points in series for _, value in points)


def _shorten(name: str, limit: int = 22) -> str:
    """A long qualified name keeps its end, the part that tells layers apart."""
    return name if len(name) <= limit else "\u2026" + name[-(limit - 1) :]


# --------------------------------------------------------------------------------------------
# The picture
# --------------------------------------------------------------------------------------------


def render_svg(flow: Flow) -> str:
    """The two panels on one step axis, with skip and backoff markers across both, as SVG."""
    rows = len(flow.modules) + _has_nonfinite(*flow.modules.values())
    legend_height = rows * LEGEND_ROW + 16  # a long legend makes the panel taller
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
    box = f"0 0 {WIDTH} {coordinate(height)}"
    size = {"width": WIDTH, "height": coordinate(height), "viewBox": box}
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
        what = f"the gradient norm of module '{name}'"
        parts += panel.series(points, x, y, color, what, class_="module-norm", data_module=name)
        entries.append((_shorten(name or "(root)"), color, "line"))
    if _has_nonfinite(*flow.modules.values()):
        entries.append(NONFINITE_LEGEND)
    return [*parts, *panel.legend(entries)]


def _clipping_and_scaling(flow: Flow, panel: Panel, x: Scale) -> list[str]:
    """Panel 2: total norm before and after clipping (left, log), loss scale (right, log2)."""
    y = Scale.decades([v for _, v in (*flow.pre_clip, *flow.post_clip)], panel.bottom, panel.top)
    parts = panel.frame(x, y)
    entries = []
    if flow.pre_clip or flow.post_clip:
        before, after = "the norm before clipping", "the norm after clipping"
        parts += panel.series(flow.pre_clip, x, y, PRE_CLIP_COLOR, before, class_="clip-pre")
        parts += panel.series(flow.post_clip, x, y, PALETTE[0], after, class_="clip-post")
        for step, norm in flow.clipped:
            dot = {"class": "clipped", "cx": coordinate(x(step)), "cy": coordinate(y(norm))}
            parts.append(element("circle", {**dot, "r": 2, "fill": SKIP_COLOR}))
        entries += [
            ("norm before clipping", PRE_CLIP_COLOR, "line"),
            ("after clipping", PALETTE[0], "line"),
            ("clipped", SKIP_COLOR, "dot"),
        ]
    if flow.log2_scale:
        parts += _scale_line(flow.log2_scale, panel, x)
        entries.append(("loss scale (right axis)", SCALE_COLOR, "line"))
    if not entries:
        return [*parts, panel.note("no grad_clip or grad_scale records in this log")]
    entries += [("skipped step", SKIP_COLOR, "line"), ("scale backoff", BACKOFF_COLOR, "dash")]
    if _has_nonfinite(flow.pre_clip, flow.post_clip, flow.log2_scale):
        entries.append(NONFINITE_LEGEND)
    return [*parts, *panel.legend(entries)]


def _scale_line(log2_scale: list[Point], panel: Panel, x: Scale) -> list[str]:
    """The loss scale as a staircase against a right axis in powers of two.

    A scale of 0 (log2 -inf), inf or NaN is a triangle at the top, not a step of the stairs.
    """
    values = [value for _, value in log2_scale if math.isfinite(value)]
    bounds = [math.floor(min(values)) - 0.5, math.ceil(max(values)) + 0.5] if values else []
    y = Scale.linear(bounds, panel.bottom, panel.top)
    finite = [(step, value) for step, value in log2_scale if math.isfinite(value)]
    parts = [polyline(staircase(finite), x, y, SCALE_COLOR, {"class": "loss-scale"})]
    for step, value in log2_scale:
        if not math.isfinite(value):
            tooltip = f"step {step}: the loss scale is {2.0**value}"
            parts.append(panel.nonfinite_mark(x(step), tooltip, SCALE_COLOR))
    for value in (v for v in y.ticks() if v == int(v)):
        parts.append(line(panel.right, y(value), panel.right + 5, y(value), SCALE_COLOR))
        parts.append(text(panel.right + 8, y(value) + 4, _pow2(value), fill=SCALE_COLOR))
    return parts


def _marker(marker: Marker, x: Scale, panels: Sequence[Panel]) -> str:
    """A vertical line through every panel; a skipped step is red and labelled."""
    skip = marker.kind == "skip_step"
    color, dash = (SKIP_COLOR, "") if skip else (BACKOFF_COLOR, "4 3")
    px = x(marker.step)
    parts = [title(f"step {marker.step}: {marker.label}")]
    parts += [line(px, panel.top, px, panel.bottom, color, dash) for panel in panels]
    if skip:
        top = panels[-1].top + 6
        turn = f"rotate(-90 {coordinate(px - 3)} {coordinate(top)})"
        parts.append(text(px - 3, top, marker.label, text_anchor="end", fill=color, transform=turn))
    return element("g", {"class": f"marker {marker.kind}"}, "".join(parts))
