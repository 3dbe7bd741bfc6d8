"""The plugin records ``hookgrad report`` and the demo's picture read, checked on the way in.

A log can come from anywhere: an older hookgrad, a third-party plugin, a hand edit, a file
that is no log at all. The records the picture and the sentences read (see :data:`READS`)
are checked against what they must hold, so a wrong one is one error naming the record, the
key and the value (and, read from a file, the file and line), never a crash further on. Every
other record is left out: log entries, event summaries, other plugins' reports.

Strings from a record pass through :func:`~hookgrad._visible.visible` as they are checked,
so no terminal escape or control character from a log reaches the screen or the SVG.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Final, NamedTuple, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ._visible import visible
from .runtime._records import LogFormatError, read_events

__all__ = [
    "FIRST_STEP",
    "READS",
    "Health",
    "Clip",
    "Entry",
    "Log",
    "LossScale",
    "ModuleGrad",
    "NonFinite",
    "RecordError",
    "ScaleChange",
    "SkipStep",
    "Spike",
    "Zeroed",
    "plugin_entries",
    "read_entries",
]

FIRST_STEP: Final = 1
"""What the first step (record ``step`` 0) is called in pictures and messages."""

LAST_STEP: Final = 2**63 - 1
"""The largest step a record may carry: a 64-bit counter (and a float drawing can place)."""

_M = TypeVar("_M", bound=BaseModel)

Text = Annotated[str, AfterValidator(visible)]
"""A string from a record, with its non-printable characters escaped."""


class RecordError(ValueError):
    """A record the report reads holds a value of the wrong type, or misses a key."""


class _Data(BaseModel):
    """The ``data`` keys a record's reader uses; others are ignored. Nothing is coerced."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class ModuleGrad(_Data):
    """grad_stats ``module_grad``: one layer's gradient norm at a stage of a sampled step."""

    stage: Text
    norm: float
    max_abs: float | None = None
    nonfinite: Annotated[int, Field(ge=0)] = 0
    skipped: bool = False
    update_ratio: float | None = None


class Clip(_Data):
    """grad_clip ``clip``: the norms before and after; a non-finite norm is null."""

    pre_norm: float | None = None
    post_norm: float | None = None
    clipped: bool = False
    nonfinite: bool = False


class LossScale(_Data):
    """grad_scale ``scale``: the loss scale of a step (none in constant mode)."""

    scale: float | None = None


class ScaleChange(_Data):
    """grad_scale ``growth`` or ``backoff``: counted, and a backoff is marked."""


class NonFinite(_Data):
    """nan_guard ``nonfinite``: a tensor with NaN or Inf, and the module's role."""

    phase: Text | None = None
    tensor: Text | None = None
    role: Text | None = None


class Zeroed(_Data):
    """nan_guard ``zeroed``: how many gradient entries were set to 0."""

    count: Annotated[int, Field(ge=0)] | None = None


class SkipStep(_Data):
    """Any plugin's ``skip_step``: why, and (nan_guard) which module and tensor."""

    reason: Text | None = None
    module: Text | None = None
    tensor: Text | None = None


class Spike(SkipStep):
    """spike_guard ``skip_step``, ``spike_clipped`` or ``rolled_back``: the spiked signal,
    its value, z-score (null: not finite) and the statistics it was judged by."""

    signal: Text
    value: float | None = None
    z: float | None = None
    mean: float | None = None
    std: float | None = None
    scale: float | None = None
    """``spike_clipped``: the factor the gradients were multiplied by."""
    snapshot_step: Annotated[int, Field(ge=0)] | None = None
    """``rolled_back``: the step (a record step, from 0) after which the snapshot was taken."""


class _DeadUnits(_Data):
    module: Text
    param: Text
    fraction: Annotated[float, Field(ge=0, le=1)]


class Health(_Data):
    """param_health ``health_report``: the parameters found unhealthy, by kind."""

    unused: list[Text] = Field(default_factory=list)
    dead: list[_DeadUnits] = Field(default_factory=list)
    frozen: list[Text] = Field(default_factory=list)
    exploding: list[Text] = Field(default_factory=list)


READS: Final[Mapping[tuple[str, str], type[_Data]]] = {
    ("grad_stats", "module_grad"): ModuleGrad,
    ("grad_clip", "clip"): Clip,
    ("grad_scale", "scale"): LossScale,
    ("grad_scale", "growth"): ScaleChange,
    ("grad_scale", "backoff"): ScaleChange,
    ("nan_guard", "nonfinite"): NonFinite,
    ("nan_guard", "zeroed"): Zeroed,
    ("spike_guard", "skip_step"): Spike,
    ("spike_guard", "spike_clipped"): Spike,
    ("spike_guard", "rolled_back"): Spike,
    ("param_health", "health_report"): Health,
}
"""The (plugin, kind) records read, with the model of their ``data``; and every ``skip_step``."""


class _Envelope(BaseModel):
    """The PluginRecord fields of a record that is read."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    plugin: Text
    kind: Text
    step: Annotated[int, Field(ge=0, le=LAST_STEP)]
    module_name: Text | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    rank: Annotated[int, Field(ge=0)] = 0  # absent from logs older than the field


class Entry(NamedTuple):
    """A plugin record, checked: what the picture and the sentences read."""

    plugin: str
    kind: str
    step: int
    """As shown: the record's ``step`` plus FIRST_STEP."""
    module: str | None
    data: _Data
    rank: int = 0
    """The rank of the process that wrote it (0 outside a distributed run)."""

    def record(self) -> dict[str, Any]:
        """Back in the JSON form (PluginRecord dict), for readers of records."""
        return {
            "plugin": self.plugin,
            "kind": self.kind,
            "step": self.step - FIRST_STEP,
            "module_name": self.module,
            "data": self.data.model_dump(),
            "rank": self.rank,
        }


def _model(record: Mapping[str, Any]) -> type[_Data] | None:
    """The model of the ``data`` of ``record`` if the report reads it, else None."""
    plugin, kind = record.get("plugin"), record.get("kind")
    if not (isinstance(plugin, str) and isinstance(kind, str)):
        return None
    model = READS.get((plugin, kind))
    return SkipStep if model is None and kind == "skip_step" else model


def _checked(record: Mapping[str, Any]) -> Entry | None:
    """``record`` as an Entry if the report reads it, None if not; RecordError if it is wrong."""
    model = _model(record)
    if model is None:
        return None
    what = f"{visible(record['plugin'])} {visible(record['kind'])} record"
    envelope = _validated(_Envelope, record, what, "")
    data = _validated(model, envelope.data, what, "data.")
    step = envelope.step + FIRST_STEP
    return Entry(envelope.plugin, envelope.kind, step, envelope.module_name, data, envelope.rank)


def _validated(model: type[_M], value: object, what: str, prefix: str) -> _M:
    """``value`` checked by ``model``; RecordError naming ``what`` and the first bad key."""
    try:
        return model.model_validate(value)
    except ValidationError as error:
        raise RecordError(f"{what}: {_first_problem(error, prefix)}") from None


def _first_problem(error: ValidationError, prefix: str) -> str:
    """``data.norm: Input should be a valid number, got 'abc'`` from pydantic's first error."""
    problem = error.errors(include_url=False)[0]
    key = prefix + ".".join(str(part) for part in problem["loc"])
    given = "" if problem["type"] == "missing" else f", got {_short(problem['input'])}"
    return f"{key}: {problem['msg']}{given}"


def _short(value: object, limit: int = 60) -> str:
    """A repr (printable: repr escapes control characters) cut to ``limit`` characters."""
    text = visible(repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def plugin_entries(records: Iterable[Mapping[str, Any]]) -> list[Entry]:
    """The records the report reads among ``records``, checked, in order.

    Raises RecordError for a record it reads that holds a wrong value.
    """
    return [entry for record in records if (entry := _checked(record)) is not None]


class Log(NamedTuple):
    """An event log as the report reads it."""

    entries: list[Entry]
    records: int
    """How many records (JSON objects) the file held, read or not."""


def read_entries(path: str | os.PathLike[str], warn: Callable[[str], None]) -> Log:
    """The entries of the JSON-lines log at ``path`` (see :func:`hookgrad.runtime.read_events`).

    A cut last line is skipped with ``warn(message)``. Raises LogFormatError naming the file
    and line for an unreadable line elsewhere or a wrong record, OSError if unreadable.
    """
    entries: list[Entry] = []
    count = 0
    for number, record in read_events(path, warn):
        count += 1
        try:
            entry = _checked(record)
        except RecordError as error:
            raise LogFormatError(Path(path), number, str(error)) from None
        if entry is not None:
            entries.append(entry)
    return Log(entries, count)
