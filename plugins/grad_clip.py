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
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from typing import Final, Literal, TypeAlias

import numpy as np
from pydantic import Field, JsonValue, ValidationInfo, field_validator

import hookgrad
from hookgrad import Tensor
from hookgrad.hookspecs import (
    FullBackwardEvent,
    OptimizerStepPreEvent,
    PluginConfig,
    Stage,
    hookimpl,
    stage,
)
from hookgrad.nn.utils import clip_grad_value_, clip_grads_with_norm_, get_total_norm

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

_AGC_MIN_GRAD_NORM: Final = 1e-6
"""Floor of a unit's gradient norm in the AGC scale factor (Brock et al., timm): no 0/0."""

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
        strategies: dict[str, Callable[[int, list[tuple[str, Tensor]]], None]] = {
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
        named = [(name, p) for name, p in event.parameters if p.grad is not None]
        if named:  # no gradient, nothing to clip or report
            self._strategy(event.step, named)

    @hookimpl
    def hookgrad_full_backward(self, event: FullBackwardEvent) -> tuple[Tensor | None, ...] | None:
        """Clamp ``grad_input`` to ``[-clip_value, clip_value]``; None when nothing exceeds it."""
        limit = self.config.clip_value
        grads = event.grad_input
        if not any(g is not None and _exceeds(g._data, limit) for g in grads):
            return None
        clamped = tuple(None if g is None else g.clamp(-limit, limit) for g in grads)
        outcome = (_two_norm(grads), _two_norm(clamped), limit, True)
        self._emit(event.step, event.module_name, outcome)
        return clamped

    # ------------------------------------------------------------------ optimizer-step modes
    def _global(
        self, clip: Callable[[list[Tensor]], _Outcome]
    ) -> Callable[[int, list[tuple[str, Tensor]]], None]:
        """A mode that clips all selected gradients together: one record per step."""

        def run(step: int, named: list[tuple[str, Tensor]]) -> None:
            self._emit(step, None, clip([p for _, p in named]))

        return run

    def _clip_per_module(self, step: int, named: list[tuple[str, Tensor]]) -> None:
        """``clip_grad_norm_`` per owning module (the name before the last dot): one record each."""
        groups: dict[str, list[Tensor]] = {}
        for name, p in named:
            groups.setdefault(name.rpartition(".")[0], []).append(p)
        for module_name, params in groups.items():
            self._emit(step, module_name, self._clip_norm(params))

    def _clip_norm(self, params: list[Tensor]) -> _Outcome:
        """``clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite)``."""
        config = self.config
        grads = _grads(params)
        total = get_total_norm(grads, config.norm_type, config.error_if_nonfinite)
        pre = float(total) if config.norm_type == 2.0 else float(get_total_norm(grads, 2.0))
        return _scale_to(params, config.max_norm, total, pre)

    def _clip_auto(self, params: list[Tensor]) -> _Outcome:
        """AutoClip: clip the total 2-norm to a percentile of the recent ones, this one included.

        A nan or inf norm is kept out of the history, where it would poison the percentile
        for ``history`` steps; while the history is empty nothing is clipped.
        """
        total = get_total_norm(_grads(params), 2.0, self.config.error_if_nonfinite)
        norm = float(total)
        if math.isfinite(norm):
            self._history.append(norm)
        if not self._history:
            return norm, norm, None, False
        history = np.fromiter(self._history, np.float64, len(self._history))  # 2x np.array's speed
        threshold = float(np.percentile(history, self.config.percentile))
        return _scale_to(params, threshold, total, norm)

    def _clip_value(self, params: list[Tensor]) -> _Outcome:
        """``clip_grad_value_(params, clip_value)``, skipped when no entry exceeds the limit."""
        limit = self.config.clip_value
        grads = _grads(params)
        pre = _two_norm(grads)
        if not any(_exceeds(g._data, limit) for g in grads):
            return pre, pre, limit, False
        clip_grad_value_(params, limit)
        return pre, _two_norm(grads), limit, True

    def _clip_agc(self, params: list[Tensor]) -> _Outcome:
        """Adaptive gradient clipping, unit by unit (see :func:`_agc_clip`)."""
        clipping, eps = self.config.agc_clipping, self.config.agc_eps
        pre_sq, post_sq, clipped = zip(*(_agc_clip(p, clipping, eps) for p in params))
        return math.sqrt(sum(pre_sq)), math.sqrt(sum(post_sq)), clipping, any(clipped)

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
        self.runtime.emit(
            {"plugin": NAME, "kind": "clip", "step": step, "module_name": module_name, "data": data}
        )


# ---------------------------------------------------------------------- array helpers
def _grads(params: Iterable[Tensor]) -> list[Tensor]:
    """The parameters' gradients (the step hook passes only parameters that have one)."""
    return [g for p in params if (g := p.grad) is not None]


def _scale_to(params: list[Tensor], max_norm: float, total: Tensor, pre: float) -> _Outcome:
    """``clip_grads_with_norm_`` to ``max_norm``; ``pre`` is the 2-norm before it.

    A coefficient of exactly 1 leaves the gradients alone (torch multiplies by it): the values
    are the same and the version counters do not move, so later stages know nothing changed.

    The post-clip 2-norm is ``pre`` times the coefficient the gradients were multiplied by
    (computed as torch does, in the norm's dtype), which spares a second pass over them.
    "Clipped" means the total norm exceeded ``max_norm`` (or was nan), not that the
    coefficient was below 1: it is ``max_norm / (norm + 1e-6)``, a hair under 1 also for a
    norm equal to ``max_norm``, as autoclip's first step has.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        coefficient = float(np.minimum(max_norm / (total._data + 1e-6), 1.0))
    if coefficient != 1.0:  # torch multiplies by 1.0 too; skipping it keeps the versions
        clip_grads_with_norm_(params, max_norm, total)
    return pre, pre * coefficient, max_norm, not float(total) <= max_norm


def _exceeds(array: np.ndarray, limit: float) -> bool:
    """Whether some entry lies outside ``[-limit, limit]``; NaN entries do not, infinities do.

    ``fmax``/``fmin`` skip NaN where ``max``/``min`` would return it and hide the other
    entries, at the same cost.
    """
    if array.size == 0:
        return False
    return bool(np.fmax.reduce(array, axis=None) > limit) or bool(
        np.fmin.reduce(array, axis=None) < -limit
    )


def _two_norm(tensors: Iterable[Tensor | None]) -> float:
    """The 2-norm of all the tensors viewed as one vector (None entries skipped)."""
    return float(get_total_norm([t for t in tensors if t is not None], 2.0))


def _unit_norms(array: np.ndarray) -> np.ndarray:
    """2-norms of the units of a parameter, timm's ``unitwise_norm`` rule.

    An array of two or more dims has one unit per index of its first dim (an output row of a
    Linear weight), normed over all the other dims and shaped to broadcast against the array
    (keepdims); a vector or scalar (a bias, a gain) is a single unit.
    """
    if array.ndim <= 1:
        flat = array.reshape(-1)
        return np.sqrt(np.dot(flat, flat))
    rows = array.reshape(array.shape[0], math.prod(array.shape[1:]))  # -1 fails on 0 rows
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    return norms.reshape(array.shape[0], *(1,) * (array.ndim - 1))


def _agc_clip(param: Tensor, clipping: float, eps: float) -> tuple[float, float, bool]:
    """Clip one parameter's gradient unit-wise (Brock et al. 2021), in place.

    A unit whose gradient norm exceeds ``clipping * max(weight norm, eps)`` is scaled down to
    that norm, the others are left alone. Returns the gradient's squared 2-norm before and
    after, and whether any unit was scaled.
    """
    grad = param.grad
    if grad is None:
        return 0.0, 0.0, False
    grad_norm = _unit_norms(grad._data)
    max_norm = clipping * np.maximum(_unit_norms(param._data), eps)
    pre_sq = float(np.vdot(grad_norm, grad_norm))
    over = grad_norm > max_norm
    if not over.any():
        return pre_sq, pre_sq, False
    floor = np.maximum(grad_norm, _AGC_MIN_GRAD_NORM)
    scale = np.where(over, max_norm / floor, 1.0).astype(grad_norm.dtype)
    grad.mul_(hookgrad.from_numpy(scale))
    post_norm = grad_norm * scale
    return pre_sq, float(np.vdot(post_norm, post_norm)), True


def _json_float(value: float) -> float | None:
    """``value`` for a JSON record: None stands for nan and the infinities."""
    return value if math.isfinite(value) else None
