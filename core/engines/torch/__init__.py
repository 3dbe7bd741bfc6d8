"""PyTorch's adapter: the runtime's engine interface on torch models (the only code importing torch).

Module, tensor and optimizer API are torch's own, which hookgrad mirrors; what torch lacks a
public hook for is built here: the backward observer (:mod:`._backward`), the optimizer step
gate (:mod:`._steps`) and module backward events that survive in-place modules
(:mod:`._module_hooks`). Every reliance on torch's private state sits in :mod:`._private`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import torch

from ...hookspecs._stats import TensorSummary
from .._protocol import BackwardBegin, BackwardEnd, ModuleHooks, Removable, StepGate, StepPost
from . import _kernels, _private
from ._backward import observe_backward
from ._kernels import summaries
from ._module_hooks import install_module_hooks
from ._steps import gate_optimizer_steps, on_optimizer_step_post

__all__ = ["TorchEngine"]


class TorchEngine:
    """PyTorch (CPU, CUDA, DistributedDataParallel) as an engine of the runtime."""

    name: Final = "torch"

    def owns(self, value: object) -> bool:
        return isinstance(value, torch.Tensor)

    def install_module_hooks(self, hooks: ModuleHooks, *, backward: bool) -> Removable:
        """Call ``hooks`` around every module call, and (``backward``) route each call's
        backward events to what its ``forward_pre`` returned (see :mod:`._module_hooks`)."""
        return install_module_hooks(hooks, backward=backward)

    def summaries(self, tensors: Sequence[Any]) -> list[TensorSummary]:
        return summaries(tensors)

    def observe_backward(self, begin: BackwardBegin | None, end: BackwardEnd | None) -> Removable:
        return observe_backward(begin, end)

    def gate_optimizer_steps(self, gate: StepGate) -> Removable:
        return gate_optimizer_steps(gate)

    def on_optimizer_step_post(self, hook: StepPost) -> Removable:
        return on_optimizer_step_post(hook)

    # ---------------------------------------------------- finiteness and loss scaling
    # (nan_guard, grad_scale)
    def first_nonfinite(self, values: Sequence[Any], skip: Any = None) -> int | None:
        return _kernels.first_nonfinite(values, skip)

    def nonfinite_counts(self, tensors: Sequence[Any]) -> list[tuple[int, int]]:
        return _kernels.nonfinite_counts(tensors)

    def zero_nonfinite_(self, tensors: Sequence[Any]) -> int:
        return _kernels.zero_nonfinite_(tensors)

    def unscale_(self, tensors: Sequence[Any], inv_scale: float) -> bool:
        return _kernels.unscale_(tensors, inv_scale)

    def dtype_name(self, tensor: Any) -> str:
        return _kernels.dtype_name(tensor)

    def running_loss_scaler(self) -> str | None:
        return "torch.amp.GradScaler" if _private.grad_scaler_stepping() else None

    def __repr__(self) -> str:
        return f"TorchEngine(torch {torch.__version__})"
