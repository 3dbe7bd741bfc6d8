"""hookgrad's plugin contract: the pluggy markers, the hook specifications, the payload models.

A plugin imports this package (and hookgrad's public tensor API), never engine internals::

    from hookgrad.hookspecs import PluginConfig, hookimpl


    class NormLogger:
        class Config(PluginConfig):
            every_n_steps: int = 1

        def __init__(self, config: Config) -> None:
            self.config = config

        @hookimpl
        def hookgrad_full_backward(self, event):
            ...

The specs live in :mod:`hookgrad.hookspecs.specs` (``pm.add_hookspecs(specs)``), the payloads
in :mod:`hookgrad.hookspecs.events`. Importing this package has no side effects and
``import hookgrad`` does not import it.
"""

from __future__ import annotations

from hookgrad.engines import grad_norms

from . import events, specs
from ._config import OnError, PluginAbort, PluginConfig
from ._errors import PluginError
from ._markers import PROJECT_NAME, hookimpl, hookspec
from ._order import Stage, call_order, stage
from ._stats import TENSOR_SUMMARY_SCHEMA, TensorSummary, tensor_stats
from .events import (
    HOOK_EVENTS,
    BackwardBeginEvent,
    BackwardEndEvent,
    BackwardPreEvent,
    Event,
    ForwardEvent,
    ForwardPreEvent,
    FullBackwardEvent,
    ModuleEvent,
    OptimizerStepPostEvent,
    OptimizerStepPreEvent,
    PluginRecord,
    RunEvent,
)

__all__ = [
    "HOOK_EVENTS",
    "PROJECT_NAME",
    "TENSOR_SUMMARY_SCHEMA",
    "BackwardBeginEvent",
    "BackwardEndEvent",
    "BackwardPreEvent",
    "Event",
    "ForwardEvent",
    "ForwardPreEvent",
    "FullBackwardEvent",
    "ModuleEvent",
    "OnError",
    "OptimizerStepPostEvent",
    "OptimizerStepPreEvent",
    "PluginAbort",
    "PluginConfig",
    "PluginError",
    "PluginRecord",
    "RunEvent",
    "Stage",
    "TensorSummary",
    "call_order",
    "events",
    "grad_norms",
    "hookimpl",
    "hookspec",
    "specs",
    "stage",
    "tensor_stats",
]
