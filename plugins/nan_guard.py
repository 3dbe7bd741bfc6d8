"""``nan_guard``: name the module where NaN/Inf first appeared, then stop, warn or repair the step.

Detection is :meth:`~hookgrad.engines.Engine.first_nonfinite` over a batch of tensors (the
engine of the tensors at hand: dot-product screens on numpy, a long batch of small arrays
joined first; one fused norm screen on torch; a tensor met twice in a batch is screened once);
NaN and Inf are counted only for a tensor that is not finite, so the checks are cheap enough
to leave on.

* backward (``check_backward``): each module call's ``grad_output`` and ``grad_input`` are
  kept, in call order, and screened together in one kernel call when the backward ends (about
  one pass over the backward's gradients, each array once: the ``grad_input`` of one call is
  the very array the next one receives as ``grad_output``). Only when the screen finds NaN/Inf
  are the calls checked one by one, from the call holding the first bad gradient on:
  ``grad_output`` and then ``grad_input``. A call whose ``grad_output`` is finite but whose
  ``grad_input`` is not made the NaN/Inf itself (the *producer*); a call that received a
  non-finite ``grad_output`` only passed it on (a *propagator*). Backward runs from the loss
  towards the inputs, so the producer is reported first and the modules below it follow as
  propagators. The gradients are read as the backward left them: one that a hook wrote NaN
  into in place after its call counts with that NaN (the call whose ``grad_input`` it is is
  then the producer). The references are dropped when the backward ends; the calls of a
  backward that raised before its end are checked at the next backward or optimizer step,
  and calls outside an observed backward (``autograd.grad``) at once.
* forward (``check_forward``, off by default): each module's output, a producer when every
  tensor argument was finite.
* parameters (``check_parameters``): the selected parameter gradients at the step. When the
  checks above saw nothing, the owner of the first non-finite gradient (optimizer order) is named.
  The check reads the step's shared gradient norms (:func:`~hookgrad.hookspecs.grad_norms`),
  which grad_stats and grad_clip then reuse; a non-finite norm is confirmed entry by entry.

A container whose child already produced the NaN/Inf in the same phase is a propagator too:
the backward (and forward) hooks of children fire before their parent's, so the first producer
is always the innermost module. Every finding is recorded when it is found (a backward's when
that backward ends, before any error: the log has it even if training dies later); the action
is taken at ``hookgrad_optimizer_step_pre``, at stage GUARD:
after ``grad_scale`` unscaled the gradients and vetoed an overflowing step, so a loss-scaling
overflow never reaches the guard. ``action="raise"`` does not wait for a step that may never
come: a non-finite *forward* output raises at once, so that the traceback points at the model
code, and a backward finding at the end of that backward (``hookgrad_backward_end``), unless
a step implementation that runs before the guard (loss scaling) may still veto the step.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Self, TypeAlias

from pydantic import Field, field_validator, model_validator

import hookgrad
from hookgrad.engines import Engine, engine_of
from hookgrad.hookspecs import (
    BackwardBeginEvent,
    BackwardEndEvent,
    ForwardEvent,
    FullBackwardEvent,
    OptimizerStepPreEvent,
    PluginAbort,
    PluginConfig,
    Stage,
    call_order,
    grad_norms,
    hookimpl,
    stage,
)
from hookgrad.utils._warnings import user_stacklevel

__all__ = ["Finding", "NanGuard", "NonFiniteGradientError", "NonFiniteGradientWarning"]

PLUGIN_NAME: Final = "nan_guard"
_NAMES_SHOWN: Final = 3

Action: TypeAlias = Literal["raise", "warn", "zero", "skip_step"]
Phase: TypeAlias = Literal["forward", "backward", "step"]
Role: TypeAlias = Literal["producer", "propagator"]
Found: TypeAlias = tuple[Engine, Any]
"""A non-finite tensor and its engine."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One non-finite tensor: where it was seen, whose fault it looks like, how many bad entries."""

    module_name: str
    """Qualified name of the module call ("" is the root)."""
    phase: Phase
    """Where it was seen: "forward", "backward", or "step" (a parameter gradient)."""
    tensor: str
    """Which tensor: "output", "output[i]", "grad_output[i]", "grad_input[i]", "weight.grad"."""
    role: Role
    """Whose fault: "producer" (the inputs were finite) or "propagator" (a bad value came in)."""
    nan: int
    inf: int
    numel: int
    step: int

    @classmethod
    def of(
        cls, module_name: str, phase: Phase, label: str, role: Role, found: Found, step: int
    ) -> Finding:
        """The finding for the non-finite tensor ``found`` (its NaN and Inf are counted here)."""
        engine, tensor = found
        ((nan, inf),) = engine.nonfinite_counts((tensor,))
        return cls(module_name, phase, label, role, nan, inf, int(tensor.numel()), step)

    def record(self) -> dict[str, Any]:
        """The ``kind="nonfinite"`` PluginRecord of this finding."""
        data = {"phase": self.phase, "tensor": self.tensor, "role": self.role}
        counts = {"nan": self.nan, "inf": self.inf, "numel": self.numel}
        return _record("nonfinite", self.step, self.module_name, {**data, **counts})

    def describe(self, propagators: Sequence[str] = (), parameters: Sequence[str] = ()) -> str:
        """The message of the error or warning this finding headlines."""
        text = (
            f"non-finite {self.tensor} in module {self.module_name!r} ({self.role}, phase "
            f"{self.phase!r}, step {self.step}): nan={self.nan}, inf={self.inf} of "
            f"numel={self.numel}"
        )
        if propagators:
            text += f"; propagated through {_listed(propagators)}"
        if parameters:
            text += f"; non-finite gradients of parameters {_listed(parameters)}"
        return text


class NonFiniteGradientError(RuntimeError, PluginAbort):
    """nan_guard found NaN or Inf and its action is "raise"; the headline finding's fields.

    A :class:`~hookgrad.hookspecs.PluginAbort`: it propagates whatever the plugin's
    ``on_error``.

    ``role`` is "producer" unless the checks saw only propagators (a NaN already in the input
    batch, say): then the first of them is named. ``propagators`` lists the modules that passed
    the values on, in the order they were found; ``parameters`` the qualified names of the
    selected parameters whose ``.grad`` is non-finite, the headline module's first.
    """

    def __init__(
        self, finding: Finding, propagators: Sequence[str] = (), parameters: Sequence[str] = ()
    ) -> None:
        super().__init__(finding.describe(propagators, parameters))
        self.finding = finding
        self.propagators = tuple(propagators)
        self.parameters = tuple(parameters)
        self.module_name = finding.module_name
        self.phase = finding.phase
        self.tensor = finding.tensor
        self.role = finding.role
        self.nan = finding.nan
        self.inf = finding.inf
        self.numel = finding.numel
        self.step = finding.step

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with the finding (the default would call ``__init__`` with the message)."""
        return (type(self), (self.finding, self.propagators, self.parameters))


class NonFiniteGradientWarning(RuntimeWarning):
    """nan_guard found NaN or Inf and its action is "warn": the step goes on regardless."""


class NanGuard:
    """Find the module that produced NaN/Inf, record it, and raise, warn, zero or skip the step."""

    class Config(PluginConfig):
        action: Action = "raise"
        """At the step after a finding: "raise" NonFiniteGradientError, "warn" and step, "zero"
        the non-finite gradient entries and step, or "skip_step" (veto, drop the gradients)."""

        check_forward: bool = False
        """Check every module's output after forward; "raise" then raises at once."""

        check_backward: bool = True
        """Check grad_output and grad_input of every module call: this names the producer."""

        check_parameters: bool = True
        """Check the selected parameter gradients at the optimizer step."""

        max_records_per_step: int = Field(default=16, le=10_000)
        """Emit a nonfinite record for at most this many findings per step (0: none; at most
        10000, so one bad step cannot flood the sinks)."""

        @field_validator("max_records_per_step")
        @classmethod
        def _non_negative(cls, value: int) -> int:
            if value < 0:
                raise ValueError(f"max_records_per_step must be 0 or more, got {value}")
            return value

        @model_validator(mode="after")
        def _checks_something(self) -> Self:
            if not (self.check_forward or self.check_backward or self.check_parameters):
                raise ValueError(
                    "nan_guard with check_forward, check_backward and check_parameters all "
                    "false detects nothing; turn one on or disable the plugin"
                )
            return self

    def __init__(self, config: Config) -> None:
        self.config = config
        self.runtime: hookgrad.Runtime | None = None
        self._findings: list[Finding] = []
        self._step = -1  # the step _findings and _recorded belong to
        self._recorded = 0
        self._last_finite: object = None  # the tensor found finite last
        self._kept: list[FullBackwardEvent] | None = None  # the calls of the backward under way
        self._kept_grads: list[Any] = []  # their grad_output and grad_input, one after another
        # An implementation that exists costs every module call its hook machinery, even if it
        # returns at once: switched-off checks are not implemented at all (see the specs).
        if not config.check_forward:
            self.hookgrad_forward = None  # type: ignore[method-assign, assignment]
        if not config.check_backward:
            self.hookgrad_full_backward = None  # type: ignore[method-assign, assignment]
            self.hookgrad_backward_begin = None  # type: ignore[method-assign, assignment]
            self.hookgrad_backward_end = None  # type: ignore[method-assign, assignment]

    # ------------------------------------------------------------------ hooks
    @hookimpl
    def hookgrad_configure(self, runtime: hookgrad.Runtime) -> None:
        self.runtime = runtime

    @hookimpl
    def hookgrad_forward(self, event: ForwardEvent) -> None:
        output = event.output
        single = engine_of(output) is not None
        outputs = (output,) if single else output if isinstance(output, tuple | list) else ()
        found = self._first_nonfinite(outputs)
        if found is None:
            return
        inputs_finite = self._first_nonfinite((*event.args, *event.kwargs.values())) is None
        index, tensor = found
        role = self._role(event.module_name, "forward", event.step, inputs_finite)
        label = "output" if single else f"output[{index}]"
        finding = Finding.of(event.module_name, "forward", label, role, tensor, event.step)
        self._note(finding)
        if self.config.action == "raise":
            self._start(event.step)  # dealt with: a caught error leaves no stale finding
            raise NonFiniteGradientError(finding)

    @hookimpl
    def hookgrad_full_backward(self, event: FullBackwardEvent) -> None:
        """Keep the call's gradients for the check at the end of the backward (outside an
        observed backward, ``autograd.grad`` say, check them at once)."""
        kept = self._kept
        if kept is None:
            self._check_call(event)
            return
        kept.append(event)
        stored = event.__dict__  # the engine's tensors, not read-only aliases: only read here
        grads = self._kept_grads
        grads += stored["grad_output"]
        grads += stored["grad_input"]

    @hookimpl
    def hookgrad_backward_begin(self, event: BackwardBeginEvent) -> None:
        """A new backward: what an earlier one found is superseded (forward findings stay)."""
        self._check_kept()  # calls kept by a backward that raised before its end
        self._findings = [f for f in self._findings if f.phase != "backward"]
        self._last_finite = None
        self._kept, self._kept_grads = [], []

    @hookimpl
    def hookgrad_backward_end(self, event: BackwardEndEvent) -> None:
        """Check the backward's gradients; action="raise": a finding raises as it ends, step or
        no step."""
        self._check_kept()
        if self.config.action != "raise":
            return
        findings = self._current(event.step)
        if not findings or self._may_be_vetoed_first():
            return
        self._start(event.step)  # dealt with: a caught error leaves no stale finding
        headline, propagators = _headline(findings)
        named = self._named_parameters()
        raise NonFiniteGradientError(headline, propagators, _bad_parameters(named, headline))

    @hookimpl(tryfirst=True)
    @stage(Stage.GUARD)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> Literal[False] | None:
        self._check_kept()  # calls kept by a backward whose end was not seen
        findings = self._current(event.step) or self._parameter_findings(event)
        self._start(event.step)  # dealt with below, whatever happens
        if not findings:
            return None
        headline, propagators = _headline(findings)
        action = self.config.action
        if action == "raise":
            bad = _bad_parameters(event.parameters, headline)
            raise NonFiniteGradientError(headline, propagators, bad)
        if action == "warn":
            self._warn(headline, propagators)
        elif action == "zero":
            self._zero(event)
        else:
            return self._skip(event, headline)
        return None

    # ------------------------------------------------------------------ findings
    def _start(self, step: int) -> None:
        """Forget every finding: a fresh ``step`` begins (or the current one was dealt with)."""
        self._findings = []
        self._step = step
        self._recorded = 0
        self._last_finite = None

    def _current(self, step: int) -> list[Finding]:
        """The findings of ``step``; those of a step some other plugin vetoed are stale."""
        return self._findings if self._step == step else []

    def _note(self, finding: Finding) -> None:
        """Keep ``finding`` for the step's action and record it, up to the per-step cap."""
        if finding.step != self._step:
            self._start(finding.step)
        self._findings.append(finding)
        if self._recorded < self.config.max_records_per_step:
            self._recorded += 1
            self._emit(finding.record())

    def _check_kept(self) -> None:
        """Screen every gradient kept since the backward began in one kernel call; only if one
        is non-finite, replay the per-call checks, in call order, from the call holding it."""
        kept, grads = self._kept, self._kept_grads
        self._kept, self._kept_grads = None, []
        if not kept:
            return
        engine = _engine_in(grads)
        index = None if engine is None else engine.first_nonfinite(grads)
        if index is None:
            return
        self._last_finite = None
        for call in kept[_call_holding(kept, index) :]:
            self._check_call(call)

    def _check_call(self, event: FullBackwardEvent) -> None:
        """Check one module call's ``grad_output``, then its ``grad_input``, as one batch."""
        module_name, step, grad_output, grad_input = _gradients(event)
        found = self._first_nonfinite((*grad_output, *grad_input))
        if found is None:
            return
        index, tensor = found
        outputs = len(grad_output)
        role: Role = "propagator"
        if index < outputs:
            label = f"grad_output[{index}]"
        else:
            label = f"grad_input[{index - outputs}]"
            role = self._role(module_name, "backward", step, True)
        self._note(Finding.of(module_name, "backward", label, role, tensor, step))

    def _first_nonfinite(self, values: Sequence[object]) -> tuple[int, Found] | None:
        """The index of the first tensor in ``values`` with a NaN or Inf, and that tensor.

        Entries that are not tensors (None for a missing gradient, non-tensor arguments) are
        skipped, and so is the tensor found finite last: the last entry of the last batch
        found finite (unless that entry is None). In calls checked one by one, one call's
        ``grad_input`` is the next one's ``grad_output``.
        """
        engine = _engine_in(values)
        if engine is None:
            return None
        index = engine.first_nonfinite(values, self._last_finite)
        if index is not None:
            return index, (engine, values[index])
        if values[-1] is not None:
            self._last_finite = values[-1]
        return None

    def _role(self, module_name: str, phase: Phase, step: int, inputs_finite: bool) -> Role:
        """Producer if the inputs were finite and no submodule produced it first in ``phase``."""
        if not inputs_finite:
            return "propagator"
        prefix = f"{module_name}." if module_name else ""
        inner = (
            f.module_name
            for f in self._current(step)
            if f.role == "producer" and f.phase == phase and f.module_name != module_name
        )
        if any(name.startswith(prefix) for name in inner):
            return "propagator"
        return "producer"

    def _parameter_findings(self, event: OptimizerStepPreEvent) -> list[Finding]:
        """The owner of the first non-finite selected gradient (if ``check_parameters``)."""
        if not self.config.check_parameters:
            return []
        grads = [p.grad for _, p in event.parameters]
        engine = _engine_in(grads)
        index = None if engine is None else _first_nonfinite_grad(engine, grads)
        if engine is None or index is None:
            return []
        owner, _, local = event.parameters[index][0].rpartition(".")
        found = (engine, grads[index])
        finding = Finding.of(owner, "step", f"{local}.grad", "producer", found, event.step)
        self._note(finding)
        return [finding]

    def _may_be_vetoed_first(self) -> bool:
        """Whether an enabled step implementation runs before the guard's and may veto the
        step: a loss-scaling overflow is its business, so the guard waits for the step."""
        runtime = self.runtime
        if runtime is None:
            return False
        configs = runtime.plugin_configs
        for impl in call_order(runtime.pm, "hookgrad_optimizer_step_pre"):
            if impl.plugin is self:
                return False
            config = configs.get(impl.plugin_name)
            if config is None or config.enabled:
                return True
        return False

    def _named_parameters(self) -> list[tuple[str, Any]]:
        """The selected parameters of the models the runtime saw called (its naming roots),
        by qualified name: what a backward without an optimizer event can name."""
        if self.runtime is None:
            return []
        selects = self.config.selects
        named = []
        for root in self.runtime.bridge.naming_roots():
            for module_name, module in root.named_modules():
                if selects(module_name, type(module).__name__):
                    prefix = f"{module_name}." if module_name else ""
                    for key, p in module.named_parameters(recurse=False):
                        named.append((prefix + key, p))
        return named

    # ------------------------------------------------------------------ actions
    def _warn(self, headline: Finding, propagators: Sequence[str]) -> None:
        message = headline.describe(propagators)
        warnings.warn(NonFiniteGradientWarning(message), stacklevel=user_stacklevel())
        if self.runtime is not None:
            self.runtime.log.warning(
                "nonfinite", plugin=PLUGIN_NAME, step=headline.step, message=message
            )

    def _zero(self, event: OptimizerStepPreEvent) -> None:
        """Set the non-finite entries of the selected gradients to 0, in place."""
        grads = [p.grad for _, p in event.parameters]
        engine = _engine_in(grads)
        count = 0 if engine is None else engine.zero_nonfinite_(grads)
        self._emit(_record("zeroed", event.step, None, {"count": count}))

    def _skip(self, event: OptimizerStepPreEvent, headline: Finding) -> Literal[False]:
        """Veto the step and drop the selected gradients, so none is accumulated into the next."""
        for _, p in event.parameters:
            p.grad = None
        data = {"reason": "nonfinite", "module": headline.module_name}
        data |= {"phase": headline.phase, "tensor": headline.tensor}
        self._emit(_record("skip_step", event.step, None, data))
        return False

    def _emit(self, record: dict[str, Any]) -> None:
        if self.runtime is not None:
            self.runtime.emit(record)


# ---------------------------------------------------------------------- helpers
def _headline(findings: Sequence[Finding]) -> tuple[Finding, tuple[str, ...]]:
    """The finding an error or warning leads with (the first producer, else the first
    finding) and the modules that propagated the values, each once, in order."""
    headline = next((f for f in findings if f.role == "producer"), findings[0])
    propagators = (f.module_name for f in findings if f.role == "propagator" and f is not headline)
    return headline, tuple(dict.fromkeys(propagators))


def _first_nonfinite_grad(engine: Engine, grads: Sequence[Any]) -> int | None:
    """The index of the first gradient holding NaN or Inf, from the step's shared norms.

    A finite norm proves its gradient finite; a non-finite one is confirmed entry by entry
    (:meth:`Engine.first_nonfinite`), since huge finite entries overflow the norm too.
    """
    norms = grad_norms(grads)
    if None not in norms and math.isfinite(sum(norms)):  # type: ignore[arg-type]
        return None  # norms are >= 0: a finite sum means every one is finite
    suspects = [i for i, norm in enumerate(norms) if norm is not None and not math.isfinite(norm)]
    if not suspects:
        return None
    found = engine.first_nonfinite([grads[i] for i in suspects])
    return None if found is None else suspects[found]


def _gradients(event: FullBackwardEvent) -> tuple[str, int, tuple[Any, ...], tuple[Any, ...]]:
    """(module name, step, grad_output, grad_input) of a module call: the engine's tensors as
    the event stores them, not the read-only aliases a read of the fields makes (the guard
    only reads them, and an alias per tensor per call is what the check must not cost)."""
    stored = event.__dict__
    return event.module_name, event.step, stored["grad_output"], stored["grad_input"]


def _call_holding(calls: Sequence[FullBackwardEvent], index: int) -> int:
    """The position in ``calls`` of the call holding entry ``index`` of all their gradients
    (each call's ``grad_output``, then its ``grad_input``): the calls before it are finite."""
    remaining = index
    for position, event in enumerate(calls):
        _, _, grad_output, grad_input = _gradients(event)
        remaining -= len(grad_output) + len(grad_input)
        if remaining < 0:
            return position
    raise IndexError(f"entry {index} past the gradients of {len(calls)} calls")


def _bad_parameters(named: Sequence[tuple[str, Any]], headline: Finding) -> tuple[str, ...]:
    """The names of the parameters whose ``.grad`` is non-finite, the headline module's first
    (only on the way to an error: every gradient counted)."""
    owner = f"{headline.module_name}." if headline.module_name else ""
    grads = [p.grad for _, p in named]
    engine = _engine_in(grads)
    counts = [] if engine is None else engine.nonfinite_counts(grads)
    bad = [name for (name, _), (nan, inf) in zip(named, counts) if nan or inf]
    return tuple(sorted(bad, key=lambda name: not name.startswith(owner)))


def _engine_in(values: Iterable[object]) -> Engine | None:
    """The engine of the first tensor among ``values`` (None if there is none)."""
    for value in values:
        if value is not None:
            engine = engine_of(value)  # a dict lookup per type
            if engine is not None:
                return engine
    return None


def _listed(names: Sequence[str]) -> str:
    """``'a', 'b', 'c' and 2 more``: at most three names, quoted."""
    shown = ", ".join(repr(name) for name in names[:_NAMES_SHOWN])
    more = len(names) - _NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _record(kind: str, step: int, module_name: str | None, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "plugin": PLUGIN_NAME,
        "kind": kind,
        "step": step,
        "module_name": module_name,
        "data": data,
    }
