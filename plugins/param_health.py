"""``param_health``: the parameters that never learn, found at the optimizer step.

Four kinds, each judged over the last ``window`` optimizer steps taken (a vetoed step counts
for nothing: its gradients may have been dropped and nothing moved):

* ``unused``: the parameter's gradient was None at each of them (what makes DDP ask for
  ``find_unused_parameters``);
* ``dead``: units of a weight (a parameter of two or more dims) whose gradient was exactly
  zero at each of them, as a fraction of its units, reported under the module owning the
  weight. A unit is an index of the first dim (an output row of a Linear's weight, an output
  channel of a Conv's, :meth:`~hookgrad.engines.Engine.zero_units`), so a Linear whose
  following ReLU never fires for some outputs is reported as that Linear;
* ``frozen`` / ``exploding``: weights whose update-to-weight ratio ``||W_after - W_before||
  / ||W_before||`` stayed below ``frozen_below`` / above ``exploding_above`` (a ratio that is
  not finite counts as above: the weights blew up). Vectors are not judged: a bias or a
  norm's gain may sit near zero, where any healthy step is large next to it.

A step on which a weight has no gradient breaks its runs of the other three kinds. The
parameters are the ones the plugin's module selection keeps, with the qualified names the
runtime gives them (``encoder.0.weight``); a parameter's module is its name before the last
dot. Everything is read in ``hookgrad_optimizer_step_post``, from the gradients the step used;
the weights are copied in ``hookgrad_optimizer_step_pre`` (after every plugin that may veto)
for the ratio. :meth:`ParamHealth.report` says what holds now; the same report is a
``health_report`` record when the runtime stops.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Self

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hookgrad.engines import Engine, engine_of
from hookgrad.hookspecs import (
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginConfig,
    grad_norms,
    hookimpl,
)

if TYPE_CHECKING:
    from hookgrad import Runtime

__all__ = ["DeadUnits", "HealthReport", "ParamHealth"]

NAME: Final = "param_health"
"""The entry-point name, every record's ``plugin``."""


class DeadUnits(BaseModel):
    """A weight some of whose units' gradients stayed exactly zero for ``window`` steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    module: str
    """The qualified name of the module owning the weight ("" is the root)."""
    param: str
    """The weight's qualified name (``encoder.0.weight``)."""
    fraction: float
    """The dead units over all its units, above 0."""


class HealthReport(BaseModel):
    """The unhealthy parameters by kind, by qualified name in the optimizer's order; a
    healthy parameter is in no list."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    unused: list[str]
    """Gradient None at each of the last ``window`` steps."""
    dead: list[DeadUnits]
    """Weights with units whose gradient was exactly zero at each of the last ``window`` steps."""
    frozen: list[str]
    """Weights whose update-to-weight ratio was below ``frozen_below`` at each of the last
    ``window`` steps."""
    exploding: list[str]
    """Weights whose update-to-weight ratio was above ``exploding_above`` (or not finite) at
    each of the last ``window`` steps."""

    def table(self) -> str:
        """The report as aligned plain text, one row per finding (kind, parameter, module,
        dead fraction), for a summary printed at the end of a run."""
        rows = [("kind", "parameter", "module", "dead")]
        rows += [("unused", name, name.rpartition(".")[0], "-") for name in self.unused]
        rows += [("dead", d.param, d.module, f"{d.fraction:.1%}") for d in self.dead]
        rows += [("frozen", name, name.rpartition(".")[0], "-") for name in self.frozen]
        rows += [("exploding", name, name.rpartition(".")[0], "-") for name in self.exploding]
        if len(rows) == 1:
            return f"{NAME}: every watched parameter is healthy"
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        return "\n".join(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows
        )


class ParamHealth:
    """Find unused parameters, dead units, frozen and exploding parameters."""

    class Config(PluginConfig):
        """How long a condition must last, and the update-ratio limits."""

        window: int = Field(default=20, ge=1, le=1_000_000)
        """Optimizer steps in a row a condition must hold before it is reported."""

        frozen_below: float = Field(default=1e-7, ge=0, allow_inf_nan=False)
        """An update-to-weight ratio below this is a frozen step."""

        exploding_above: float = Field(default=1e-1, gt=0, allow_inf_nan=False)
        """An update-to-weight ratio above this (or not finite) is an exploding step."""

        @model_validator(mode="after")
        def _limits_in_order(self) -> Self:
            if self.frozen_below >= self.exploding_above:
                raise ValueError(
                    f"frozen_below ({self.frozen_below!r}) must be below exploding_above "
                    f"({self.exploding_above!r}): a ratio cannot be both frozen and exploding"
                )
            return self

    def __init__(self, config: Config) -> None:
        self.config = config
        self.runtime: Runtime | None = None
        self._reset()

    def _reset(self) -> None:
        # name -> steps in a row with the condition (names with none are absent)
        self._unused: dict[str, int] = {}
        self._frozen: dict[str, int] = {}
        self._exploding: dict[str, int] = {}
        self._dead = _UnitRuns()  # per unit of each weight, its zero steps in a row
        self._order: dict[str, int] = {}  # name -> position, in the order first seen
        self._before: _Before | None = None  # what step_pre kept for the update ratios

    # ------------------------------------------------------------------ hooks
    @hookimpl
    def hookgrad_configure(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._reset()  # a new run, also for an instance registered again

    @hookimpl(trylast=True)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        """Keep what the update ratios need of the weights the step will move. Never vetoes.

        Under plain SGD (no momentum, no weight decay) the update is ``lr * grad``: only the
        weight's norm is kept, and the update's norm comes from the gradient's at the post
        hook. Any other optimizer's weights are copied, to be compared after the step.
        """
        rates = _plain_sgd_rates(event.optimizer)
        sgd: list[tuple[str, Any]] = []
        copied: list[tuple[str, Any]] = []
        for name, p in event.parameters:
            if p.grad is not None and p.ndim >= 2:
                (sgd if id(p) in rates else copied).append((name, p))
        if not sgd and not copied:
            self._before = None
            return
        engine = _engine((sgd or copied)[0][1])
        bases = engine.grad_norms([p for _, p in sgd]) if sgd else []
        snapshots = engine.snapshot([p for _, p in copied]) if copied else []
        self._before = _Before(
            {name: (rates[id(p)], base) for (name, p), base in zip(sgd, bases, strict=True)},
            {name: snap for (name, _), snap in zip(copied, snapshots, strict=True)},
        )

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: OptimizerStepPostEvent) -> None:
        """Count this step's gradients and updates into the runs (a vetoed step: nothing)."""
        before, self._before = self._before, None
        if event.skipped:
            return
        unused, frozen, exploding = self._unused, self._frozen, self._exploding
        order = self._order
        weights: dict[str, Any] = {}
        for name, p in event.parameters:
            order.setdefault(name, len(order))
            grad = p.grad
            if grad is None:
                unused[name] = unused.get(name, 0) + 1
                frozen.pop(name, None)  # (its dead runs go with this step's layout)
                exploding.pop(name, None)
                continue
            unused.pop(name, None)
            if grad.ndim >= 2:
                weights[name] = p
        if not weights:
            self._dead.count((), [])
            return
        grads = [p.grad for p in weights.values()]
        engine = _engine(grads[0])
        self._dead.count(tuple(weights), engine.zero_units(grads))
        if before is not None:
            self._count_ratios(engine, before, weights)

    @hookimpl
    def hookgrad_unconfigure(self, runtime: Runtime) -> None:
        """The run's last word: the report as a ``health_report`` record."""
        runtime.emit({"plugin": NAME, "kind": "health_report", "data": self.report().model_dump()})

    # ------------------------------------------------------------------ the report
    def report(self) -> HealthReport:
        """What holds now: each parameter whose condition lasted the last ``window`` steps."""
        window = self.config.window
        dead = []
        for name, runs in self._ordered(dict(self._dead.items())):
            count = int(np.count_nonzero(runs >= window))
            if count:
                module = name.rpartition(".")[0]
                dead.append(DeadUnits(module=module, param=name, fraction=count / runs.size))
        return HealthReport(
            unused=self._lasting(self._unused, window),
            dead=dead,
            frozen=self._lasting(self._frozen, window),
            exploding=self._lasting(self._exploding, window),
        )

    def _ordered(self, runs: dict[str, Any]) -> list[tuple[str, Any]]:
        """The items of ``runs`` in the optimizers' order of the parameters."""
        return sorted(runs.items(), key=lambda item: self._order[item[0]])

    def _lasting(self, runs: dict[str, int], window: int) -> list[str]:
        return [name for name, steps in self._ordered(runs) if steps >= window]

    # ------------------------------------------------------------------ counting
    def _count_ratios(
        self,
        engine: Engine,
        before: _Before,
        weights: dict[str, Any],
    ) -> None:
        """The update ratio of each weight kept before the step that still has a gradient."""
        sgd = [(name, rate) for name, rate in before.sgd.items() if name in weights]
        if sgd:
            # The step's shared gradient norms: computed already if another plugin asked.
            norms = grad_norms([weights[name].grad for name, _ in sgd])
            for (name, (lr, base)), norm in zip(sgd, norms, strict=True):
                if norm is not None and base is not None:
                    self._judge(name, _ratio(lr * norm, base))
        kept = [(name, snap) for name, snap in before.copied.items() if name in weights]
        if kept:
            after = [weights[name] for name, _ in kept]
            moves = engine.diff_norms(after, [snap for _, snap in kept])
            for (name, _), move in zip(kept, moves, strict=True):
                if move is not None:
                    self._judge(name, _ratio(*move))

    def _judge(self, name: str, ratio: float) -> None:
        """One step's update ratio of weight ``name`` into its frozen and exploding runs."""
        frozen, exploding = self._frozen, self._exploding
        if ratio < self.config.frozen_below:
            frozen[name] = frozen.get(name, 0) + 1
            exploding.pop(name, None)
        elif not ratio <= self.config.exploding_above:  # above, or NaN
            exploding[name] = exploding.get(name, 0) + 1
            frozen.pop(name, None)
        else:
            frozen.pop(name, None)
            exploding.pop(name, None)


class _UnitRuns:
    """Per unit of each weight, the steps in a row its gradient was all zeros.

    The weights of a step are laid end to end in one array, so a step costs three numpy
    calls however many weights there are; the layout follows the step's weights (one that
    had no gradient leaves it, and its runs are gone)."""

    __slots__ = ("names", "runs", "starts")

    def __init__(self) -> None:
        self.names: tuple[str, ...] = ()
        self.starts: list[int] = [0]
        self.runs = np.zeros(0, np.int64)

    def count(self, names: tuple[str, ...], zero: list[Any]) -> None:
        """One step: the runs of the units flagged in ``zero`` grow, the others restart."""
        flags = zero[0] if len(zero) == 1 else np.concatenate(zero) if zero else self.runs[:0]
        if names != self.names or len(flags) != len(self.runs):
            self._lay_out(names, [len(z) for z in zero])
        self.runs += 1
        self.runs *= flags

    def items(self) -> list[tuple[str, np.ndarray]]:
        """(weight name, its units' runs) in the layout's order."""
        starts = self.starts
        return [(n, self.runs[a:b]) for n, a, b in zip(self.names, starts, starts[1:])]

    def _lay_out(self, names: tuple[str, ...], sizes: list[int]) -> None:
        kept = dict(self.items())
        parts = [
            runs
            if (runs := kept.get(name)) is not None and len(runs) == size
            else np.zeros(size, np.int64)
            for name, size in zip(names, sizes, strict=True)
        ]
        self.names = names
        self.starts = [0, *itertools.accumulate(sizes)]
        self.runs = np.concatenate(parts) if parts else np.zeros(0, np.int64)


@dataclass(frozen=True, slots=True)
class _Before:
    """What the update ratios need from before the step, by weight name."""

    sgd: dict[str, tuple[float, float | None]]
    """Weights under plain SGD: (learning rate, norm before the step)."""
    copied: dict[str, Any]
    """The other weights: their engine snapshots."""


def _plain_sgd_rates(optimizer: Any) -> dict[int, float]:
    """id(parameter) -> learning rate for the parameters that ``optimizer``, a torch or
    hookgrad SGD, updates by ``-lr * grad`` alone (no momentum, no weight decay; ``maximize``
    only flips the sign). Empty for any other optimizer."""
    kind = type(optimizer)
    if kind.__name__ != "SGD" or kind.__module__.partition(".")[0] not in ("torch", "hookgrad"):
        return {}
    rates: dict[int, float] = {}
    for group in optimizer.param_groups:
        if group.get("momentum", 1) == 0 and group.get("weight_decay", 1) == 0:
            lr = float(group["lr"])
            for p in group["params"]:
                rates[id(p)] = lr
    return rates


def _ratio(moved: float, base: float) -> float:
    """``moved / base``: a weight of norm 0 that stayed put did not move (0), one that moved
    moved infinitely far relative to it."""
    if base == 0.0:
        return 0.0 if moved == 0.0 else math.inf
    return moved / base


def _engine(tensor: Any) -> Engine:
    engine = engine_of(tensor)
    if engine is None:
        raise TypeError(f"{NAME}: not a tensor of any engine: {type(tensor).__name__}")
    return engine
