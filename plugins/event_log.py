"""``event_log``: the summaries of the hook events it hears, written to the runtime's sinks.

Each event becomes one record, ``{"plugin": "event_log", "kind": "event", "hook": event.hook,
**event.summary()}``: the event's scalar fields as they are and its tensors as
:class:`~hookgrad.hookspecs.TensorSummary` dicts, so a JSON-lines file (``[events] jsonl``)
holds a trace of what the model and the optimizer did, on the same step axis as the other
plugins' records. The plugin observes only: every hook returns None.

Every event hook is ``trylast``, so a record shows a value after the replacements of the other
plugins' implementations (except other ``trylast`` ones, which go in registration order). At
``hookgrad_optimizer_step_pre`` that places it after unscaling and the guard and before
``grad_clip`` (``trylast`` at ``Stage.CLIP``): the pre-step record holds the unclipped
gradients, the post-step record the clipped ones and the updated parameters.

Only the hooks chosen in ``hooks`` are implemented. The others are set to None on the instance,
so pluggy registers nothing for them and the runtime installs no engine hook on their account
(see :mod:`hookgrad.hookspecs.specs`): logging optimizer steps leaves module calls on the
engine's fast path.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from pydantic import Field, field_validator

from hookgrad.hookspecs import (
    HOOK_EVENTS,
    BackwardBeginEvent,
    BackwardEndEvent,
    BackwardPreEvent,
    ForwardEvent,
    ForwardPreEvent,
    FullBackwardEvent,
    ModuleEvent,
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginConfig,
    RunEvent,
    hookimpl,
)
from hookgrad.hookspecs.events import ModulePhase, RunPhase

if TYPE_CHECKING:
    import hookgrad
    from hookgrad.runtime import SinkSet

__all__ = ["ENVELOPE", "HOOK_OF_PHASE", "EventLog", "Phase"]

NAME: Final = "event_log"
"""The entry-point name, written as every record's ``plugin``."""

Phase: TypeAlias = Literal[ModulePhase, RunPhase]  # one flat Literal: one error lists all
"""An event hook by its payload's ``phase``: ``"backward"`` is ``hookgrad_full_backward``."""

HOOK_OF_PHASE: Final[Mapping[str, str]] = MappingProxyType(
    {model.model_fields["phase"].default: hook for hook, model in HOOK_EVENTS.items()}
)
"""Phase -> the hook whose payload carries it, read from the payload models themselves."""

ENVELOPE: Final = ("plugin", "kind", "hook")
"""The keys a record adds in front of the event's summary (no event field may use them)."""


class EventLog:
    """Writes ``event.summary()`` of every chosen hook event to the runtime's sinks."""

    class Config(PluginConfig):
        """What to log: which hooks, and on which steps."""

        hooks: tuple[Phase, ...] = ("backward",)
        """The events to write, by phase: forward_pre, forward, backward_pre, backward (the full
        backward hook), backward_begin, backward_end, optimizer_step_pre, optimizer_step_post."""

        every_n_steps: int = Field(default=1, ge=1)
        """Write the events of steps 0, N, 2N, ... only."""

        @field_validator("hooks")
        @classmethod
        def _at_least_one(cls, value: tuple[Phase, ...]) -> tuple[Phase, ...]:
            if not value:
                raise ValueError(
                    f"hooks must name at least one of {', '.join(HOOK_OF_PHASE)} "
                    "(enabled = false turns event_log off)"
                )
            return value

    def __init__(self, config: Config) -> None:
        self.config = config
        self._every = config.every_n_steps
        self._sinks: SinkSet | None = None
        for phase, hook in HOOK_OF_PHASE.items():
            if phase not in config.hooks:
                setattr(self, hook, None)  # no routine: pluggy registers nothing for it

    @hookimpl
    def hookgrad_configure(self, runtime: hookgrad.Runtime) -> None:
        self._sinks = runtime.sinks

    def _write(self, event: ModuleEvent | RunEvent) -> None:
        """Write one record for ``event``, unless its step is sampled out."""
        if event.step % self._every:
            return
        if self._sinks is None:
            raise RuntimeError(
                f"{NAME} has no sinks: hookgrad_configure(runtime) was not called; activate "
                "it through a hookgrad.Runtime"
            )
        self._sinks.write({"plugin": NAME, "kind": "event", "hook": event.hook, **event.summary()})

    # The eight event hooks, each switched off in __init__ unless chosen in ``hooks``. trylast:
    # a record shows the values the other plugins' replacements made, whatever the config order.
    @hookimpl(trylast=True)
    def hookgrad_forward_pre(self, event: ForwardPreEvent) -> None:
        self._write(event)

    @hookimpl(trylast=True)
    def hookgrad_forward(self, event: ForwardEvent) -> None:
        self._write(event)

    @hookimpl(trylast=True)
    def hookgrad_backward_pre(self, event: BackwardPreEvent) -> None:
        self._write(event)

    @hookimpl(trylast=True)
    def hookgrad_full_backward(self, event: FullBackwardEvent) -> None:
        self._write(event)

    @hookimpl(trylast=True)
    def hookgrad_backward_begin(self, event: BackwardBeginEvent) -> None:
        self._write(event)

    @hookimpl(trylast=True)
    def hookgrad_backward_end(self, event: BackwardEndEvent) -> None:
        self._write(event)

    @hookimpl(trylast=True)
    def hookgrad_optimizer_step_pre(self, event: OptimizerStepPreEvent) -> None:
        self._write(event)

    @hookimpl(trylast=True)
    def hookgrad_optimizer_step_post(self, event: OptimizerStepPostEvent) -> None:
        self._write(event)
