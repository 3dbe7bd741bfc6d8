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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypeAlias, get_args

from pydantic import Field, JsonValue, ValidationInfo, field_validator

from hookgrad.engines import engine_of
from hookgrad.hookspecs import (
    FullBackwardEvent,
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginConfig,
    Stage,
    grad_norms,
    hookimpl,
    stage,
)
from hookgrad.hookspecs._stats import NONFINITE_JSON
from hookgrad.plugins._record_ring import RecordRing

if TYPE_CHECKING:
    from hookgrad import Runtime
    from hookgrad.engines import Engine

__all__ = ["GradStats", "per_layer_table"]

NAME: Final = "grad_stats"
"""The entry-point name, stamped on every record as ``plugin``."""

_Data: TypeAlias = dict[str, JsonValue]
_Summary: TypeAlias = Mapping[str, Any]
"""A gradient's statistics: a GradSummary, or only its norm (``stats = ["norm"]``)."""
_Grads: TypeAlias = list[tuple[str, Any]]
"""(parameter name, gradient tensor) pairs, of one engine."""

Stat: TypeAlias = Literal[
    "norm", "mean", "std", "max_abs", "min", "max", "zero_fraction", "nonfinite", "numel"
]
"""A statistic a record can carry (the keys of a GradSummary, in record order)."""
STATS: Final[tuple[Stat, ...]] = get_args(Stat)
_LAYOUTS_KEPT: Final = 16
"""Parameter lists whose grouping by module is kept (a model's is one; more: forgotten)."""
_MODULE_STATS: Final = frozenset({"norm", "max_abs", "nonfinite", "zero_fraction", "numel"})
"""The statistics a module_grad (and grad_output) record can carry."""


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

        stats: Annotated[tuple[Stat, ...], Field(min_length=1)] = STATS
        """The statistics the records carry (default: all). ``["norm"]`` alone costs no
        summary: the norms are the step's shared gradient norms (:func:`grad_norms`), which
        nan_guard and grad_clip compute or reuse too."""

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
        self.records = RecordRing(config.keep_records)
        """The latest ``keep_records`` records this plugin emitted, in order (the JSON form the
        sinks received), built from the kept statistics when read."""
        self._layouts: dict[tuple[str, ...], _Layout] = {}
        self._layers: dict[str, _Layer] = {}  # the per-layer table, as running totals
        self._runtime: Runtime | None = None
        self._before: dict[str, Any] = {}  # engine.snapshot of the weights at step_pre
        # name -> (gradient tensor, its version, its pre-clip summary) of a sampled step
        self._pre_clip: dict[str, tuple[Any, int, _Summary]] = {}
        fields = frozenset(config.stats)
        # The statistics kept in records (None: all of them, nothing to filter); norms alone
        # come from the step's shared gradient norms, with no summary computed.
        self._fields = None if fields == frozenset(STATS) else fields
        self._norms_only = fields == {"norm"} and not config.histogram_bins
        # What a param_grad and a module_grad record say of one summary / a module's summaries
        # (with norms alone, each "summary" is the float itself).
        self._parameter_data: Callable[[Any], Mapping[str, Any]] = self._kept
        self._module_data: Callable[[Sequence[Any]], Mapping[str, Any]] = self._aggregate_kept
        if self._norms_only:
            self._parameter_data, self._module_data = _norm_data, _norms_data
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
        engine = _engine_of(event.parameters)
        summaries = self._record_step(engine, event.step, "pre_clip", grads, {}, None)
        if not self._norms_only:
            # A gradient whose version counter has not moved by the post-clip record (nothing
            # clipped it: the common case) keeps its summary; in-place changes bump the counter.
            # (Norms alone come from the shared gradient norms, which do the same.)
            self._pre_clip = {
                name: (grad, grad._version, summary)
                for (name, grad), summary in zip(grads, summaries, strict=True)
            }
        if self.config.update_ratio and engine is not None:
            weights = dict(event.parameters)
            names = [name for name, _ in grads]
            snapshots = engine.snapshot([weights[name] for name in names])
            self._before = dict(zip(names, snapshots, strict=True))

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: OptimizerStepPostEvent) -> None:
        """Record the gradients the step used and how far it moved the weights."""
        before, self._before = self._before, {}
        pre_clip, self._pre_clip = self._pre_clip, {}
        if not self._sampled(event.step):
            return
        grads = _grads_of(event.parameters)
        unchanged = {
            name: kept[2]
            for name, grad in (grads if pre_clip else ())
            if (kept := pre_clip.get(name)) is not None
            and grad is kept[0]
            and grad._version == kept[1]
        }
        engine = _engine_of(event.parameters)
        moves = None
        if self.config.update_ratio:
            moves = {}
            if before and not event.skipped and engine is not None:
                moves = _moves(engine, before, event.parameters)
        extra: _Data = {"skipped": event.skipped}
        self._record_step(engine, event.step, "post_clip", grads, extra, moves, unchanged)

    @hookimpl
    def hookgrad_full_backward(self, event: FullBackwardEvent) -> None:
        """Summarise the gradient reaching a module call's outputs (all outputs together).

        Observes only: the gradients are not replaced.
        """
        if not self._sampled(event.step):
            return
        grads = [g for g in event.grad_output if g is not None]
        if grads:
            summaries = _engine_of_tensor(grads[0]).grad_summaries(grads)
            aggregate = _aggregate(summaries)  # type: ignore[arg-type]
            data: _Data = {"call_index": event.call_index, **self._kept(aggregate)}
            self._emit("grad_output", event.step, event.module_name, data)

    # ------------------------------------------------------------------ records
    def _sampled(self, step: int) -> bool:
        return step % self.config.every_n_steps == 0

    def _aggregate_kept(self, summaries: Sequence[_Summary]) -> Mapping[str, Any]:
        return self._kept(_aggregate(summaries))

    def _kept(self, summary: Mapping[str, Any]) -> Mapping[str, Any]:
        """``summary`` with only the statistics the ``stats`` setting asks for."""
        fields = self._fields
        return summary if fields is None else {k: v for k, v in summary.items() if k in fields}

    def _record_step(
        self,
        engine: Engine | None,
        step: int,
        stage_name: str,
        grads: _Grads,
        extra: _Data,
        moves: Mapping[str, tuple[float, float]] | None,
        known: Mapping[str, _Summary] | None = None,
    ) -> list[Any]:
        """Record the param_grad records of ``grads``, then one module_grad record per owner.

        ``engine`` is the gradients' (None only when there are none). ``moves`` maps a
        parameter name to (||W_after - W_before||, ||W_before||); None when no update ratio
        belongs in the records, empty when there is none to give (skipped). ``known`` holds
        summaries already computed for unchanged gradients, by name. Returns the summaries of
        ``grads``, in order (their norms alone, as floats, with ``stats = ["norm"]``).

        The records are built only when read (:class:`_StepRecords`): at once when a sink or
        the end-of-run table wants them, else when ``plugin.records`` is read, if ever.
        """
        if engine is None or not grads:
            return []
        names = [name for name, _ in grads]
        summaries: list[Any]
        if self._norms_only:  # each "summary" is the norm alone: nothing to filter
            summaries = _step_norms(engine, grads)
        else:
            summaries = _summaries_reusing(engine, grads, known or {})
        bins = self.config.histogram_bins
        batch = _StepRecords(
            self,
            step,
            stage_name,
            extra,
            self._layout(names),
            summaries,
            moves,
            _histograms(engine, grads, summaries, bins) if bins else None,
        )
        self.records.add(batch)
        runtime = self._runtime
        if runtime is None:
            raise RuntimeError(f"{NAME}: a hook fired before hookgrad_configure")
        if self.config.summary:
            for record in batch.module_records():
                self._layers.setdefault(record["module_name"], _Layer()).add(step, record["data"])
        if len(runtime.sinks):
            for record in batch.records():
                # JSON-safe by construction: only floats, ints, None and the names in them.
                runtime.emit(record, trusted=True)
        return summaries

    def _layout(self, names: list[str]) -> _Layout:
        """Which of ``names`` each owning module has, in order of first appearance; kept
        per list of names, which is the same step after step."""
        key = tuple(names)
        layout = self._layouts.get(key)
        if layout is None:
            if len(self._layouts) >= _LAYOUTS_KEPT:
                self._layouts.clear()
            members: dict[str, list[int]] = {}
            for i, name in enumerate(names):
                members.setdefault(name.rpartition(".")[0], []).append(i)
            layout = self._layouts[key] = _Layout(
                key, tuple(members), tuple(tuple(m) for m in members.values())
            )
        return layout

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
        self._runtime.emit(record, trusted=True)


@dataclass(frozen=True, slots=True)
class _Layout:
    """Parameter names grouped by owning module (the name before the last dot)."""

    names: tuple[str, ...]
    modules: tuple[str, ...]
    members: tuple[tuple[int, ...], ...]
    """Per module, the positions of its parameters in ``names``."""


class _StepRecords:
    """One sampled step's records of one stage, kept as the computed statistics and built
    into record dicts (the JSON form the sinks get) on the first read."""

    __slots__ = (
        "_built",
        "_extra",
        "_histograms",
        "_layout",
        "_module_records",
        "_moves",
        "_plugin",
        "_size",
        "_stage",
        "_step",
        "_summaries",
    )

    def __init__(
        self,
        plugin: GradStats,
        step: int,
        stage: str,
        extra: _Data,
        layout: _Layout,
        summaries: list[Any],
        moves: Mapping[str, tuple[float, float]] | None,
        histograms: list[_Data | None] | None,
    ) -> None:
        self._plugin = plugin
        self._step, self._stage, self._extra = step, stage, extra
        self._layout, self._summaries = layout, summaries
        self._moves, self._histograms = moves, histograms
        self._built: list[dict[str, Any]] | None = None
        self._module_records: list[dict[str, Any]] | None = None
        per_parameter = len(layout.names) if plugin.config.per_parameter else 0
        self._size = per_parameter + len(layout.modules)

    def __len__(self) -> int:
        return self._size

    def records(self) -> list[dict[str, Any]]:
        """The param_grad records (when per_parameter), then the module_grad records."""
        if self._built is None:
            self._built = [*self._parameter_records(), *self.module_records()]
        return self._built

    def module_records(self) -> list[dict[str, Any]]:
        """The module_grad records: each module's parameters' statistics together."""
        if self._module_records is None:
            self._module_records = self._build_module_records()
        return self._module_records

    def _build_module_records(self) -> list[dict[str, Any]]:
        layout, summaries, moves = self._layout, self._summaries, self._moves
        module_data = self._plugin._module_data
        records = []
        for module, members in zip(layout.modules, layout.members, strict=True):
            data = {
                "stage": self._stage,
                **self._extra,
                **module_data([summaries[i] for i in members]),
            }
            if moves is not None:
                moved = [move for i in members if (move := moves.get(layout.names[i]))]
                data["update_ratio"] = _module_ratio(moved)
            records.append(_record("module_grad", self._step, module, data))
        return records

    def _parameter_records(self) -> list[dict[str, Any]]:
        plugin = self._plugin
        if not plugin.config.per_parameter:
            return []
        parameter_data = plugin._parameter_data
        moves, histograms = self._moves, self._histograms
        records = []
        for i, (name, summary) in enumerate(zip(self._layout.names, self._summaries, strict=True)):
            data: dict[str, Any] = {"param": name, "stage": self._stage, **self._extra}
            data.update(parameter_data(summary))
            if moves is not None:
                move = moves.get(name)
                data["update_ratio"] = None if move is None else _ratio(*move)
            if histograms is not None:
                data["histogram"] = histograms[i]
            records.append(_record("param_grad", self._step, name.rpartition(".")[0], data))
        return records


def _record(kind: str, step: int, module_name: str, data: _Data) -> dict[str, Any]:
    return {"plugin": NAME, "kind": kind, "step": step, "module_name": module_name, "data": data}


# ---------------------------------------------------------------------- statistics
def _finite_or_none(value: float) -> float | None:
    """``value`` for a record: None when it is not finite (records are plain JSON)."""
    return value if math.isfinite(value) else None


def _summaries_reusing(
    engine: Engine, grads: _Grads, known: Mapping[str, _Summary]
) -> list[_Summary]:
    """The summary of each (name, gradient), taken from ``known`` where it has the name."""
    todo = [i for i, (name, _) in enumerate(grads) if name not in known]
    if not todo:
        return [known[name] for name, _ in grads]
    fresh = engine.grad_summaries([grads[i][1] for i in todo])
    done = dict(zip(todo, fresh, strict=True))
    return [done[i] if i in done else known[name] for i, (name, _) in enumerate(grads)]  # type: ignore[misc]


def _step_norms(engine: Engine, grads: _Grads) -> list[float | None]:
    """Each gradient's norm, from the step's shared norms (:func:`grad_norms`).

    A non-finite shared norm (NaN/Inf entries, or squares that overflow the gradient's dtype)
    is replaced by the engine's summary norm, over the finite entries (None past the largest
    float), as the full statistics give it.
    """
    norms = grad_norms([grad for _, grad in grads])
    if not all(map(math.isfinite, norms)):  # type: ignore[arg-type]
        bad = [i for i, norm in enumerate(norms) if not math.isfinite(norm)]  # type: ignore[arg-type]
        fallback = engine.grad_summaries([grads[i][1] for i in bad])
        for i, summary in zip(bad, fallback, strict=True):
            norms[i] = summary["norm"]  # type: ignore[index]
    return norms


def _norm_data(norm: float | None) -> _Data:
    """A param_grad record's statistics when they are the norm alone."""
    return {"norm": norm}


def _norms_data(norms: Sequence[float | None]) -> _Data:
    """:func:`_aggregate` of norms alone: the norm of all entries together."""
    if None in norms:  # a norm past the largest float: so is the layer's
        return {"norm": None}
    return {"norm": _finite_or_none(math.hypot(*norms))}  # type: ignore[arg-type]


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


def _histograms(
    engine: Engine, grads: _Grads, summaries: Sequence[Any], bins: int
) -> list[_Data | None]:
    """The histogram of each gradient's finite entries (None when it has none)."""
    ranges = [
        None if (lo := s["min"]) is None or (hi := s["max"]) is None else (lo, hi)
        for s in summaries
    ]
    return engine.histograms([grad for _, grad in grads], bins, ranges)  # type: ignore[return-value]


def _engine_of(parameters: Iterable[tuple[str, Any]]) -> Engine | None:
    """The engine of a step's parameters (one optimizer's are of one engine); None for none."""
    first = next(iter(parameters), None)
    return None if first is None else _engine_of_tensor(first[1])


def _engine_of_tensor(tensor: Any) -> Engine:
    engine = engine_of(tensor)
    if engine is None:
        raise TypeError(f"{NAME}: {type(tensor).__name__} is not a tensor of a known engine")
    return engine


def _grads_of(parameters: Iterable[tuple[str, Any]]) -> _Grads:
    """The (name, gradient tensor) pairs of the parameters that have a gradient."""
    return [(name, grad) for name, p in parameters if (grad := p.grad) is not None]


def _moves(
    engine: Engine, before: Mapping[str, Any], parameters: Iterable[tuple[str, Any]]
) -> dict[str, tuple[float, float]]:
    """Parameter name -> (||W_after - W_before||, ||W_before||) for the weights kept before."""
    names: list[str] = []
    after: list[Any] = []
    for name, p in parameters:
        if name in before:
            names.append(name)
            after.append(p)
    norms = engine.diff_norms(after, [before[name] for name in names])
    return {name: pair for name, pair in zip(names, norms, strict=True) if pair is not None}


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
