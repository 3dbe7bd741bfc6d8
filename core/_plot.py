"""The gradient-flow picture, drawn with matplotlib (the ``hookgrad[plot]`` extra).

:func:`draw` turns a :class:`~hookgrad._report.Flow` into a :class:`Picture`, a
``matplotlib.figure.Figure`` with two panels on one step axis: the gradient norm of each layer
(grad_stats, before clipping), and the total norm before and after clipping (grad_clip) with
the loss scale (grad_scale) on a right axis. A vertical line across both panels marks each
skipped or rolled-back step (red, labelled) and each scale backoff (dashed). :func:`render`
saves it as SVG or PNG bytes.

Any number is drawn: the log axes clamp zeros (and anything below their lowest decade) onto
the axis, whose lowest tick then reads ``≤``, and a NaN or infinite value is a triangle at the
top of its panel. Artists that carry data have a ``gid`` (``module-norm-0``, ``clip-pre``,
``clip-post``, ``clipped``, ``loss-scale``, ``skip_step-0``, ``backoff-0``, ``nonfinite-0``,
``note-layers``, ``note-steps``); in the SVG each is a ``<g id=...>`` whose ``<title>`` (a
tooltip) says what it shows, e.g. ``step 35: rollback: spike``. Text from a log is drawn as
it is: no ``$...$`` in a module name turns into matplotlib's math.

matplotlib is imported only here, and only when a picture is drawn: ``import hookgrad`` and
the rest of the command never need it. The figure is a plain ``Figure``, never pyplot: no
window, no backend to choose, no global list of figures. What matplotlib keeps only as global
settings (SVG ids from a fixed hash salt and no date, so the same data give the same bytes;
SVG text as text) is set while a figure is saved, under a lock.
"""

from __future__ import annotations

import io
import math
import re
import threading
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias
from xml.sax.saxutils import escape

from ._report import Flow, Marker, Point

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

__all__ = ["FORMATS", "INSTALL", "Picture", "PlotUnavailable", "draw", "picture_format", "render"]

INSTALL: Final = "pip install 'hookgrad[plot]'"
FORMATS: Final = {".svg": "svg", ".png": "png"}
"""The picture's format by the file's suffix."""

# Colours of matplotlib's cycle ("C0" is its first): distinct hues that stay apart on white.
LINE_COLORS: Final = 10
SKIP_COLOR: Final = "C3"
BACKOFF_COLOR: Final = "C1"
SCALE_COLOR: Final = "C4"
POST_CLIP_COLOR: Final = "C0"
PRE_CLIP_COLOR: Final = "#555555"
NONFINITE_COLOR: Final = "#444444"

# Layout in inches at DPI dots per inch: the right margin holds the right axis and the legends.
DPI: Final = 100
WIDTH: Final = 10.0
LEFT: Final = 0.8
RIGHT: Final = 2.5
TOP: Final = 0.4
PANEL_HEIGHT: Final = 2.5
PANEL_GAP: Final = 0.7
BOTTOM: Final = 0.55
LEGEND_ROW: Final = 0.2
LEGEND_GAP: Final = 0.2
"""From the panel's right edge to its legend; past the right axis's labels where it has one."""
RIGHT_AXIS_LABELS: Final = 0.45
LAYERS_PANEL: Final = ("Gradient norm per layer (grad_stats, before clipping)", "gradient norm")
STEP_PANEL: Final = ("Clipping and loss scaling (grad_clip, grad_scale)", "total gradient norm")
NONFINITE_LABEL: Final = "NaN or inf (at the top)"

SMALLEST_DECADE: Final = -323
"""10.0 ** -323 is the smallest power of ten a float holds (a subnormal)."""
LARGEST_DECADE: Final = 308
"""10.0 ** 308 is the largest power of ten a float holds."""
MAX_TICKS: Final = 6
MAX_LISTED: Final = 20
"""Non-finite values a tooltip lists by step."""

Style: TypeAlias = dict[str, Any]
"""Keyword arguments of a matplotlib line."""

_SAVING = threading.Lock()
"""matplotlib's rc settings are global: one save at a time sets and restores them."""


class PlotUnavailable(ImportError):
    """matplotlib cannot be imported: the picture needs the ``hookgrad[plot]`` extra."""


def picture_format(path: Path) -> str:
    """``"svg"`` or ``"png"`` by the suffix of ``path``; ValueError naming any other suffix."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        shown = repr(suffix) if suffix else "no suffix"
        raise ValueError(f"{path}: the picture is .svg or .png, not {shown}")
    return FORMATS[suffix]


@dataclass
class Picture:
    """The figure, and the tooltip of each artist that carries data, by its gid."""

    figure: Figure
    titles: dict[str, str] = field(default_factory=dict)
    _counts: Counter[str] = field(default_factory=Counter)

    def name(self, artist: Artist, gid: str, title: str) -> None:
        """Give ``artist`` an id in the SVG and a tooltip."""
        artist.set_gid(gid)
        self.titles[gid] = title

    def number(self, artist: Artist, kind: str, title: str) -> None:
        """Name ``artist`` ``KIND-N``, N counting the artists of that kind from 0."""
        self.name(artist, f"{kind}-{self._counts[kind]}", title)
        self._counts[kind] += 1

    def artist(self, gid: str) -> Artist:
        """The artist named ``gid``: what a test or a script reads the drawn data from."""
        (found,) = self.figure.findobj(lambda a: a.get_gid() == gid)
        return found


def render(flow: Flow, fmt: str) -> bytes:
    """The picture of ``flow`` as ``fmt`` ("svg" or "png") bytes; the same data, the same bytes."""
    picture = draw(flow)
    import matplotlib

    buffer = io.BytesIO()
    # No date in the file, and SVG ids hashed from a fixed salt instead of a random one.
    metadata = {"Date": None} if fmt == "svg" else {}
    saving = matplotlib.rc_context(
        {"svg.hashsalt": "hookgrad", "svg.fonttype": "none", "savefig.bbox": "standard"}
    )
    with _SAVING, saving, warnings.catch_warnings():
        # A name in a script the font lacks is drawn as boxes (in the PNG), not warned about.
        warnings.filterwarnings("ignore", "Glyph .* missing from font", UserWarning)
        picture.figure.savefig(buffer, format=fmt, dpi=DPI, metadata=metadata)
    data = buffer.getvalue()
    return _with_titles(data, picture.titles) if fmt == "svg" else data


def _with_titles(svg: bytes, titles: dict[str, str]) -> bytes:
    """Each ``<g id=GID>`` of a titled artist gets its ``<title>``, the tooltip.

    matplotlib writes an artist's gid, but has no way to write a title.
    """

    def titled(group: re.Match[bytes]) -> bytes:
        title = titles.get(group[1].decode())
        return group[0] if title is None else group[0] + f"<title>{escape(title)}</title>".encode()

    return re.sub(rb'<g id="([^"]*)">', titled, svg)


# --------------------------------------------------------------------------------------------
# The figure
# --------------------------------------------------------------------------------------------


def draw(flow: Flow) -> Picture:
    """The two panels of ``flow`` on one step axis, with the step markers across both."""
    try:
        import matplotlib  # noqa: F401  (the package first: a blocked one fails here)
        from matplotlib.figure import Figure
    except ImportError as error:
        raise PlotUnavailable(f"the gradient-flow picture needs matplotlib: {INSTALL}") from error
    rows = len(flow.modules) + _has_nonfinite(*flow.modules.values())
    layers_height = max(PANEL_HEIGHT, rows * LEGEND_ROW + 0.2)  # a long legend makes it taller
    height = TOP + layers_height + PANEL_GAP + PANEL_HEIGHT + BOTTOM
    picture = Picture(Figure(figsize=(WIDTH, height), dpi=DPI))
    left, width = LEFT / WIDTH, (WIDTH - LEFT - RIGHT) / WIDTH
    layers_bottom = (BOTTOM + PANEL_HEIGHT + PANEL_GAP) / height
    layers = picture.figure.add_axes((left, layers_bottom, width, layers_height / height))
    steps = picture.figure.add_axes(
        (left, BOTTOM / height, width, PANEL_HEIGHT / height), sharex=layers
    )
    _step_axis(layers, steps, flow.steps())
    _layers(picture, flow, layers)
    _clipping_and_scaling(picture, flow, steps)
    for marker in flow.markers:
        _marker(picture, (layers, steps), marker)
    return picture


def _step_axis(layers: Axes, steps: Axes, values: list[float]) -> None:
    """The shared x axis: every step of the flow, whole-number ticks, a label below."""
    from matplotlib.ticker import MaxNLocator

    lo, hi = (float(min(values)), float(max(values))) if values else (1.0, 1.0)
    pad = (hi - lo) * 0.02 if hi > lo else max(1.0, abs(lo) * 1e-6)  # what a float tells apart
    steps.set_xlim(lo - pad, hi + pad)
    steps.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    steps.set_xlabel("step")
    layers.tick_params(labelbottom=False)


def _panel(axes: Axes, title: tuple[str, str], values: list[float]) -> tuple[float, float]:
    """Title, y label and a log y axis over the decades of ``values``: its (floor, top).

    When a value lies below the floor (a zero, say), the floor's tick reads ``≤``.
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    axes.set_title(title[0], loc="left", fontsize=10, fontweight="bold")
    axes.set_ylabel(title[1])
    axes.grid(True, axis="y", color="#e5e5e5")
    axes.set_axisbelow(True)
    low, high = _decades(values)
    floor, top = 10.0**low, 10.0**high
    clamps = any(math.isfinite(v) and v < floor for v in values)
    axes.set_yscale("log")
    axes.set_ylim(floor, top)
    stride = max(1, math.ceil((high - low + 1) / MAX_TICKS))
    axes.yaxis.set_major_locator(FixedLocator([10.0**e for e in range(low, high + 1, stride)]))
    axes.yaxis.set_major_formatter(
        FuncFormatter(lambda v, _: f"≤{v:g}" if clamps and v == floor else f"{v:g}")
    )
    axes.yaxis.set_minor_formatter(NullFormatter())
    return floor, top


def _decades(values: list[float]) -> tuple[int, int]:
    """The whole decades around the finite positive ``values``; (0, 1) if there is none."""
    data = [v for v in values if math.isfinite(v) and v > 0]
    if not data:
        return 0, 1
    low = max(math.floor(math.log10(min(data))), SMALLEST_DECADE)
    high = max(min(math.ceil(math.log10(max(data))), LARGEST_DECADE), low + 1)
    return (LARGEST_DECADE - 1, LARGEST_DECADE) if high > LARGEST_DECADE else (low, high)


def _series(
    picture: Picture,
    axes: Axes,
    points: Sequence[Point],
    bounds: tuple[float, float],
    named: tuple[str, str],
    color: str,
) -> None:
    """A line through the finite points, clamped into ``bounds``, and a triangle at the top of
    the panel for each other one. ``named``: the line's gid and what the series is."""
    finite = [(step, value) for step, value in points if math.isfinite(value)]
    clamped = [_clamp(value, bounds) for _, value in finite]
    line = _line(axes, [step for step, _ in finite], clamped, color=color)
    picture.name(line, *named)
    _nonfinite_marks(picture, axes, points, named[1], color)


def _clamp(value: float, bounds: tuple[float, float]) -> float:
    """``value`` (finite) moved into the axis's [floor, top]: a zero sits on the floor."""
    return min(max(value, bounds[0]), bounds[1])


def _line(axes: Axes, steps: list[float], values: list[float], **style: Any) -> Line2D:
    """A line through the points; a single point, which draws no line, is a dot."""
    single: Style = {"marker": "o", "markersize": 3} if len(steps) == 1 else {}
    (line,) = axes.plot(steps, values, **style, **single)
    return line


def _nonfinite_marks(
    picture: Picture, axes: Axes, points: Sequence[Point], what: str, color: str
) -> None:
    """A small upward triangle at the top edge for each value that has no place on the axis;
    one artist per series (thousands of NaN steps draw fast), its tooltip listing them."""
    marks = [(step, value) for step, value in points if not math.isfinite(value)]
    if not marks:
        return
    top = axes.get_xaxis_transform()  # x in steps, y from 0 (bottom) to 1 (top)
    steps = [step for step, _ in marks]
    (triangles,) = axes.plot(
        steps, [0.95] * len(steps), "^", color=color, markersize=6, transform=top
    )
    listed = ", ".join(f"{value} at step {step}" for step, value in marks[:MAX_LISTED])
    more = f" and {len(marks) - MAX_LISTED} more" if len(marks) > MAX_LISTED else ""
    picture.number(triangles, "nonfinite", f"{what}: {listed}{more}")


def _has_nonfinite(*series: Iterable[Point]) -> bool:
    return any(not math.isfinite(value) for points in series for _, value in points)


def _note(picture: Picture, axes: Axes, gid: str, message: str) -> None:
    """A grey line of text in the middle: why the panel is empty."""
    text = axes.text(0.5, 0.5, message, transform=axes.transAxes, ha="center", color="#777")
    picture.name(text, gid, message)


NONFINITE_STYLE: Final[Style] = {"color": NONFINITE_COLOR, "marker": "^", "linestyle": "none"}


def _legend(axes: Axes, entries: Sequence[tuple[str, Style]], gap: float = LEGEND_GAP) -> None:
    """(label, line style) rows, ``gap`` inches right of the panel; labels as they are (no math
    from a ``$`` in a module name)."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], label=label, **style) for label, style in entries]
    x = 1 + gap / (WIDTH - LEFT - RIGHT)
    legend = axes.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(x, 1.0),
        borderaxespad=0,
        fontsize=9,
        frameon=False,
    )
    for text in legend.get_texts():
        text.set_parse_math(False)


def _shorten(name: str, limit: int = 22) -> str:
    """A long qualified name keeps its end, the part that tells layers apart."""
    return name if len(name) <= limit else "\u2026" + name[-(limit - 1) :]


def _layers(picture: Picture, flow: Flow, axes: Axes) -> None:
    """Panel 1: one line per module with grad_stats pre-clip norms, log y axis, legend."""
    norms = [value for points in flow.modules.values() for _, value in points]
    bounds = _panel(axes, LAYERS_PANEL, norms)
    if not flow.modules:
        _note(picture, axes, "note-layers", "no grad_stats module_grad records in this log")
        return
    entries: list[tuple[str, Style]] = []
    for index, (name, points) in enumerate(flow.modules.items()):
        color = f"C{index % LINE_COLORS}"
        named = f"module-norm-{index}", f"the gradient norm of module '{name}'"
        _series(picture, axes, points, bounds, named, color)
        entries.append((_shorten(name or "(root)"), {"color": color}))
    if _has_nonfinite(*flow.modules.values()):
        entries.append((NONFINITE_LABEL, NONFINITE_STYLE))
    _legend(axes, entries)


def _clipping_and_scaling(picture: Picture, flow: Flow, axes: Axes) -> None:
    """Panel 2: total norm before and after clipping (left, log), loss scale (right, log2)."""
    bounds = _panel(axes, STEP_PANEL, [v for _, v in (*flow.pre_clip, *flow.post_clip)])
    entries: list[tuple[str, Style]] = []
    if flow.pre_clip or flow.post_clip:
        before = ("clip-pre", "the norm before clipping")
        _series(picture, axes, flow.pre_clip, bounds, before, PRE_CLIP_COLOR)
        after = ("clip-post", "the norm after clipping")
        _series(picture, axes, flow.post_clip, bounds, after, POST_CLIP_COLOR)
        steps = [step for step, _ in flow.clipped]
        norms = [_clamp(norm, bounds) for _, norm in flow.clipped]
        dots = axes.scatter(steps, norms, s=8, color=SKIP_COLOR, zorder=3)
        picture.name(dots, "clipped", f"clipped at {len(steps)} steps")
        entries += [
            ("norm before clipping", {"color": PRE_CLIP_COLOR}),
            ("after clipping", {"color": POST_CLIP_COLOR}),
            ("clipped", {"color": SKIP_COLOR, "marker": "o", "linestyle": "none"}),
        ]
    if flow.log2_scale:
        _scale_line(picture, axes, flow.log2_scale)
        entries.append(("loss scale (right axis)", {"color": SCALE_COLOR}))
    if not entries:
        _note(picture, axes, "note-steps", "no grad_clip or grad_scale records in this log")
        return
    entries += [
        ("skipped step", {"color": SKIP_COLOR}),
        ("scale backoff", {"color": BACKOFF_COLOR, "linestyle": "--"}),
    ]
    if _has_nonfinite(flow.pre_clip, flow.post_clip, flow.log2_scale):
        entries.append((NONFINITE_LABEL, NONFINITE_STYLE))
    _legend(axes, entries, LEGEND_GAP + (RIGHT_AXIS_LABELS if flow.log2_scale else 0))


def _scale_line(picture: Picture, axes: Axes, log2_scale: list[Point]) -> None:
    """The loss scale as a staircase against a right axis in powers of two.

    A scale of 0 (log2 -inf), inf or NaN is a triangle at the top, not a step of the stairs.
    """
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    right = axes.twinx()
    finite = [(step, value) for step, value in log2_scale if math.isfinite(value)]
    values = [value for _, value in finite]
    if values:
        right.set_ylim(math.floor(min(values)) - 0.5, math.ceil(max(values)) + 0.5)
    steps = [step for step, _ in finite]
    line = _line(right, steps, values, color=SCALE_COLOR, drawstyle="steps-post")
    picture.name(line, "loss-scale", "the loss scale (right axis: its log2)")
    right.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    right.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"$2^{{{v:g}}}$"))
    right.tick_params(axis="y", colors=SCALE_COLOR)
    marks = [(step, 2.0**value) for step, value in log2_scale if not math.isfinite(value)]
    _nonfinite_marks(picture, right, marks, "the loss scale", SCALE_COLOR)


def _marker(picture: Picture, panels: Sequence[Axes], marker: Marker) -> None:
    """A vertical line through every panel (one artist); a skipped step is red and labelled."""
    from matplotlib.collections import LineCollection
    from matplotlib.transforms import blended_transform_factory

    step, label, skip = marker.step, marker.label, marker.kind == "skip_step"
    spans = [(panel.get_position().y0, panel.get_position().y1) for panel in panels]
    where = blended_transform_factory(panels[-1].transData, picture.figure.transFigure)
    lines = LineCollection(
        [[(step, y0), (step, y1)] for y0, y1 in spans],
        colors=SKIP_COLOR if skip else BACKOFF_COLOR,
        linestyles="solid" if skip else "--",
        linewidths=1.0,
        transform=where,
    )
    picture.number(lines, marker.kind, f"step {step}: {label}")
    picture.figure.add_artist(lines)
    if skip:
        panels[-1].text(
            step,
            0.97,
            f"{label} ",
            transform=panels[-1].get_xaxis_transform(),
            rotation=90,
            ha="right",
            va="top",
            color=SKIP_COLOR,
            fontsize=8,
            parse_math=False,
        )
