"""``grad_scale``: dynamic loss scaling (``torch.amp.GradScaler`` as a plugin), or a constant
factor on the gradients flowing into chosen modules.

``mode = "dynamic"`` (the default) spreads GradScaler over the training-loop hooks, so a plain
``loss.backward(); optimizer.step()`` loop gets loss scaling without calling a scaler:

* ``hookgrad_backward_begin`` multiplies the seed gradient by the scale (``scaler.scale(loss)``);
* ``hookgrad_optimizer_step_pre`` (tryfirst, :attr:`Stage.UNSCALE`: before ``nan_guard``,
  ``grad_stats`` and ``grad_clip``, which must see true gradients) multiplies every gradient by
  ``1 / scale`` in place and vetoes the step if any was inf or NaN (``scaler.step``), or if
  the scale underflowed so far that ``1 / scale`` is inf (torch would step with NaN gradients);
* ``hookgrad_optimizer_step_post`` backs the scale off after an overflow and grows it after
  ``growth_interval`` clean steps (``scaler.update``).

The arithmetic is that of torch's CPU kernels, so the scale sequence is torch's bit for bit: a
float32 scale, its reciprocal rounded to float32, products computed in float64 and rounded to
float32, growth that stops short of inf. Loss scaling must unscale every gradient it scaled,
so dynamic mode refuses module selectors. On torch models the tensor work runs through the
engine's kernels (torch's own unscale kernel, on the gradients' devices), and a
``torch.amp.GradScaler`` stepping the optimizer as well is refused
(:class:`LossScalerConflictError`): the loss would be scaled twice.

``mode = "constant"`` multiplies the ``grad_output`` of every selected module call by
``factor`` (a full backward pre-hook), so the gradients of that module's parameters and of
everything upstream of it are scaled, as torch's ``register_module_full_backward_pre_hook``
would do it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, Self, TypeAlias

import numpy as np
from pydantic import Field, JsonValue, field_validator, model_validator

import hookgrad
from hookgrad.engines import engine_of
from hookgrad.hookspecs import (
    BackwardBeginEvent,
    BackwardPreEvent,
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginAbort,
    PluginConfig,
    Stage,
    hookimpl,
    stage,
)

__all__ = ["GradScale", "LossScalerConflictError"]

NAME: Final = "grad_scale"
"""The entry-point name, written as every record's ``plugin``."""

Mode: TypeAlias = Literal["constant", "dynamic"]

_FLOAT32_MAX: Final = float(np.finfo(np.float32).max)
_SELECTORS: Final = ("modules", "exclude", "module_types")
_MODE_FIELDS: Final[Mapping[Mode, tuple[str, ...]]] = {
    "constant": ("factor",),
    "dynamic": ("init_scale", "growth_factor", "backoff_factor", "growth_interval"),
}
_MODE_HOOKS: Final[Mapping[Mode, tuple[str, ...]]] = {
    "constant": ("hookgrad_backward_pre",),
    "dynamic": (
        "hookgrad_backward_begin",
        "hookgrad_optimizer_step_pre",
        "hookgrad_optimizer_step_post",
    ),
}


def _other(mode: Mode) -> Mode:
    return "dynamic" if mode == "constant" else "constant"


class _LossScaler:
    """GradScaler's state and arithmetic, as torch's CPU kernels compute them."""

    __slots__ = ("backoff_factor", "growth_factor", "growth_interval", "growth_tracker", "scale")

    def __init__(
        self,
        scale: float,
        growth_factor: float,
        backoff_factor: float,
        growth_interval: int,
        growth_tracker: int = 0,
    ) -> None:
        self.scale = np.float32(scale)  # torch keeps the scale in a float32 tensor
        self.growth_factor = growth_factor
        self.backoff_factor = backoff_factor
        self.growth_interval = growth_interval
        self.growth_tracker = growth_tracker

    @classmethod
    def from_config(cls, config: GradScale.Config, growth_tracker: int = 0) -> _LossScaler:
        return cls(
            config.init_scale,
            config.growth_factor,
            config.backoff_factor,
            config.growth_interval,
            growth_tracker,
        )

    def inv_scale(self) -> np.float32 | None:
        """``scale.double().reciprocal().float()``, torch's unscale factor; None where that is
        inf: the scale underflowed to 0, or below ``1 / float32 max`` (about 2.9e-39).

        Equal to the float32 reciprocal: float64 has more than 2 * 24 + 2 bits, so rounding
        through it never changes a float32 quotient.
        """
        with np.errstate(divide="ignore", over="ignore"):
            inv = np.float32(np.float64(1.0) / np.float64(self.scale))
        return inv if np.isfinite(inv) else None

    def update(self, found_inf: bool) -> None:
        """``torch._amp_update_scale_``: back off after an overflow, grow after
        ``growth_interval`` consecutive clean steps (never to inf: then the scale stays)."""
        if found_inf:
            self.scale = np.float32(float(self.scale) * self.backoff_factor)
            self.growth_tracker = 0
            return
        self.growth_tracker += 1
        # ==, as torch: a tracker loaded above the interval never grows the scale again
        if self.growth_tracker == self.growth_interval:
            with np.errstate(over="ignore"):
                grown = np.float32(float(self.scale) * self.growth_factor)
            if np.isfinite(grown):
                self.scale = grown
            self.growth_tracker = 0


class LossScalerConflictError(RuntimeError, PluginAbort):
    """grad_scale in dynamic mode runs while the engine's own loss scaler (torch's
    ``torch.amp.GradScaler``) steps the optimizer: the loss would be scaled twice.

    A :class:`~hookgrad.hookspecs.PluginAbort`: it propagates whatever the plugin's
    ``on_error``, since going on would train on gradients still ``scale`` times too large.
    """

    def __init__(self, scaler: str, step: int) -> None:
        super().__init__(
            f"{NAME} (dynamic) and {scaler} both scale the loss; use one: drop the {scaler} "
            f"calls, or disable {NAME} (or set mode = 'constant') (optimizer step {step})"
        )
        self.scaler = scaler
        self.step = step

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with the constructor's arguments (the default would pass the message)."""
        return (type(self), (self.scaler, self.step))


class GradScale:
    """Loss scaling with torch's GradScaler semantics, or a constant per-module gradient factor."""

    class Config(PluginConfig):
        """Which scaling, and its factors; dynamic-mode defaults are torch.amp.GradScaler's."""

        mode: Mode = "dynamic"
        """"dynamic": scale the loss and unscale before the step, adapting the scale to
        overflows (GradScaler). "constant": multiply the gradient flowing into each selected
        module by `factor`."""

        factor: float = Field(default=0.1, allow_inf_nan=False)
        """constant mode: the multiplier of each selected module's grad_output (negative
        reverses the gradient)."""

        init_scale: float = Field(default=2.0**16, gt=0, le=_FLOAT32_MAX, allow_inf_nan=False)
        """dynamic mode: the first loss scale (kept as float32)."""

        growth_factor: float = Field(default=2.0, gt=1, allow_inf_nan=False)
        """dynamic mode: the scale is multiplied by this after `growth_interval` clean steps."""

        backoff_factor: float = Field(default=0.5, gt=0, lt=1)
        """dynamic mode: the scale is multiplied by this after a step with inf/NaN gradients."""

        growth_interval: int = Field(default=2000, ge=1)
        """dynamic mode: consecutive steps without inf/NaN gradients before the scale grows."""

        @field_validator("factor")
        @classmethod
        def _nonzero(cls, value: float) -> float:
            if value == 0:
                raise ValueError(
                    "factor must be nonzero (0 would erase the gradients); enabled = false turns "
                    "grad_scale off"
                )
            return value

        @model_validator(mode="after")
        def _consistent_with_mode(self) -> Self:
            other = _other(self.mode)
            stray = [name for name in _MODE_FIELDS[other] if name in self.model_fields_set]
            if stray:
                raise ValueError(
                    f"{', '.join(stray)} only apply to mode={other!r}, but mode is {self.mode!r}"
                )
            if self.mode == "dynamic":
                defaults = PluginConfig.model_fields
                changed = [n for n in _SELECTORS if getattr(self, n) != defaults[n].default]
                if changed:
                    raise ValueError(
                        f"mode='dynamic' scales the loss, hence every gradient, and must unscale "
                        f"them all: {', '.join(changed)} must keep the default; use "
                        "mode='constant' to scale the gradients of some modules"
                    )
            return self

    def __init__(self, config: Config) -> None:
        self.config = config
        self.runtime: hookgrad.Runtime | None = None
        self._dynamic = config.mode == "dynamic"
        self._scaler = _LossScaler.from_config(config)
        self._scaled = False
        """A backward seeded with the scale ran since the last unscale."""
        self._found_inf: bool | None = None
        """What this step's unscale found; None until it ran."""
        for hook in _MODE_HOOKS[_other(config.mode)]:
            setattr(self, hook, None)  # no routine: pluggy registers nothing for it

    # ------------------------------------------------------------------ public state
    @property
    def scale(self) -> float:
        """The current loss scale; 1.0 in constant mode, which scales no loss (as a disabled
        GradScaler reports)."""
        return float(self._scaler.scale) if self._dynamic else 1.0

    def state_dict(self) -> dict[str, float | int]:
        """GradScaler's checkpoint entries; empty in constant mode (a disabled GradScaler's)."""
        if not self._dynamic:
            return {}
        s = self._scaler
        return {
            "scale": float(s.scale),
            "growth_factor": s.growth_factor,
            "backoff_factor": s.backoff_factor,
            "growth_interval": s.growth_interval,
            "_growth_tracker": s.growth_tracker,
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict` (or a GradScaler's); a no-op in constant mode.

        The values are validated as the config fields they correspond to (ValidationError).
        """
        if not self._dynamic:
            return
        if not state_dict:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved in constant mode "
                "or from a disabled GradScaler."
            )
        checked = GradScale.Config(
            init_scale=state_dict["scale"],
            growth_factor=state_dict["growth_factor"],
            backoff_factor=state_dict["backoff_factor"],
            growth_interval=state_dict["growth_interval"],
        )
        self._scaler = _LossScaler.from_config(checked, int(state_dict["_growth_tracker"]))

    # ------------------------------------------------------------------ hooks
    @hookimpl
    def hookgrad_configure(self, runtime: hookgrad.Runtime) -> None:
        self.runtime = runtime
        if not self._dynamic:  # constant mode records its factor once, not per module call
            self._emit("scale", runtime.step, {"mode": "constant", "factor": self.config.factor})

    @hookimpl
    def hookgrad_backward_pre(self, event: BackwardPreEvent) -> tuple[Any, ...]:
        factor = self.config.factor
        return tuple(None if g is None else g * factor for g in event.grad_output)

    @hookimpl
    def hookgrad_backward_begin(self, event: BackwardBeginEvent) -> Any:
        """The seed times the scale, on the loss's engine, device and dtype."""
        self._scaled = True
        scale = float(self._scaler.scale)
        # The engine's tensors as the event stores them: a read of the fields would make
        # read-only aliases of them, for a product that reads them only.
        fields = event.__dict__
        gradient, loss = fields["gradient"], fields["loss"]
        if gradient is None:
            return loss.new_full(loss.shape, scale)
        return gradient * scale

    @hookimpl(tryfirst=True)
    @stage(Stage.UNSCALE)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> Literal[False] | None:
        # Unscale only gradients scaled since the last unscale: a step retried after an error,
        # or taken twice without a backward, is checked but not divided by the scale again.
        # An underflowed scale has no finite unscale factor: torch would multiply by inf and
        # step with NaN gradients; the step is skipped instead, the scale updated as torch's.
        inv_scale = self._scaler.inv_scale()
        self._found_inf = self._unscale(event, inv_scale if self._scaled else None)
        self._scaled = False
        if inv_scale is None:
            reason = "scale_underflow"
        elif self._found_inf:
            reason = "overflow"
        else:
            return None
        self._emit("skip_step", event.step, {"reason": reason, "scale": self.scale})
        return False

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: OptimizerStepPostEvent) -> None:
        if self._scaled and not event.skipped:
            raise RuntimeError(
                f"{NAME}: optimizer step {event.step} used gradients it had not unscaled: a "
                "backward ran inside optimizer.step() (a closure, which mode='dynamic' does not "
                "support, as torch's GradScaler does not), or the unscale failed"
            )
        found_inf, self._found_inf = self._found_inf, None
        before = self.scale
        self._emit("scale", event.step, {"scale": before, "found_inf": found_inf})
        if found_inf is None:  # vetoed before the unscale stage: no overflow information
            return
        self._scaler.update(found_inf)
        after = self.scale
        if found_inf or after != before:
            kind = "backoff" if found_inf else "growth"
            self._emit(kind, event.step, {"scale_from": before, "scale_to": after})

    # ------------------------------------------------------------------ helpers
    def _unscale(self, event: OptimizerStepPreEvent, inv_scale: np.float32 | None) -> bool:
        """Whether any gradient holds inf or NaN (checked before unscaling, as torch does);
        unless ``inv_scale`` is None, multiply every gradient by it in place."""
        engine = engine_of(event.parameters[0][1]) if event.parameters else None
        if engine is None:
            return False
        scaler = engine.running_loss_scaler()
        if scaler is not None:
            raise LossScalerConflictError(scaler, event.step)
        grads = [g for _, p in event.parameters if (g := p.grad) is not None]
        if any(engine.dtype_name(g) == "float16" for g in grads):
            raise ValueError("Attempting to unscale FP16 gradients.")
        if inv_scale is None:
            return engine.first_nonfinite(grads) is not None
        return engine.unscale_(grads, float(inv_scale))

    def _emit(self, kind: str, step: int, data: dict[str, JsonValue]) -> None:
        if self.runtime is None:
            raise RuntimeError(
                f"{NAME} has no runtime: hookgrad_configure(runtime) was not called; activate "
                "it through a hookgrad.Runtime"
            )
        self.runtime.emit({"plugin": NAME, "kind": kind, "step": step, "data": data})
