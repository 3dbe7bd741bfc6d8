"""``spike_guard``: notice a loss or gradient-norm spike and skip, clip, roll back or stop.

Two signals, each with its own running statistics: ``loss``, the value of the backward's root
(the mean over the backwards since the last optimizer step, for gradient accumulation), and
``grad_norm``, the total 2-norm of the selected gradients at the step (from the step's shared
gradient norms). During the first ``warmup_steps`` optimizer steps nothing is decided: the
values are collected, and their mean and variance start the statistics. After it a value is a
*spike* when it is not finite or its z-score ``(value - mean) / std`` exceeds ``z``; the
statistics move on only with good values (an exponential moving mean and variance, rate
``ema``), so a spike does not teach the guard that spikes are normal. The rule follows ZClip
(Kumar et al., 2025).

The action (``action``, or per signal ``loss_action`` / ``grad_norm_action``):

* ``skip`` vetoes the optimizer step: parameters and optimizer state stay as they were;
* ``clip_to`` (``grad_norm`` only) scales the gradients so their total norm is
  ``mean + z * std`` and lets the step run;
* ``rollback`` vetoes the step and writes back the latest snapshot of the parameters and the
  optimizer's state (taken after every ``snapshot_every``-th good step), then multiplies the
  learning rate by ``lr_factor`` for ``cooldown`` steps; before the first snapshot it skips;
* ``stop`` raises :class:`SpikeError`.

When both signals spike, the stronger action is taken (stop, rollback, skip, clip_to).
``max_consecutive`` spikes in a row raise :class:`SpikeError` naming their steps, whatever the
action. The step counter keeps counting through skips and rollbacks. Every decision is a
record: ``skip_step`` (the vocabulary of nan_guard and grad_scale) with ``reason = "spike"``,
``spike_clipped`` with ``scale``, ``rolled_back`` with ``snapshot_step``; each carries the
signal, its value, z-score, mean and std.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Final, Literal, Self, TypeAlias

from pydantic import Field, model_validator

import hookgrad
from hookgrad.engines import Engine, engine_of
from hookgrad.hookspecs import (
    BackwardBeginEvent,
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginAbort,
    PluginConfig,
    Stage,
    grad_norms,
    hookimpl,
    stage,
)

__all__ = ["SpikeError", "SpikeGuard"]

NAME: Final = "spike_guard"
"""The entry-point name, every record's ``plugin``."""

Signal: TypeAlias = Literal["loss", "grad_norm"]
Action: TypeAlias = Literal["skip", "clip_to", "rollback", "stop"]
_STRENGTH: Final[dict[str, int]] = {"clip_to": 0, "skip": 1, "rollback": 2, "stop": 3}


class SpikeError(RuntimeError, PluginAbort):
    """Training stopped on a spike (``action = "stop"``) or on ``max_consecutive`` in a row."""


class SpikeGuard:
    """Skip, clip, roll back or stop on loss and gradient-norm spikes."""

    class Config(PluginConfig):
        """Which signals to watch, when a value is a spike, and what to do about it."""

        signals: tuple[Signal, ...] = Field(default=("loss", "grad_norm"), min_length=1)
        """The signals watched: the backward's loss and the total gradient norm."""

        ema: float = Field(default=0.98, gt=0, lt=1)
        """Rate of the running mean and variance: the weight the past keeps at each step."""

        warmup_steps: int = Field(default=20, ge=0, le=1_000_000)
        """Optimizer steps whose values only start the statistics: no decision during them."""

        z: float = Field(default=6.0, gt=0, allow_inf_nan=False)
        """A value more than ``z`` standard deviations above the mean is a spike."""

        action: Action = "skip"
        """skip | clip_to | rollback | stop: what a spike of any signal does (clip_to: only
        for grad_norm)."""

        loss_action: Action | None = None
        """The loss's own action, instead of ``action``."""

        grad_norm_action: Action | None = None
        """The gradient norm's own action, instead of ``action``."""

        snapshot_every: int = Field(default=50, ge=1)
        """rollback: a snapshot of parameters and optimizer state after every N-th good step."""

        lr_factor: float = Field(default=1.0, gt=0, allow_inf_nan=False)
        """rollback: the learning rate is multiplied by this for ``cooldown`` steps."""

        cooldown: int = Field(default=0, ge=0)
        """rollback: how many steps the learning rate stays multiplied by ``lr_factor``."""

        max_consecutive: int = Field(default=5, ge=1)
        """This many spikes in a row stop training with SpikeError, whatever the action."""

        @model_validator(mode="after")
        def _clip_to_is_for_gradients(self) -> Self:
            if "loss" in self.signals and self.action_of("loss") == "clip_to":
                raise ValueError(
                    "action 'clip_to' scales the gradients, so it applies to the grad_norm "
                    "signal only: set loss_action (skip, rollback or stop) or drop 'loss' "
                    "from signals"
                )
            return self

        def action_of(self, signal: Signal) -> Action:
            """What a spike of ``signal`` does."""
            own = self.loss_action if signal == "loss" else self.grad_norm_action
            return own or self.action

    def __init__(self, config: Config) -> None:
        self.config = config
        self.runtime: hookgrad.Runtime | None = None
        self._rolls_back = "rollback" in {config.action_of(s) for s in config.signals}
        self._reset()

    def _reset(self) -> None:
        self._stats = {signal: _Running() for signal in self.config.signals}
        self._losses: list[float] = []  # the backwards' losses since the last step
        self._spikes: list[int] = []  # the steps of the spikes in a row
        self._good_steps = 0
        self._snapshot: _Snapshot | None = None
        self._cooldown: _Cooldown | None = None
        self._values: dict[Signal, float] = {}  # this step's values, for the post hook

    # ------------------------------------------------------------------ hooks
    @hookimpl
    def hookgrad_configure(self, runtime: hookgrad.Runtime) -> None:
        self.runtime = runtime
        self._reset()  # a new run, also for an instance registered again

    @hookimpl
    def hookgrad_backward_begin(self, event: BackwardBeginEvent) -> None:
        """Note the loss (a root of one entry; a non-scalar root has no loss to watch)."""
        # The engine's tensor as the event stores it: reading the field would make a read-only
        # alias of it, and one float is all the guard reads.
        loss = event.__dict__["loss"]
        if "loss" in self._stats and loss.numel() == 1:
            self._losses.append(loss.item())

    @hookimpl
    @stage(Stage.GUARD)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> Literal[False] | None:
        """Judge this step's values; veto, clip or stop on a spike (after nan_guard)."""
        values = self._signal_values(event)
        self._values = values
        if event.step < self.config.warmup_steps:
            return None
        spikes = {
            signal: verdict
            for signal, value in values.items()
            if (verdict := self._stats[signal].judge(value, self.config.z)) is not None
        }
        if not spikes:
            self._spikes = []
            return None
        self._spikes.append(event.step)
        signal = max(spikes, key=lambda s: _STRENGTH[self.config.action_of(s)])
        action = self.config.action_of(signal)
        data = {"reason": "spike", "signal": signal, "value": values[signal], **spikes[signal]}
        if action == "stop" or len(self._spikes) >= self.config.max_consecutive:
            self._stop(event.step, data)
        if action == "clip_to":
            self._clip_to(event, data)
            return None
        if action == "rollback" and self._snapshot is not None:
            self._roll_back(event, data)
            return False
        self._emit("skip_step", event.step, data)
        return False

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: OptimizerStepPostEvent) -> None:
        """Teach the statistics this step's good values; snapshot; count the cooldown down."""
        values, self._values = self._values, {}
        self._losses = []
        spiked = bool(self._spikes) and self._spikes[-1] == event.step
        if not spiked:
            for signal, value in values.items():
                self._stats[signal].learn(value, self.config.ema, self.config.warmup_steps)
        if self._cooldown is not None and not event.skipped and self._cooldown.tick():
            self._cooldown = None  # cooled down: the rates are given back
        if event.skipped or spiked:
            return
        self._good_steps += 1
        if self._rolls_back and self._good_steps % self.config.snapshot_every == 0:
            self._snapshot = _Snapshot.take(event, self._good_steps)

    # ------------------------------------------------------------------ decisions
    def _signal_values(self, event: OptimizerStepPreEvent) -> dict[Signal, float]:
        values: dict[Signal, float] = {}
        if "loss" in self._stats and self._losses:
            values["loss"] = math.fsum(self._losses) / len(self._losses)
        if "grad_norm" in self._stats:
            grads = [g for _, p in event.parameters if (g := p.grad) is not None]
            if grads:
                norms = grad_norms(grads)
                values["grad_norm"] = math.hypot(*norms)  # type: ignore[arg-type]
        return values

    def _clip_to(self, event: OptimizerStepPreEvent, data: dict[str, Any]) -> None:
        """Scale the gradients so their total norm is mean + z * std."""
        target = data["mean"] + self.config.z * data["std"]
        grads = [g for _, p in event.parameters if (g := p.grad) is not None]
        scale = _engine(grads[0]).clip_with_norm_(grads, target, data["value"])
        self._emit("spike_clipped", event.step, {**data, "scale": scale})

    def _roll_back(self, event: OptimizerStepPreEvent, data: dict[str, Any]) -> None:
        """Write the snapshot back; the learning rate cools down if asked."""
        snapshot = self._snapshot
        assert snapshot is not None
        snapshot.restore(event)
        config = self.config
        if config.cooldown and config.lr_factor != 1.0 and event.optimizer is not None:
            if self._cooldown is not None:  # a rollback within a cooldown starts it over
                self._cooldown.end()
            self._cooldown = _Cooldown.start(event.optimizer, config.lr_factor, config.cooldown)
        self._emit("rolled_back", event.step, {**data, "snapshot_step": snapshot.step})

    def _stop(self, step: int, data: dict[str, Any]) -> None:
        self._emit("skip_step", step, data)
        steps = ", ".join(map(str, self._spikes))
        in_a_row = len(self._spikes)
        why = (
            f"{in_a_row} spikes in a row (steps {steps})"
            if in_a_row >= self.config.max_consecutive
            else f"a spike at step {step}"
        )
        raise SpikeError(
            f"{NAME}: training stopped on {why}: {data['signal']} = {data['value']!r}, "
            f"z = {data['z']!r} (mean {data['mean']!r}, std {data['std']!r})"
        )

    def _emit(self, kind: str, step: int, data: dict[str, Any]) -> None:
        if self.runtime is not None:
            self.runtime.emit(
                {"plugin": NAME, "kind": kind, "step": step, "module_name": None, "data": data}
            )


# ---------------------------------------------------------------------- statistics
@dataclass(slots=True)
class _Running:
    """One signal's running mean and variance, started from its warmup values."""

    mean: float = 0.0
    var: float = 0.0
    count: int = 0

    def judge(self, value: float, z_limit: float) -> dict[str, float | None] | None:
        """None for a good value; else the spike's z, mean and std (z None: not finite).

        A finite value is judged once two good values have given the signal a spread.
        """
        if not math.isfinite(value):
            return self._spike(None)
        if self.count < 2:
            return None
        std = math.sqrt(self.var)
        if std == 0.0:  # a constant signal so far: anything above it is off the scale
            return self._spike(math.inf) if value > self.mean else None
        z = (value - self.mean) / std
        return self._spike(z) if z > z_limit else None

    def _spike(self, z: float | None) -> dict[str, float | None]:
        finite = z if z is None or math.isfinite(z) else None
        return {"z": finite, "mean": self.mean, "std": math.sqrt(self.var)}

    def learn(self, value: float, ema: float, warmup_steps: int) -> None:
        """Take a good value in: averaged during the warmup, exponentially after it."""
        if not math.isfinite(value):
            return
        self.count += 1
        delta = value - self.mean
        if self.count <= max(warmup_steps, 2):  # Welford: the plain mean and variance so far
            self.mean += delta / self.count
            self.var += (delta * (value - self.mean) - self.var) / self.count
            return
        self.mean += (1.0 - ema) * delta
        self.var = ema * (self.var + (1.0 - ema) * delta * delta)


# ---------------------------------------------------------------------- rollback
@dataclass(frozen=True, slots=True)
class _Snapshot:
    """One copy of the selected parameters and of the optimizer's state, after a good step."""

    step: int
    parameters: tuple[Any, ...]
    values: tuple[Any, ...]
    optimizer: Any
    state: dict[str, Any] | None

    @classmethod
    def take(cls, event: OptimizerStepPostEvent, good_step: int) -> _Snapshot | None:
        params = tuple(p for _, p in event.parameters)
        if not params:
            return None
        optimizer = event.optimizer
        state = None if optimizer is None else copy.deepcopy(optimizer.state_dict())
        values = tuple(_engine(params[0]).snapshot(list(params)))
        return cls(event.step, params, values, optimizer, state)

    def restore(self, event: OptimizerStepPreEvent) -> None:
        _engine(self.parameters[0]).restore_(list(self.parameters), list(self.values))
        if self.state is not None and event.optimizer is self.optimizer:
            # A copy again: the optimizer takes the tensors it is given as its own state.
            self.optimizer.load_state_dict(copy.deepcopy(self.state))


@dataclass(slots=True)
class _Cooldown:
    """Learning rates multiplied for some steps after a rollback, then given back."""

    optimizer: Any
    rates: list[Any]
    left: int

    @classmethod
    def start(cls, optimizer: Any, factor: float, steps: int) -> _Cooldown:
        rates = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * factor
        return cls(optimizer, rates, steps)

    def tick(self) -> bool:
        """One step taken; True (and the rates given back) when the cooldown is over."""
        self.left -= 1
        if self.left > 0:
            return False
        self.end()
        return True

    def end(self) -> None:
        for group, rate in zip(self.optimizer.param_groups, self.rates, strict=False):
            group["lr"] = rate


def _engine(tensor: Any) -> Engine:
    engine = engine_of(tensor)
    if engine is None:
        raise TypeError(f"{NAME}: not a tensor of any engine: {type(tensor).__name__}")
    return engine
