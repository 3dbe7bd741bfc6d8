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

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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
from hookgrad.hookspecs._stats import array_stats

if TYPE_CHECKING:
    from hookgrad import Runtime

__all__ = ["GradStats", "per_layer_table"]

NAME: Final = "grad_stats"
"""The entry-point name, stamped on every record as ``plugin``."""

_Data: TypeAlias = dict[str, JsonValue]
_Grads: TypeAlias = list[tuple[str, np.ndarray]]


class GradStats:
    """Record gradient statistics per parameter and per layer, before and after clipping."""

    class Config(PluginConfig):
        every_n_steps: Annotated[int, Field(ge=1)] = 1
        """Record on steps 0, N, 2N, ... only; the other steps cost one modulo."""

        per_parameter: bool = True
        """Emit a param_grad record per parameter; module_grad records are always emitted."""

        update_ratio: bool = True
        """Add ||W_after - W_before|| / ||W_before|| to post_clip records (copies the weights)."""

        histogram_bins: Annotated[int, Field(ge=0)] = 0
        """Bins of a histogram of each parameter's finite gradient entries; 0 turns it off."""

        grad_output: bool = False
        """Also summarise each module call's grad_output: a backward hook on every module call."""

        summary: bool = True
        """Print the per-layer table to stdout when the run ends."""

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
        self.records: list[dict[str, Any]] = []
        """Every record this plugin emitted, in order (the JSON form the sinks received)."""
        self._runtime: Runtime | None = None
        self._before: dict[str, np.ndarray] = {}  # weights at step_pre of a sampled step
        if not config.grad_output:
            # No implementation, no global backward hook: module calls keep their fast path.
            self.hookgrad_full_backward = None  # type: ignore[method-assign,assignment]

    # ------------------------------------------------------------------ lifecycle
    @hookimpl
    def hookgrad_configure(self, runtime: Runtime) -> None:
        self._runtime = runtime

    @hookimpl
    def hookgrad_unconfigure(self) -> None:
        if self.config.summary and any(r["kind"] == "module_grad" for r in self.records):
            print(per_layer_table(self.records))

    # ------------------------------------------------------------------ hooks
    @hookimpl
    @stage(Stage.STATS)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        """Record the pre-clip gradients; keep the weights for the update ratio. Never vetoes."""
        if not self._sampled(event.step):
            return
        self._record_step(event.step, "pre_clip", _grads_of(event.parameters), {}, None)
        if self.config.update_ratio:
            self._before = {
                name: p._data.copy() for name, p in event.parameters if p._grad is not None
            }

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: OptimizerStepPostEvent) -> None:
        """Record the gradients the step used and how far it moved the weights."""
        before, self._before = self._before, {}
        if not self._sampled(event.step):
            return
        moves = None
        if self.config.update_ratio:
            moves = {} if event.skipped else _moves(before, event.parameters)
        extra: _Data = {"skipped": event.skipped}
        self._record_step(event.step, "post_clip", _grads_of(event.parameters), extra, moves)

    @hookimpl
    def hookgrad_full_backward(self, event: FullBackwardEvent) -> None:
        """Summarise the gradient reaching a module call's outputs (all outputs together).

        Observes only: the gradients are not replaced.
        """
        if not self._sampled(event.step):
            return
        summaries = [_grad_summary(g._data) for g in event.grad_output if g is not None]
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
    ) -> None:
        """Emit the param_grad records of ``grads``, then one module_grad record per owner.

        ``moves`` maps a parameter name to (||W_after - W_before||, ||W_before||); None when
        no update ratio belongs in the records, empty when there is none to give (skipped).
        """
        by_module: dict[str, list[dict[str, Any]]] = {}
        moved: dict[str, list[tuple[float, float]]] = {}
        for name, grad in grads:
            module = name.rpartition(".")[0]
            summary = _grad_summary(grad)
            by_module.setdefault(module, []).append(summary)
            move = None if moves is None else moves.get(name)
            if move is not None:
                moved.setdefault(module, []).append(move)
            if not self.config.per_parameter:
                continue
            data: _Data = {"param": name, "stage": stage_name, **extra, **summary}
            if moves is not None:
                data["update_ratio"] = None if move is None else _ratio(*move)
            if self.config.histogram_bins:
                bins = self.config.histogram_bins
                data["histogram"] = _histogram(grad, bins, summary["min"], summary["max"])
            self._emit("param_grad", step, module, data)
        for module, summaries in by_module.items():
            data = {"stage": stage_name, **extra, **_aggregate(summaries)}
            if moves is not None:
                data["update_ratio"] = _module_ratio(moved.get(module, []))
            self._emit("module_grad", step, module, data)

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
        self._runtime.emit(record)


# ---------------------------------------------------------------------- statistics
def _grad_summary(grad: np.ndarray) -> dict[str, Any]:
    """JSON-safe statistics of one gradient array: those of ``array_stats`` plus ``max_abs``.

    ``norm``, ``mean``, ``std``, ``min``, ``max`` and ``max_abs`` are over the finite entries
    (None, or a norm of 0.0, when there are none); ``nonfinite`` counts the rest.
    """
    stats = array_stats(grad)
    lo, hi = stats["min"], stats["max"]
    return {
        "norm": stats["norm"],
        "mean": stats["mean"],
        "std": stats["std"],
        "max_abs": None if lo is None or hi is None else max(abs(lo), abs(hi)),
        "min": lo,
        "max": hi,
        "zero_fraction": stats["zero_fraction"],
        "nonfinite": stats["nonfinite"],
        "numel": int(grad.size),
    }


def _aggregate(summaries: Sequence[Mapping[str, Any]]) -> _Data:
    """Several gradients as one: the norm of all entries together, max |g|, counts."""
    numel = sum(s["numel"] for s in summaries)
    # zero_fraction is count / numel, so rounding recovers each exact count.
    zeros = sum(round(s["zero_fraction"] * s["numel"]) for s in summaries if s["numel"])
    return {
        "norm": math.hypot(*(s["norm"] for s in summaries)),
        "max_abs": max((s["max_abs"] for s in summaries if s["max_abs"] is not None), default=None),
        "nonfinite": sum(s["nonfinite"] for s in summaries),
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
    """Parameter name -> (||W_after - W_before||, ||W_before||) for the weights kept before."""
    return {
        name: (_l2_norm(p._data - before[name]), _l2_norm(before[name]))
        for name, p in parameters
        if name in before
    }


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
    return _ratio(math.hypot(*(m for m, _ in moves)), math.hypot(*(b for _, b in moves)))


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
    """What the table says about one module, accumulated from its module_grad records."""

    first: dict[int, Mapping[str, Any]] = field(default_factory=dict)  # step -> earliest data
    pre_norms: list[float] = field(default_factory=list)
    post_norm: float | None = None
    ratios: list[float] = field(default_factory=list)

    def add(self, step: int, data: Mapping[str, Any]) -> None:
        # A step vetoed before the STATS stage has only a (skipped) post_clip record: counting
        # each step's earliest record sees its gradients either way, once.
        self.first.setdefault(step, data)
        if data.get("stage") == "pre_clip":
            self.pre_norms.append(data["norm"])
        elif not data.get("skipped"):
            self.post_norm = data["norm"]
            if data.get("update_ratio") is not None:
                self.ratios.append(data["update_ratio"])

    def row(self, name: str) -> tuple[str, ...]:
        pre = self.pre_norms
        max_abs = [d["max_abs"] for d in self.first.values() if d.get("max_abs") is not None]
        cells = (
            len(self.first),
            pre[-1] if pre else None,
            sum(pre) / len(pre) if pre else None,
            max(pre, default=None),
            self.post_norm,
            max(max_abs, default=None),
            sum(d.get("nonfinite", 0) for d in self.first.values()),
            sum(self.ratios) / len(self.ratios) if self.ratios else None,
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
        if record.get("plugin") == NAME and record.get("kind") == "module_grad":
            layer = layers.setdefault(record.get("module_name") or "", _Layer())
            layer.add(record["step"], record["data"])
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


def _cell(value: float | None) -> str:
    """A table cell: counts as they are, floats to 4 significant digits, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"
