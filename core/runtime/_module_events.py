"""The four module-event payloads as the runtime builds them, for every producer of them.

The plugin bridge (:mod:`._bridge`) and scoped taps (:mod:`hookgrad._tap`) hand out the same
payloads: built with :meth:`~hookgrad.hookspecs.events.Event.trusted` (no validation: every
value is right by construction), every field given. One function per payload keeps the two
producers from drifting apart.
"""

from __future__ import annotations

from typing import Any

from ..hookspecs import BackwardPreEvent, ForwardEvent, ForwardPreEvent, FullBackwardEvent

__all__ = ["backward_pre_event", "forward_event", "forward_pre_event", "full_backward_event"]


def forward_pre_event(
    name: str,
    module_type: str,
    index: int,
    step: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> ForwardPreEvent:
    """The payload of ``hookgrad_forward_pre`` for call ``index`` of module ``name``."""
    return ForwardPreEvent.trusted(
        {
            "module_name": name,
            "module_type": module_type,
            "call_index": index,
            "step": step,
            "phase": "forward_pre",
            "args": args,
            "kwargs": kwargs,
        }
    )


def forward_event(
    name: str,
    module_type: str,
    index: int,
    step: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    output: Any,
) -> ForwardEvent:
    """The payload of ``hookgrad_forward`` for call ``index`` of module ``name``."""
    return ForwardEvent.trusted(
        {
            "module_name": name,
            "module_type": module_type,
            "call_index": index,
            "step": step,
            "phase": "forward",
            "args": args,
            "kwargs": kwargs,
            "output": output,
        }
    )


def backward_pre_event(
    name: str, module_type: str, index: int, step: int, grad_output: tuple[Any, ...]
) -> BackwardPreEvent:
    """The payload of ``hookgrad_backward_pre`` for the backward of call ``index``."""
    return BackwardPreEvent.trusted(
        {
            "module_name": name,
            "module_type": module_type,
            "call_index": index,
            "step": step,
            "phase": "backward_pre",
            "grad_output": grad_output,
        }
    )


def full_backward_event(
    name: str,
    module_type: str,
    index: int,
    step: int,
    grad_input: tuple[Any, ...],
    grad_output: tuple[Any, ...],
) -> FullBackwardEvent:
    """The payload of ``hookgrad_full_backward`` for the backward of call ``index``."""
    return FullBackwardEvent.trusted(
        {
            "module_name": name,
            "module_type": module_type,
            "call_index": index,
            "step": step,
            "phase": "backward",
            "grad_input": grad_input,
            "grad_output": grad_output,
        }
    )
