"""What the gradient-flow picture and the run summary of ``hookgrad demo`` and ``report`` show.

Everything here works on checked plugin records (:mod:`hookgrad._report_records`), from a
run's memory or read back from its JSON-lines log, so a saved log redraws exactly what the run
drew: :func:`gradient_flow` pulls the series out (:mod:`hookgrad._plot` draws them) and
:func:`findings` puts the guards' and the scaler's decisions into sentences.

Steps are shown as people count them, from 1 (the k-th optimizer step, as the demo's progress
bar and ``loss.csv`` count); records carry the runtime's counter, which starts at 0, so a
record's ``step`` is shown plus :data:`FIRST_STEP`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

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

__all__ = ["Flow", "Marker", "Point", "findings", "gradient_flow"]

Point: TypeAlias = tuple[float, float]
"""(step as shown, value)."""


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
