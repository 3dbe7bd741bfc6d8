"""Hand-built SVG: escaped elements, scales that map data onto pixels, and their ticks.

No plotting dependency, and deterministic: numbers are written with fixed precision, so the
same data give the same bytes. Every string passes :func:`~hookgrad._visible.visible` and XML
escaping, so text from a log (module names, reasons) cannot make the file invalid.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Final, TypeAlias
from xml.sax.saxutils import escape, quoteattr

from ._visible import visible

__all__ = [
    "Point",
    "Scale",
    "coordinate",
    "element",
    "line",
    "log_ticks",
    "nice_ticks",
    "polyline",
    "staircase",
    "start_tag",
    "text",
    "title",
]

Point: TypeAlias = tuple[float, float]

SMALLEST_DECADE: Final = -323
"""10.0 ** -323 is the smallest power of ten a float holds (a subnormal)."""
LARGEST_DECADE: Final = 308
"""10.0 ** 308 is the largest power of ten a float holds."""


# --------------------------------------------------------------------------------------------
# Ticks and scales
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


def _decade(value: float, rounding: int) -> int:
    """The exponent of the power of ten at or below (``rounding`` -1) or above (+1) ``value``."""
    exponent = math.log10(value)
    whole = math.floor(exponent) if rounding < 0 else math.ceil(exponent)
    return min(max(whole, SMALLEST_DECADE), LARGEST_DECADE)


@dataclass(frozen=True)
class Scale:
    """Maps data in [lo, hi] onto pixels [start, end]; a ``log`` scale maps log10 linearly.

    A log scale clamps: a value at or below ``lo`` (zero and negatives included) is drawn at
    ``lo``, one above ``hi`` at ``hi``. ``clamps`` says that some value was below ``lo``, and
    the lowest tick then reads ``≤lo``.
    """

    lo: float
    hi: float
    start: float
    end: float
    log: bool = False
    clamps: bool = False

    @classmethod
    def linear(cls, values: Iterable[float], start: float, end: float) -> Scale:
        """Exactly the range of ``values`` ([0, 1] if none; a single value gets a margin)."""
        data = list(values)
        lo, hi = (min(data), max(data)) if data else (0.0, 1.0)
        if hi > lo:
            return cls(lo, hi, start, end)
        margin = max(1.0, abs(lo) * 1e-6)  # 1, or what a float this large can tell apart
        return cls(lo - margin, hi + margin, start, end)

    @classmethod
    def decades(cls, values: Iterable[float], start: float, end: float) -> Scale:
        """A log scale over the whole decades around the finite positive ``values``.

        [1, 10] if there is none. Zeros and negatives among ``values`` set ``clamps``;
        non-finite ones are left to the caller (drawn as marks, not on the axis).
        """
        finite = [v for v in values if math.isfinite(v)]
        data = [v for v in finite if v > 0]
        low = _decade(min(data), -1) if data else 0
        high = max(_decade(max(data), +1), low + 1) if data else 1
        if high > LARGEST_DECADE:
            low, high = LARGEST_DECADE - 1, LARGEST_DECADE
        lo = 10.0**low
        clamps = any(v < lo for v in finite)
        return cls(lo, 10.0**high, start, end, log=True, clamps=clamps)

    def __call__(self, value: float) -> float:
        """The pixel of ``value`` (finite); a log scale clamps it into [lo, hi] first."""
        if self.log:
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            at = math.log10(min(max(value, self.lo), self.hi))
        else:
            lo, hi, at = self.lo, self.hi, value
        return self.start + (at - lo) / (hi - lo) * (self.end - self.start)

    def ticks(self) -> list[float]:
        return log_ticks(self.lo, self.hi) if self.log else nice_ticks(self.lo, self.hi)

    def label(self, value: float) -> str:
        """A tick label: 0.001, 1, 1e+06; ``≤1e-05`` for the lowest tick of a clamping scale."""
        return f"≤{value:g}" if self.clamps and value == self.lo else f"{value:g}"


# --------------------------------------------------------------------------------------------
# Elements
# --------------------------------------------------------------------------------------------


def coordinate(value: float) -> str:
    """A coordinate with one decimal: stable output, small files."""
    return f"{value:.1f}"


def start_tag(tag: str, attrs: Mapping[str, object]) -> str:
    """``<tag a="1"`` without the closing bracket; attributes in the given order, escaped."""
    return f"<{tag}" + "".join(
        f" {key}={quoteattr(visible(str(value)))}" for key, value in attrs.items()
    )


def element(tag: str, attrs: Mapping[str, object], content: str = "") -> str:
    """``<tag a="1">content</tag>`` (content as is: markup), or ``<tag a="1"/>`` without."""
    return f"{start_tag(tag, attrs)}>{content}</{tag}>" if content else f"{start_tag(tag, attrs)}/>"


def text(x: float, y: float, content: str, **style: object) -> str:
    """A text element; ``style`` keywords use ``_`` for ``-`` (``text_anchor="end"``)."""
    attrs = {key.replace("_", "-"): value for key, value in style.items()}
    place = {"x": coordinate(x), "y": coordinate(y)}
    return element("text", {**place, **attrs}, escape(visible(content)))


def title(content: str) -> str:
    """A ``<title>``: the tooltip of the element it is the first child of."""
    return element("title", {}, escape(visible(content)))


def line(x1: float, y1: float, x2: float, y2: float, color: str, dash: str = "") -> str:
    ends = {"x1": x1, "y1": y1, "x2": x2, "y2": y2}
    attrs = {key: coordinate(value) for key, value in ends.items()} | {"stroke": color}
    return element("line", {**attrs, "stroke-dasharray": dash} if dash else attrs)


def polyline(
    points: Sequence[Point], x: Scale, y: Scale, color: str, attrs: Mapping[str, object]
) -> str:
    """The data points (finite) joined by straight lines; ``attrs`` first (class, data-*)."""
    path = " ".join(f"{coordinate(x(px))},{coordinate(y(py))}" for px, py in points)
    style = {"fill": "none", "stroke": color, "stroke-width": "1.5"}
    return element("polyline", {**attrs, "points": path, **style})


def staircase(points: Sequence[Point]) -> list[Point]:
    """A value held until the next point's step: what a setting changed at steps looks like."""
    held = list(points[:1])
    for (_, previous), (step, value) in pairwise(points):
        held.extend([(step, previous), (step, value)])
    return held
