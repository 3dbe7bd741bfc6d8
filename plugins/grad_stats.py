"""``grad_stats``: per-parameter and per-layer gradient statistics at the optimizer step.

Parameter gradients are read at the optimizer step, not from module hooks, so with the default
settings the plugin installs no module hook and module calls keep the engine's fast path. On
each sampled step (0, N, 2N, ...) it records the gradients twice:

* ``pre_clip`` in ``hookgrad_optimizer_step_pre`` at :attr:`Stage.STATS`: after unscaling and
  the non-finite guard, before clipping;
* ``post_clip`` in ``hookgrad_optimizer_step_post``: the gradients the step used, with the
  update ratio ``||W_after - W_before|| / ||W_before||`` of every parameter and layer.

Optionally (``grad_output = true``) it also summarises each module call's ``grad_output`` from
a full backward hook, which costs a hook on every module call. :func:`per_layer_table` turns
the records, live or read back from JSON lines, into the per-layer table printed at the end.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeAlias

import numpy as np
from pydantic import Field, JsonValue, ValidationInfo, field_validator

from hookgrad.hookspecs import (
    FullBackwardEvent,
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginConfig,
    Stage,
    hookimpl,
    stage,
)
from hookgrad.hookspecs._stats import _CANCELLATION, _FADED, NONFINITE_JSON, array_stats

if TYPE_CHECKING:
    from hookgrad import Runtime

__all__ = ["GradStats", "per_layer_table"]

NAME: Final = "grad_stats"
"""The entry-point name, stamped on every record as ``plugin``."""

_Data: TypeAlias = dict[str, JsonValue]
_Grads: TypeAlias = list[tuple[str, np.ndarray]]

# Small arrays are summarised in batches: one float64 copy of them all, then one numpy call
# per statistic, about 15 µs of fixed cost. Measured break-even points: a batch of 2 arrays
# for the statistics, of 4 to 8 for the update-ratio norms (a subtraction and two dot
# products per weight otherwise); past 8192 entries (statistics) or 2048 (norms) one array is
# cheaper on its own, in its dtype (BLAS dot, SIMD passes), than through the float64 copy.
_BATCH_LARGEST: Final = 4096
"""Largest gradient (entries) whose statistics are computed in a batch."""

_BATCH_FEWEST: Final = 3
"""Fewest gradients worth a batch; the arrays of a smaller one are summarised alone."""

_MOVE_LARGEST: Final = 1024
"""Largest weight whose update-ratio norms are computed in a batch."""

_MOVE_FEWEST: Final = 8
"""Fewest weights worth a batch of update-ratio norms."""

_BATCH_ENTRIES: Final = 1 << 16
"""Most entries in one batch: 1 MiB of float64 rows, which the batch's passes find in cache."""

_FADED_64: Final = _FADED[np.dtype(np.float64)]
"""Below this a float64 sum of squares may have lost digits to underflow (array_stats redoes it)."""

_REAL: Final = frozenset(np.dtype(code) for code in "?bhilqBHILQefd")
"""The dtypes a batch takes (native byte order): those float64 holds exactly, as array_stats
reads them (it casts float16 to float32, bool and integers to float64)."""


class GradStats:
    """Record gradient statistics per parameter and per layer, before and after clipping."""

    class Config(PluginConfig):
        every_n_steps: Annotated[int, Field(ge=1)] = 1
        """Record on steps 0, N, 2N, ... only; the other steps cost one modulo."""

        per_parameter: bool = True
        """Emit a param_grad record per parameter; module_grad records are always emitted."""

        update_ratio: bool = True
        """Add ||W_after - W_before|| / ||W_before|| to post_clip records (copies the weights)."""

        histogram_bins: Annotated[int, Field(ge=0, le=1024)] = 0
        """Bins of a histogram of each parameter's finite gradient entries; 0 turns it off.
        At most 1024: every param_grad record carries the counts and the bin edges."""

        grad_output: bool = False
        """Also summarise each module call's grad_output: a backward hook on every module call."""

        summary: bool = True
        """Print the per-layer table to stdout when the run ends."""

        keep_records: Annotated[int, Field(ge=0, le=100_000)] = 1000
        """How many of the latest records ``plugin.records`` holds: a long run's memory stays
        bounded (the sinks have every record; the table is kept as running totals)."""

        @field_validator("histogram_bins")
        @classmethod
        def _histograms_need_parameters(cls, value: int, info: ValidationInfo) -> int:
            # per_parameter is declared first, so it is validated (or failed) by now.
            if value and info.data.get("per_parameter") is False:
                raise ValueError(
                    f"histogram_bins = {value} needs per_parameter = true: "
                    "histograms are part of the param_grad records"
                )
            return value

    def __init__(self, config: Config) -> None:
        self.config = config
        self.records: deque[dict[str, Any]] = deque(maxlen=config.keep_records)
        """The latest ``keep_records`` records this plugin emitted, in order (the JSON form the
        sinks received)."""
        self._layers: dict[str, _Layer] = {}  # the per-layer table, as running totals
        self._runtime: Runtime | None = None
        self._before: dict[str, np.ndarray] = {}  # weights at step_pre of a sampled step
        # name -> (gradient tensor, its version, its pre-clip summary) of a sampled step
        self._pre_clip: dict[str, tuple[Any, int, dict[str, Any]]] = {}
        if not config.grad_output:
            # No implementation, no global backward hook: module calls keep their fast path.
            self.hookgrad_full_backward = None  # type: ignore[method-assign,assignment]

    # ------------------------------------------------------------------ lifecycle
    @hookimpl
    def hookgrad_configure(self, runtime: Runtime) -> None:
        # A new run, also for an instance registered again: its records and table are its own.
        self._runtime = runtime
        self.records.clear()
        self._layers = {}
        self._before, self._pre_clip = {}, {}

    @hookimpl
    def hookgrad_unconfigure(self) -> None:
        if self.config.summary and self._layers:
            print(_table(self._layers))

    # ------------------------------------------------------------------ hooks
    @hookimpl
    @stage(Stage.STATS)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        """Record the pre-clip gradients; keep the weights for the update ratio. Never vetoes."""
        if not self._sampled(event.step):
            return
        grads = _grads_of(event.parameters)
        summaries = self._record_step(event.step, "pre_clip", grads, {}, None)
        # A gradient whose version counter has not moved by the post-clip record (nothing
        # clipped it: the common case) keeps its summary; in-place changes bump the counter.
        tensors = {name: p._grad for name, p in event.parameters if p._grad is not None}
        self._pre_clip = {
            name: (grad, grad._vbox[0], summary)
            for (name, _), summary in zip(grads, summaries, strict=True)
            if (grad := tensors[name]) is not None
        }
        if self.config.update_ratio:
            self._before = {
                name: p._data.copy() for name, p in event.parameters if p._grad is not None
            }

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: OptimizerStepPostEvent) -> None:
        """Record the gradients the step used and how far it moved the weights."""
        before, self._before = self._before, {}
        pre_clip, self._pre_clip = self._pre_clip, {}
        if not self._sampled(event.step):
            return
        unchanged = {
            name: kept[2]
            for name, p in event.parameters
            if (kept := pre_clip.get(name)) is not None
            and p._grad is kept[0]
            and p._grad._vbox[0] == kept[1]
        }
        moves = None
        if self.config.update_ratio:
            moves = {} if event.skipped else _moves(before, event.parameters)
        extra: _Data = {"skipped": event.skipped}
        grads = _grads_of(event.parameters)
        self._record_step(event.step, "post_clip", grads, extra, moves, unchanged)

    @hookimpl
    def hookgrad_full_backward(self, event: FullBackwardEvent) -> None:
        """Summarise the gradient reaching a module call's outputs (all outputs together).

        Observes only: the gradients are not replaced.
        """
        if not self._sampled(event.step):
            return
        summaries = _grad_summaries([g._data for g in event.grad_output if g is not None])
        if summaries:
            data: _Data = {"call_index": event.call_index, **_aggregate(summaries)}
            self._emit("grad_output", event.step, event.module_name, data)

    # ------------------------------------------------------------------ records
    def _sampled(self, step: int) -> bool:
        return step % self.config.every_n_steps == 0

    def _record_step(
        self,
        step: int,
        stage_name: str,
        grads: _Grads,
        extra: _Data,
        moves: Mapping[str, tuple[float, float]] | None,
        known: Mapping[str, dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """Emit the param_grad records of ``grads``, then one module_grad record per owner.

        ``moves`` maps a parameter name to (||W_after - W_before||, ||W_before||); None when
        no update ratio belongs in the records, empty when there is none to give (skipped).
        ``known`` holds summaries already computed for unchanged gradients, by name. Returns
        the summaries of ``grads``, in order.
        """
        by_module: dict[str, list[dict[str, Any]]] = {}
        moved: dict[str, list[tuple[float, float]]] = {}
        per_parameter, bins = self.config.per_parameter, self.config.histogram_bins
        summaries = _summaries_reusing(grads, known or {})
        for (name, grad), summary in zip(grads, summaries, strict=True):
            module = name.rpartition(".")[0]
            by_module.setdefault(module, []).append(summary)
            move = None if moves is None else moves.get(name)
            if move is not None:
                moved.setdefault(module, []).append(move)
            if not per_parameter:
                continue
            data: _Data = {"param": name, "stage": stage_name, **extra, **summary}
            if moves is not None:
                data["update_ratio"] = None if move is None else _ratio(*move)
            if bins:
                data["histogram"] = _histogram(grad, bins, summary["min"], summary["max"])
            self._emit("param_grad", step, module, data)
        for module, summaries_of_module in by_module.items():
            data = {"stage": stage_name, **extra, **_aggregate(summaries_of_module)}
            if moves is not None:
                data["update_ratio"] = _module_ratio(moved.get(module, []))
            self._emit("module_grad", step, module, data)
        return summaries

    def _emit(self, kind: str, step: int, module_name: str, data: _Data) -> None:
        if self._runtime is None:
            raise RuntimeError(f"{NAME}: a hook fired before hookgrad_configure")
        record = {
            "plugin": NAME,
            "kind": kind,
            "step": step,
            "module_name": module_name,
            "data": data,
        }
        self.records.append(record)
        if kind == "module_grad":
            self._layers.setdefault(module_name, _Layer()).add(step, data)
        # Dozens of records per step, JSON-safe by construction: _record_step puts only
        # floats, ints, None and the names in them.
        self._runtime.emit(record, trusted=True)


# ---------------------------------------------------------------------- statistics
def _grad_summary(grad: np.ndarray) -> dict[str, Any]:
    """JSON-safe statistics of one gradient array: those of ``array_stats`` plus ``max_abs``.

    ``norm``, ``mean``, ``std``, ``min``, ``max`` and ``max_abs`` are over the finite entries
    (None, or a norm of 0.0, when there are none); ``nonfinite`` counts the rest.
    """
    stats = array_stats(grad)
    lo, hi = stats["min"], stats["max"]
    return {
        "norm": _finite_or_none(stats["norm"]),
        "mean": stats["mean"],
        "std": stats["std"],
        "max_abs": None if lo is None or hi is None else max(abs(lo), abs(hi)),
        "min": lo,
        "max": hi,
        "zero_fraction": stats["zero_fraction"],
        "nonfinite": stats["nonfinite"],
        "numel": int(grad.size),
    }


def _finite_or_none(value: float) -> float | None:
    """``value`` for a record: None when it is not finite (records are plain JSON)."""
    return value if math.isfinite(value) else None


def _summaries_reusing(grads: _Grads, known: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The summary of each (name, gradient), taken from ``known`` where it has the name."""
    todo = [i for i, (name, _) in enumerate(grads) if name not in known]
    fresh = dict(zip(todo, _grad_summaries([grads[i][1] for i in todo]), strict=True))
    return [fresh[i] if i in fresh else known[name] for i, (name, _) in enumerate(grads)]


def _grad_summaries(grads: Sequence[np.ndarray]) -> list[dict[str, Any]]:
    """:func:`_grad_summary` of each array, the small ones computed together in batches.

    A step's gradients are mostly small arrays, whose cost is numpy's per-call overhead, not
    the arithmetic: array_stats' eight or so numpy calls per array become about ten per
    batch. Arrays that stay out of a batch (see :func:`_plan`) get ``_grad_summary``.
    """
    alone, batches = _plan(grads, [g.dtype in _REAL for g in grads], _BATCH_LARGEST, _BATCH_FEWEST)
    done = {i: _grad_summary(grads[i]) for i in alone}
    for batch, bounds in batches:
        summaries = _batch_summaries([grads[i] for i in batch], bounds)
        done.update(zip(batch, summaries, strict=True))
    return [done[i] for i in range(len(grads))]


def _batch_summaries(arrays: Sequence[np.ndarray], bounds: list[int]) -> list[dict[str, Any]]:
    """:func:`_grad_summary` of a batch from :func:`_plan`, with array_stats' formulas.

    An array whose sum of squares is not finite (NaN, ±Inf, squares overflowing float64) or
    fades below float64's normal range, or whose variance cancels, goes to array_stats
    itself, which counts the non-finite entries, rescales, or takes two passes.
    """
    total, total_sq, lows, highs, zeros = _reductions(arrays, bounds)
    summaries = []
    for i, array in enumerate(arrays):
        n, squares = bounds[i + 1] - bounds[i], total_sq[i]
        if math.isfinite(squares) and (squares >= _FADED_64 or zeros[i] == n):
            mean = total[i] / n
            var = squares / n - mean * mean
            if var >= mean * mean * _CANCELLATION:  # array_stats' test, so var >= 0
                lo, hi = lows[i], highs[i]
                summary = {
                    "norm": math.sqrt(squares),
                    "mean": mean,
                    "std": math.sqrt(var),
                    "max_abs": max(abs(lo), abs(hi)),
                    "min": lo,
                    "max": hi,
                    "zero_fraction": zeros[i] / n,
                    "nonfinite": 0,
                    "numel": n,
                }
                summaries.append(summary)
                continue
        summaries.append(_grad_summary(array))
    return summaries


def _reductions(
    arrays: Sequence[np.ndarray], bounds: list[int]
) -> tuple[list[float], list[float], list[float], list[float], list[int]]:
    """Per array of a batch: sum, sum of squares, min, max and zero count, as Python lists.

    One float64 copy of all entries, then one call per statistic (``ufunc.reduceat`` over
    the arrays' segments). min, max and the zero count are exact, so equal array_stats'.
    The sums are of float64 values and squares (a float32's square is exact in float64),
    where array_stats sums in the array's dtype: norm, mean and std agree to its rounding.
    Each sum has at most _BATCH_LARGEST terms, so even summed one by one (numpy sums pairwise)
    its error stays below 1e-12 of the sum of magnitudes. Non-finite entries make non-finite
    sums, without a warning: the caller redoes their arrays.
    """
    edges = np.array(bounds, dtype=np.intp)
    starts = edges[:-1]
    rows = np.empty((2, bounds[-1]))
    values, squares = rows
    np.concatenate(arrays, axis=None, out=values)  # raveled, cast on the way
    zeros_before = np.searchsorted(np.flatnonzero(values == 0), edges).tolist()
    with np.errstate(over="ignore", invalid="ignore"):
        lows = np.minimum.reduceat(values, starts).tolist()
        highs = np.maximum.reduceat(values, starts).tolist()
        np.multiply(values, values, out=squares)
        total, total_sq = np.add.reduceat(rows, starts, axis=1).tolist()
    zeros = [end - start for start, end in itertools.pairwise(zeros_before)]
    return total, total_sq, lows, highs, zeros


def _plan(
    arrays: Sequence[np.ndarray], ok: Sequence[bool], largest: int, fewest: int
) -> tuple[list[int], list[tuple[list[int], list[int]]]]:
    """The indices of the arrays computed alone, and batches of at most _BATCH_ENTRIES entries.

    A batch is its arrays' indices and its bounds: where each array starts when they are
    laid end to end, then the total. Empty arrays go alone, as ``reduceat`` gives an empty
    segment the entry at its start, not the reduction's identity; so do the arrays that
    are not ``ok`` or have more than ``largest`` entries, and those of a batch of fewer
    than ``fewest`` arrays.
    """
    alone: list[int] = []
    batches: list[tuple[list[int], list[int]]] = []
    batch: list[int] = []
    bounds = [0]
    for i, (array, fits) in enumerate(zip(arrays, ok, strict=True)):
        size = array.size
        if not (fits and 0 < size <= largest):
            alone.append(i)
            continue
        if bounds[-1] + size > _BATCH_ENTRIES:
            batches.append((batch, bounds))
            batch, bounds = [], [0]
        batch.append(i)
        bounds.append(bounds[-1] + size)
    batches.append((batch, bounds))
    for batch, _ in batches:
        if len(batch) < fewest:
            alone += batch
    return alone, [b for b in batches if len(b[0]) >= fewest]


def _aggregate(summaries: Sequence[Mapping[str, Any]]) -> _Data:
    """Several gradients as one: the norm of all entries together, max |g|, counts.

    One loop rather than a generator per key: a layer has few parameters, so the
    generators' setup was most of the cost.
    """
    numel = zeros = nonfinite = 0
    norms: list[float] = []
    overflowed = False  # a norm past the largest float is None; so is the layer's
    max_abs: float | None = None
    for s in summaries:
        n = s["numel"]
        if n:  # zero_fraction is count / numel, so rounding recovers each exact count
            numel += n
            zeros += round(s["zero_fraction"] * n)
        nonfinite += s["nonfinite"]
        norm = s["norm"]
        if norm is None:
            overflowed = True
        else:
            norms.append(norm)
        m = s["max_abs"]
        if m is not None and (max_abs is None or m > max_abs):
            max_abs = m
    return {
        "norm": None if overflowed else _finite_or_none(math.hypot(*norms)),
        "max_abs": max_abs,
        "nonfinite": nonfinite,
        "zero_fraction": zeros / numel if numel else None,
        "numel": numel,
    }


def _histogram(grad: np.ndarray, bins: int, lo: float | None, hi: float | None) -> _Data | None:
    """``np.histogram`` of the finite entries, whose extremes are ``lo`` and ``hi``.

    Passing that range spares numpy its own min/max passes and drops NaN and ±Inf without a
    mask. The bounds go in as scalars of the gradient's dtype, as numpy's own ones would, so
    the edges are the same to the last bit. None when no entry is finite, or when ``hi - lo``
    overflows the dtype (numpy cannot bin that range; a statistic must not stop training).
    """
    if lo is None or hi is None:
        return None
    scalar = grad.dtype.type
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            counts, edges = np.histogram(grad, bins=bins, range=(scalar(lo), scalar(hi)))
    except ValueError:  # "Too many bins for data range": the edges are not finite
        return None
    return {"counts": counts.tolist(), "edges": edges.tolist()}


def _grads_of(parameters: Iterable[tuple[str, Any]]) -> _Grads:
    """The (name, gradient array) pairs of the parameters that have a gradient."""
    return [(name, p._grad._data) for name, p in parameters if p._grad is not None]


def _moves(
    before: Mapping[str, np.ndarray], parameters: Iterable[tuple[str, Any]]
) -> dict[str, tuple[float, float]]:
    """Parameter name -> (||W_after - W_before||, ||W_before||) for the weights kept before.

    Small weights are computed in batches, as the statistics are (see _grad_summaries).
    """
    names: list[str] = []
    after: list[np.ndarray] = []
    prior: list[np.ndarray] = []
    for name, p in parameters:
        if name in before:
            names.append(name)
            after.append(p._data)
            prior.append(before[name])
    ok = [
        a.shape == b.shape and a.dtype in _REAL and b.dtype in _REAL for a, b in zip(after, prior)
    ]
    alone, batches = _plan(after, ok, _MOVE_LARGEST, _MOVE_FEWEST)
    done = {i: (_l2_norm(after[i] - prior[i]), _l2_norm(prior[i])) for i in alone}
    for batch, bounds in batches:
        pairs = _batch_moves([after[i] for i in batch], [prior[i] for i in batch], bounds)
        done.update(zip(batch, pairs, strict=True))
    return {name: done[i] for i, name in enumerate(names)}


def _batch_moves(
    after: Sequence[np.ndarray], prior: Sequence[np.ndarray], bounds: list[int]
) -> list[tuple[float, float]]:
    """(||a - b||, ||b||) of a batch of equally shaped pairs from :func:`_plan`.

    The difference is taken in float64, where the single-array path rounds it to the weights'
    dtype first: the norms agree to that rounding. Non-finite weights give NaN or Inf norms
    and float64 squares overflow to Inf, as on that path, so no pair needs redoing.
    """
    rows = np.empty((2, bounds[-1]))
    np.concatenate(after, axis=None, out=rows[0])
    np.concatenate(prior, axis=None, out=rows[1])
    with np.errstate(over="ignore", invalid="ignore"):
        np.subtract(rows[0], rows[1], out=rows[0])
        np.multiply(rows, rows, out=rows)
        sums = np.add.reduceat(rows, np.array(bounds[:-1], dtype=np.intp), axis=1)
        moved, base = np.sqrt(sums).tolist()
    return list(zip(moved, base, strict=True))


def _l2_norm(array: np.ndarray) -> float:
    """The L2 norm as a float; in float64 only if the squares overflow the array's dtype."""
    flat = array.reshape(-1)
    squares = float(np.vdot(flat, flat))
    if math.isinf(squares):
        flat = flat.astype(np.float64)
        squares = float(np.vdot(flat, flat))
    return math.sqrt(squares)


def _ratio(moved: float, base: float) -> float | None:
    """``moved / base``; None when ``base`` is 0 or the ratio is not finite (JSON-safe)."""
    if base == 0.0:
        return None
    ratio = moved / base
    return ratio if math.isfinite(ratio) else None


def _module_ratio(moves: Sequence[tuple[float, float]]) -> float | None:
    """The update ratio of a layer: over all its parameters' entries together."""
    if not moves:
        return None
    moved, base = zip(*moves, strict=True)
    return _ratio(math.hypot(*moved), math.hypot(*base))


# ---------------------------------------------------------------------- the per-layer table
_HEADER: Final = (
    "module",
    "steps",
    "pre-clip last",
    "pre-clip mean",
    "pre-clip max",
    "post-clip last",
    "max |g|",
    "nonfinite",
    "update ratio",
)


@dataclass(slots=True)
class _Layer:
    """What the table says about one module, as running totals of its module_grad records
    (constant memory, however long the run)."""

    steps: int = 0
    last_step: int | None = None
    pre_count: int = 0
    pre_sum: float = 0.0
    pre_last: float | None = None
    pre_max: float | None = None
    post_norm: float | None = None
    max_abs: float | None = None
    nonfinite: int = 0
    ratio_count: int = 0
    ratio_sum: float = 0.0

    def add(self, step: int, data: Mapping[str, Any]) -> None:
        # A step vetoed before the STATS stage has only a (skipped) post_clip record: counting
        # each step's earliest record sees its gradients either way, once. A module's records
        # come step by step, so a new step number starts a new step.
        if step != self.last_step:
            self.last_step = step
            self.steps += 1
            self.nonfinite += data.get("nonfinite", 0)
            value = data.get("max_abs")
            if value is not None and (self.max_abs is None or value > self.max_abs):
                self.max_abs = value
        norm = data.get("norm")
        if data.get("stage") == "pre_clip":
            if norm is not None:  # null: the norm overflowed, there is no number to show
                self.pre_count += 1
                self.pre_sum += norm
                self.pre_last = norm
                if self.pre_max is None or norm > self.pre_max:
                    self.pre_max = norm
        elif not data.get("skipped"):
            self.post_norm = norm
            if data.get("update_ratio") is not None:
                self.ratio_count += 1
                self.ratio_sum += data["update_ratio"]

    def row(self, name: str) -> tuple[str, ...]:
        cells = (
            self.steps,
            self.pre_last,
            self.pre_sum / self.pre_count if self.pre_count else None,
            self.pre_max,
            self.post_norm,
            self.max_abs,
            self.nonfinite,
            self.ratio_sum / self.ratio_count if self.ratio_count else None,
        )
        return (name or "(root)", *(_cell(c) for c in cells))


def per_layer_table(records: Iterable[Mapping[str, Any]]) -> str:
    """The per-layer summary of grad_stats' module_grad records, as aligned plain text.

    One row per module, in order of first appearance: steps sampled, the last, mean and max
    pre-clip gradient norm, the last post-clip norm of a step taken, the largest |g|, the
    non-finite entries counted over all sampled steps and the mean update ratio. Takes the
    JSON form (``PluginRecord`` dicts, as in an events.jsonl file); other records are ignored.
    """
    layers: dict[str, _Layer] = {}
    for record in records:
        if record.get("plugin") != NAME or record.get("kind") != "module_grad":
            continue
        step, data, module = record.get("step"), record.get("data"), record.get("module_name")
        if type(step) is not int or not isinstance(data, Mapping):
            continue  # a malformed line read back from a file: nothing to count
        if module is not None and not isinstance(module, str):
            continue
        layers.setdefault(module or "", _Layer()).add(step, _numbers(data))
    return _table(layers)


def _table(layers: Mapping[str, _Layer]) -> str:
    """The per-layer table of ``layers`` (module name -> totals), as aligned plain text."""
    if not layers:
        return f"{NAME}: no module_grad records"
    rows = [_HEADER, *(layer.row(name) for name, layer in layers.items())]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    return "\n".join(
        "  ".join(
            (cell.ljust(width) if i == 0 else cell.rjust(width))
            for i, (cell, width) in enumerate(zip(row, widths))
        ).rstrip()
        for row in rows
    )


_JSON_NON_FINITE: Final = {text: float(value) for value, text in NONFINITE_JSON.items()}
"""How logs spell non-finite numbers as JSON strings (readers also get bare NaN tokens)."""


def _numbers(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """``data`` with the JSON-string spellings of non-finite numbers read back as floats."""
    if not any(type(v) is str and v in _JSON_NON_FINITE for v in data.values()):
        return data
    return {
        k: _JSON_NON_FINITE[v] if type(v) is str and v in _JSON_NON_FINITE else v
        for k, v in data.items()
    }


def _cell(value: float | None) -> str:
    """A table cell: counts as they are, floats to 4 significant digits, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"
