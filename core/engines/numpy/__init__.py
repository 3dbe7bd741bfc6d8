"""The numpy engine's adapter: hookgrad's own hook points, which the engine was built with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ..._tensor import Tensor
from ...autograd._observers import register_backward_observer
from ...hookspecs._stats import TensorSummary, array_stats
from ...optim._hooks import register_optimizer_step_gate, register_optimizer_step_post_hook
from .._protocol import BackwardBegin, BackwardEnd, Removable, StepGate, StepPost
from . import _kernels

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

    # ---------------------------------------------------- finiteness and loss scaling
    # (nan_guard, grad_scale)
    def first_nonfinite(self, values: Sequence[Any], skip: Any = None) -> int | None:
        return _kernels.first_nonfinite(values, skip)

    def nonfinite_counts(self, tensors: Sequence[Any]) -> list[tuple[int, int]]:
        return _kernels.count_nonfinite(tensors)

    def zero_nonfinite_(self, tensors: Sequence[Any]) -> int:
        return _kernels.zero_nonfinite_(tensors)

    def unscale_(self, tensors: Sequence[Any], inv_scale: float) -> bool:
        return _kernels.unscale_(tensors, inv_scale)

    def dtype_name(self, tensor: Any) -> str:
        return _kernels.dtype_name(tensor)

    def running_loss_scaler(self) -> str | None:
        return None  # hookgrad has no loss scaler of its own

    def __repr__(self) -> str:
        return "NumpyEngine()"
