"""The optimizer step gate and post hook for torch optimizers.

torch's step pre-hooks cannot skip a step; they can only replace the step's arguments. The
gate is therefore one global step pre-hook, kept at the front of torch's global pre-hooks so it
runs before any other: when a gate vetoes, it hands the step a stand-in ``self`` that owns no
parameter and no state (:func:`~._private.step_stand_in`) and no closure. The optimizer's
step function then runs over nothing: no parameter, no state entry and no step count changes,
and no closure is evaluated.

Unlike on hookgrad's engine, the step hooks registered with torch (global and per optimizer)
still run around a vetoed step, as they do around any call of ``step()``; they see the stand-in
as ``args[0]``. The runtime's own post hook knows a vetoed step by that stand-in and stays
silent. An optimizer whose step needs a closure (``LBFGS``) cannot be vetoed this way.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from ...optim._hooks import _gate_allows
from ...utils.hooks import HookDict, RemovableHandle
from .._protocol import Removable, StepGate, StepPost
from . import _private
from ._compile import eager_only

__all__ = ["gate_optimizer_steps", "on_optimizer_step_post"]

_GATES: HookDict = HookDict()  # handle id -> gate, in registration order
_pre_hook: Any = None  # torch's handle of the one pre-hook that asks the gates


def gate_optimizer_steps(gate: StepGate) -> RemovableHandle:
    """Register ``gate``; the handle's ``remove()`` unregisters it."""
    global _pre_hook
    handle = _GateHandle(_GATES)
    _GATES[handle.id] = gate
    if _pre_hook is None:
        _pre_hook = register_optimizer_step_pre_hook(_ask_gates)
    _private.move_to_front(_pre_hook)
    return handle


class _GateHandle(RemovableHandle):
    """Removing the last gate removes the pre-hook from torch."""

    def remove(self) -> None:
        global _pre_hook
        super().remove()
        if not _GATES and _pre_hook is not None:
            _pre_hook.remove()
            _pre_hook = None


@eager_only
def _ask_gates(
    optimizer: torch.optim.Optimizer, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    for gate in tuple(_GATES.values()):
        if not _gate_allows(gate, cast(Any, optimizer)):
            stand_in = _private.step_stand_in(optimizer)
            rest = tuple(None for _ in args[1:])  # the closure, if passed by position
            return (stand_in, *rest), {**kwargs, **dict.fromkeys(kwargs.keys() & {"closure"})}
    return None


def on_optimizer_step_post(hook: StepPost) -> Removable:
    """Call ``hook(optimizer)`` after each step taken, after every other post hook."""

    @eager_only
    def post(optimizer: torch.optim.Optimizer, args: tuple[Any, ...], _: Any) -> None:
        if not args or args[0] is optimizer:  # a vetoed step ran on a stand-in
            hook(optimizer)

    return register_optimizer_step_post_hook(post)
