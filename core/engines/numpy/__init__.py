"""The numpy engine's adapter: hookgrad's own hook points, which the engine was built with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ..._tensor import Tensor
from ...autograd._observers import register_backward_observer
from ...hookspecs._stats import TensorSummary, array_stats
from ...optim._hooks import register_optimizer_step_gate, register_optimizer_step_post_hook
from .._protocol import BackwardBegin, BackwardEnd, Removable, StepGate, StepPost

__all__ = ["NumpyEngine"]


class NumpyEngine:
    """hookgrad's numpy engine: every hook point the runtime needs is native here."""

    name: Final = "hookgrad"

    def owns(self, value: object) -> bool:
        return isinstance(value, Tensor)

    def summaries(self, tensors: Sequence[Any]) -> list[TensorSummary]:
        return [array_stats(t._data) for t in tensors]

    def observe_backward(self, begin: BackwardBegin | None, end: BackwardEnd | None) -> Removable:
        return register_backward_observer(begin, end)

    def gate_optimizer_steps(self, gate: StepGate) -> Removable:
        return register_optimizer_step_gate(gate)

    def on_optimizer_step_post(self, hook: StepPost) -> Removable:
        def post(optimizer: Any, args: Any, kwargs: Any) -> None:
            hook(optimizer)

        return register_optimizer_step_post_hook(post)

    # ------------------------------------------------------------------ distributed agreement (ddp)
    def agree_on_step(self, optimizer: Any, vetoed_by: str | None, failed: bool) -> str | None:
        """hookgrad's engine is never distributed: this process's verdict is the run's."""
        return vetoed_by

    def __repr__(self) -> str:
        return "NumpyEngine()"
