"""``grad_clip``: gradient clipping as a plugin, six ways, last in the optimizer-step pipeline.

Five modes change the selected parameters' gradients in place at ``optimizer.step()``, after
unscaling, guarding and pre-clip statistics (``trylast`` + :attr:`Stage.CLIP`), whatever order
the config lists the plugins in: ``norm`` (``clip_grad_norm_``), ``value``
(``clip_grad_value_``), ``per_module`` (``clip_grad_norm_`` per owning module), ``agc``
(adaptive gradient clipping, Brock et al. 2021) and ``autoclip`` (a percentile of the history
of total norms, Seetharaman et al. 2020). The sixth, ``grad_input``, clamps the gradient
flowing out of each selected module during the backward, as a global full backward hook
returning a clamped ``grad_input`` does.

Each mode implements only the hook it uses; the other is set to None on the instance, so the
runtime installs nothing for it (a global full backward hook would cost every module call).

Every clip is reported as a ``kind="clip"`` record whose norms are 2-norms of the gradients
concerned, whatever ``norm_type`` the clipping used.

The numeric work is the engine's (the kernels of :class:`hookgrad.engines.Engine`, found with
:func:`hookgrad.engines.engine_of` from the gradients at hand), so the same code clips
hookgrad and torch gradients, the latter where they are, with one host sync per step.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, TypeAlias

import numpy as np
from pydantic import Field, JsonValue, ValidationInfo, field_validator

import hookgrad
from hookgrad.engines import Engine, engine_of
from hookgrad.hookspecs import (
    FullBackwardEvent,
    OptimizerStepPreEvent,
    PluginConfig,
    Stage,
    grad_norms,
    hookimpl,
    stage,
)

__all__ = ["GradClip"]

NAME: Final = "grad_clip"
"""The entry-point name, which every record carries as ``plugin``."""

Mode: TypeAlias = Literal["norm", "value", "per_module", "agc", "autoclip", "grad_input"]

_NORM_FIELDS: Final = frozenset({"max_norm", "norm_type", "error_if_nonfinite"})
_MODE_FIELDS: Final[dict[str, frozenset[str]]] = {
    "norm": _NORM_FIELDS,
    "per_module": _NORM_FIELDS,
    "value": frozenset({"clip_value"}),
    "grad_input": frozenset({"clip_value"}),
    "agc": frozenset({"agc_clipping", "agc_eps"}),
    "autoclip": frozenset({"percentile", "history", "error_if_nonfinite"}),
}
"""The mode-specific settings each mode reads; setting another mode's is a config error."""
_ALL_MODE_FIELDS: Final = frozenset().union(*_MODE_FIELDS.values())

# (pre_norm, post_norm, threshold, clipped): one clip as its record reports it.
_Outcome: TypeAlias = tuple[float, float, float | None, bool]


class GradClip:
    """Clip gradients at the optimizer step (or at each module's backward, ``grad_input``)."""

    class Config(PluginConfig):
        """Which clipping rule to apply and its settings (only the chosen mode's may be set)."""

        mode: Mode = "norm"
        """norm | value | per_module | agc | autoclip | grad_input: the rule (see the docs)."""

        max_norm: float = Field(default=1.0, gt=0, allow_inf_nan=False)
        """norm, per_module: the largest total norm kept (for per_module, each module's)."""

        norm_type: float = 2.0
        """norm, per_module: the order p of the total norm, any float as in torch ("inf": max)."""

        error_if_nonfinite: bool = False
        """norm, per_module, autoclip: raise RuntimeError when the total norm is nan or inf."""

        clip_value: float = Field(default=1.0, gt=0, allow_inf_nan=False)
        """value, grad_input: every gradient entry is clamped to [-clip_value, clip_value]."""

        agc_clipping: float = Field(default=0.01, gt=0, allow_inf_nan=False)
        """agc: lambda, the largest ratio of a unit's gradient norm to its weight norm."""

        agc_eps: float = Field(default=1e-3, gt=0, allow_inf_nan=False)
        """agc: floor of a unit's weight norm, so zero-initialised weights can still move."""

        percentile: float = Field(default=10.0, ge=0, le=100)
        """autoclip: the percentile (0..100) of past total norms that becomes the clip norm."""

        history: int = Field(default=1000, ge=1, le=100_000)
        """autoclip: how many recent total norms the percentile is taken over (at most
        100000: the percentile is recomputed over all of them at every step)."""

        @field_validator("norm_type", mode="before")
        @classmethod
        def _inf_string(cls, value: object) -> object:
            """The string "inf" is torch's spelling of the max norm: the one string taken."""
            return math.inf if value == "inf" else value

        @field_validator("norm_type")
        @classmethod
        def _norm_type_is_a_number(cls, value: float) -> float:
            if math.isnan(value):
                raise ValueError('norm_type must be a number or "inf", got nan')
            return value

        @field_validator(*sorted(_ALL_MODE_FIELDS))
        @classmethod
        def _setting_fits_mode(cls, value: object, info: ValidationInfo) -> object:
            """A setting given for another mode is a mistake (likely a forgotten ``mode``)."""
            mode = info.data.get("mode")  # absent when mode itself is invalid
            field = info.field_name
            if mode is None or field in _MODE_FIELDS[mode]:
                return value
            owners = " or ".join(m for m, fields in _MODE_FIELDS.items() if field in fields)
            uses = ", ".join(sorted(_MODE_FIELDS[mode]))
            raise ValueError(f"{field} applies to mode {owners} only; mode {mode!r} uses {uses}")

    def __init__(self, config: Config) -> None:
        self.config = config
        self.runtime: hookgrad.Runtime | None = None
        self._history: deque[float] = deque(maxlen=config.history)
        strategies: dict[str, Callable[[int, Sequence[tuple[str, Any]]], None]] = {
            "norm": self._global(self._clip_norm),
            "value": self._global(self._clip_value),
            "agc": self._global(self._clip_agc),
            "autoclip": self._global(self._clip_auto),
            "per_module": self._clip_per_module,
        }
        # A mode's unused hook is switched off, so the runtime installs nothing for it.
        if config.mode == "grad_input":
            self.hookgrad_optimizer_step_pre = None  # type: ignore[method-assign,assignment]
        else:
            self.hookgrad_full_backward = None  # type: ignore[method-assign,assignment]
            self._strategy = strategies[config.mode]

    # ------------------------------------------------------------------ hooks
    @hookimpl
    def hookgrad_configure(self, runtime: hookgrad.Runtime) -> None:
        self.runtime = runtime
        self._history.clear()  # autoclip's norms belong to one run, even for a reused instance

    @hookimpl(trylast=True)
    @stage(Stage.CLIP)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        """Clip the selected gradients in place, after every other pipeline stage."""
        self._strategy(event.step, event.parameters)

    @hookimpl
    def hookgrad_full_backward(self, event: FullBackwardEvent) -> tuple[Any, ...] | None:
        """Clamp ``grad_input`` to ``[-clip_value, clip_value]``; None when nothing exceeds it."""
        grads = event.grad_input
        present = next((g for g in grads if g is not None), None)
        if present is None:
            return None
        limit = self.config.clip_value
        clamped = _engine_of(present).clamp(grads, limit, in_place=False)
        if clamped.tensors is None:
            return None
        self._emit(
            event.step, event.module_name, (clamped.pre_norm, clamped.post_norm, limit, True)
        )
        return clamped.tensors

    # ------------------------------------------------------------------ optimizer-step modes
    def _global(
        self, clip: Callable[[Engine, list[Any]], _Outcome]
    ) -> Callable[[int, Sequence[tuple[str, Any]]], None]:
        """A mode that clips all selected gradients together: one record per step."""

        def run(step: int, named: Sequence[tuple[str, Any]]) -> None:
            params = [p for _, p in named if p.grad is not None]
            if params:  # no gradient, nothing to clip or report
                self._emit(step, None, clip(_engine_of(params[0]), params))

        return run

    def _clip_per_module(self, step: int, named: Sequence[tuple[str, Any]]) -> None:
        """``clip_grad_norm_`` per owning module (the name before the last dot): one record each.

        Every module's norms are taken first, together (one sync), so an error_if_nonfinite
        failure leaves every gradient as it was.
        """
        groups: dict[str, list[Any]] = {}
        first = None
        for name, p in named:
            if (grad := p.grad) is not None:
                groups.setdefault(name.rpartition(".")[0], []).append(grad)
                if first is None:
                    first = p
        if first is None:  # no gradient, nothing to clip or report
            return
        engine = _engine_of(first)
        norms = self._norms(engine, list(groups.values()))
        for (module_name, grads), (total, pre) in zip(groups.items(), norms):
            self._emit(
                step, module_name, _scale_to(engine, grads, self.config.max_norm, total, pre)
            )

    def _clip_norm(self, engine: Engine, params: list[Any]) -> _Outcome:
        """``clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite)``."""
        grads = [p.grad for p in params]
        [(total, pre)] = self._norms(engine, [grads])
        return _scale_to(engine, grads, self.config.max_norm, total, pre)

    def _norms(self, engine: Engine, groups: list[list[Any]]) -> list[tuple[float, float]]:
        """Each group's total ``norm_type``-norm (checked by error_if_nonfinite) and 2-norm."""
        config = self.config
        if config.norm_type == 2.0:
            totals = _two_norms(engine, groups, config.error_if_nonfinite)
            return [(total, total) for total in totals]
        norms = engine.total_norms(groups, (config.norm_type, 2.0), config.error_if_nonfinite)
        return [(total, two) for total, two in norms]

    def _clip_auto(self, engine: Engine, params: list[Any]) -> _Outcome:
        """AutoClip: clip the total 2-norm to a percentile of the recent ones, this one included.

        A nan or inf norm is kept out of the history, where it would poison the percentile
        for ``history`` steps; while the history is empty nothing is clipped.
        """
        grads = [p.grad for p in params]
        [norm] = _two_norms(engine, [grads], self.config.error_if_nonfinite)
        if math.isfinite(norm):
            self._history.append(norm)
        if not self._history:
            return norm, norm, None, False
        history = np.fromiter(self._history, np.float64, len(self._history))  # 2x np.array's speed
        threshold = float(np.percentile(history, self.config.percentile))
        return _scale_to(engine, grads, threshold, norm, norm)

    def _clip_value(self, engine: Engine, params: list[Any]) -> _Outcome:
        """``clip_grad_value_(params, clip_value)``, skipped when no entry exceeds the limit."""
        limit = self.config.clip_value
        clamped = engine.clamp([p.grad for p in params], limit, in_place=True)
        return clamped.pre_norm, clamped.post_norm, limit, clamped.tensors is not None

    def _clip_agc(self, engine: Engine, params: list[Any]) -> _Outcome:
        """Adaptive gradient clipping, unit by unit (:meth:`Engine.agc_clip_`)."""
        clipping = self.config.agc_clipping
        grads = [p.grad for p in params]
        pre, post, clipped = engine.agc_clip_(params, grads, clipping, self.config.agc_eps)
        return pre, post, clipping, clipped

    # ------------------------------------------------------------------ records
    def _emit(self, step: int, module_name: str | None, outcome: _Outcome) -> None:
        """Write one ``clip`` record; a non-finite norm is written as None plus ``nonfinite``."""
        if self.runtime is None:  # called through bare pluggy, not a runtime
            return
        pre, post, threshold, clipped = outcome
        data: dict[str, JsonValue] = {
            "mode": self.config.mode,
            "pre_norm": _json_float(pre),
            "post_norm": _json_float(post),
            "threshold": threshold,
            "clipped": clipped,
        }
        if not (math.isfinite(pre) and math.isfinite(post)):
            data["nonfinite"] = True
        record = {"plugin": NAME, "kind": "clip", "step": step, "module_name": module_name}
        # JSON-safe by construction: finite floats or None, the mode, a bool.
        self.runtime.emit({**record, "data": data}, trusted=True)


# ---------------------------------------------------------------------- helpers
def _engine_of(tensor: Any) -> Engine:
    """The engine of the tensors a hook was given."""
    engine = engine_of(tensor)
    if engine is None:
        raise TypeError(f"grad_clip: not a tensor of any engine: {type(tensor).__name__}")
    return engine


def _two_norms(engine: Engine, groups: list[list[Any]], error_if_nonfinite: bool) -> list[float]:
    """Each group's total 2-norm, ``get_total_norm``'s to the bit.

    Built from the step's shared per-gradient norms (:func:`grad_norms`: computed once for
    every plugin asking) where the engine can (:meth:`Engine.total_norm_of`); else, or when a
    non-finite total must raise torch's error, by :meth:`Engine.total_norms`.
    """
    shared = grad_norms([g for group in groups for g in group])
    totals: list[float] = []
    start = 0
    for group in groups:
        norms = shared[start : start + len(group)]
        start += len(group)
        total = engine.total_norm_of(group, norms)  # type: ignore[arg-type]
        if total is None or (error_if_nonfinite and not math.isfinite(total)):
            return [norm for (norm,) in engine.total_norms(groups, (2.0,), error_if_nonfinite)]
        totals.append(total)
    return totals


def _scale_to(
    engine: Engine, grads: list[Any], max_norm: float, total: float, pre: float
) -> _Outcome:
    """``clip_grads_with_norm_`` to ``max_norm``; ``pre`` is the 2-norm before it.

    The post-clip 2-norm is ``pre`` times the coefficient the gradients were multiplied by
    (computed as torch does, in the norm's dtype), which spares a second pass over them.
    "Clipped" means the total norm exceeded ``max_norm`` (or was nan), not that the
    coefficient was below 1: it is ``max_norm / (norm + 1e-6)``, a hair under 1 also for a
    norm equal to ``max_norm``, as autoclip's first step has.
    """
    coefficient = engine.clip_with_norm_(grads, max_norm, total)
    return pre, pre * coefficient, max_norm, not total <= max_norm


def _json_float(value: float) -> float | None:
    """``value`` for a JSON record: None stands for nan and the infinities."""
    return value if math.isfinite(value) else None
