"""TensorBoard event files from the plugins' records: the ``[events] tensorboard`` sink.

The sink reads the records every other sink gets, so TensorBoard shows exactly the numbers of
the JSON-lines log, on the runtime's step axis (a record's ``step``):

* ``grad_norm/<module>``: grad_stats ``module_grad`` norms before clipping;
* ``grad_norm/total/pre_clip`` and ``grad_norm/total/post_clip``: grad_clip's total norms (a
  norm the record holds as null because it was not finite is written as NaN);
* ``loss_scale``: grad_scale's scale;
* ``spike/<signal>/z``: the z-score of each spike_guard decision (none for a value that is not
  finite, or a spike over a zero spread);
* ``skipped_steps``: the number of ``skip_step`` records so far (any plugin), at each skip;
* histograms ``grad/<parameter>``: grad_stats' ``param_grad`` histograms before clipping
  (``histogram_bins`` > 0), on steps that are multiples of ``histogram_every``.

tensorboardX's synchronous ``EventsWriter`` writes the files (its ``SummaryWriter`` queues
events for a background thread): what a step recorded reaches the file at the runtime's flush
at the step end, as the JSON-lines log's records do, and a crash loses no flushed step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["Histogram", "Scalar", "TensorBoardSink", "TensorBoardTags"]


class Scalar(NamedTuple):
    tag: str
    value: float
    step: int


class Histogram(NamedTuple):
    """Bin ``counts`` between consecutive ``edges`` (one more edge than counts)."""

    tag: str
    counts: list[int]
    edges: list[float]
    step: int


class TensorBoardTags:
    """What a stream of records shows in TensorBoard (the module docstring's tags).

    Stateful only for ``skipped_steps``, the running count of skips.
    """

    def __init__(self, histogram_every: int = 100) -> None:
        self.histogram_every = histogram_every
        self.skipped = 0

    def of(self, record: Mapping[str, Any]) -> list[Scalar | Histogram]:
        """The tags ``record`` writes; none for a record TensorBoard does not show."""
        plugin, kind, step, data = (
            record.get("plugin"),
            record.get("kind"),
            record.get("step"),
            record.get("data"),
        )
        if not isinstance(step, int) or not isinstance(data, Mapping):
            return []  # a log entry, or a record without a step
        tags: list[Scalar | Histogram] = []
        if kind == "skip_step":
            self.skipped += 1
            tags.append(Scalar("skipped_steps", float(self.skipped), step))
        if plugin == "grad_stats" and data.get("stage") == "pre_clip":
            tags.extend(self._grad_stats(kind, record.get("module_name"), data, step))
        elif plugin == "grad_clip" and kind == "clip" and record.get("module_name") is None:
            for stage, key in (("pre_clip", "pre_norm"), ("post_clip", "post_norm")):
                norm = _number(data.get(key))
                if norm is None and data.get("nonfinite"):
                    norm = math.nan
                if norm is not None:
                    tags.append(Scalar(f"grad_norm/total/{stage}", norm, step))
        elif plugin == "grad_scale" and kind == "scale":
            scale = _number(data.get("scale"))
            if scale is not None:
                tags.append(Scalar("loss_scale", scale, step))
        elif plugin == "spike_guard":
            z = _number(data.get("z"))
            if z is not None and isinstance(data.get("signal"), str):
                tags.append(Scalar(f"spike/{data['signal']}/z", z, step))
        return tags

    def _grad_stats(
        self, kind: Any, module: Any, data: Mapping[str, Any], step: int
    ) -> Iterable[Scalar | Histogram]:
        if kind == "module_grad":
            norm = _number(data.get("norm"))
            if norm is not None and isinstance(module, str):
                yield Scalar(f"grad_norm/{module}", norm, step)
        elif kind == "param_grad" and step % self.histogram_every == 0:
            histogram = data.get("histogram")
            if isinstance(histogram, Mapping) and isinstance(data.get("param"), str):
                counts, edges = histogram.get("counts"), histogram.get("edges")
                if isinstance(counts, list) and isinstance(edges, list) and counts:
                    yield Histogram(f"grad/{data['param']}", counts, edges, step)


def _number(value: Any) -> float | None:
    """A record's number as a float; None for null or anything that is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class TensorBoardSink:
    """An event sink writing :class:`TensorBoardTags` of every record into ``logdir``."""

    def __init__(self, logdir: str | Path, histogram_every: int = 100) -> None:
        from tensorboardX.event_file_writer import EventsWriter  # the optional extra

        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        self._writer = EventsWriter(str(self.logdir / "events"))
        self._tags = TensorBoardTags(histogram_every)
        self._closed = False

    def write(self, record: Mapping[str, Any]) -> None:
        for item in self._tags.of(record):
            self._writer.write_event(_event(item))

    def flush(self) -> None:
        if not self._closed:
            self._writer.flush()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.close()

    def __repr__(self) -> str:
        return f"TensorBoardSink({str(self.logdir)!r})"


def _event(item: Scalar | Histogram) -> Any:
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.summary import histogram_raw, scalar

    if isinstance(item, Scalar):
        summary = scalar(item.tag, item.value)
    else:
        summary = histogram_raw(item.tag, *_histogram_fields(item.counts, item.edges))
    return Event(summary=summary, step=item.step, wall_time=time.time())


def _histogram_fields(counts: list[int], edges: list[float]) -> tuple[Any, ...]:
    """histogram_raw's ``min, max, num, sum, sum_squares, bucket_limits, bucket_counts``;
    the sums are taken at the bins' centres (the records keep counts, not values)."""
    centres = [(lo + hi) / 2 for lo, hi in pairwise(edges)]
    total = math.fsum(c * x for c, x in zip(counts, centres))
    squares = math.fsum(c * x * x for c, x in zip(counts, centres))
    return edges[0], edges[-1], sum(counts), total, squares, edges[1:], counts
