"""PyTorch's adapter: the runtime's engine interface on torch models (the only code importing torch).

Module, tensor and optimizer API are torch's own, which hookgrad mirrors; what torch lacks a
public hook for is built here: the backward observer (:mod:`._backward`), the optimizer step
gate (:mod:`._steps`), its agreement across the ranks of a distributed run (:mod:`._agreement`)
and module backward events that survive in-place modules (:mod:`._module_hooks`). Every reliance on torch's private state sits in :mod:`._private`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import torch

from ...hookspecs._stats import GradSummary, TensorSummary
from .._grad_norms import forget
from .._protocol import (
    BackwardBegin,
    BackwardEnd,
    Clamped,
    ModuleHooks,
    Removable,
    StepGate,
    StepPost,
)
from . import _kernels, _private
from ._agreement import agree_on_step
from ._backward import observe_backward
from ._kernels import agc_clip_, clamp, clip_with_norm_, summaries, total_norms
from ._module_hooks import install_module_hooks, observe_module_calls, unwrap
from ._steps import gate_optimizer_steps, on_optimizer_step_post

__all__ = ["TorchEngine"]


class TorchEngine:
    """PyTorch (CPU, CUDA, DistributedDataParallel) as an engine of the runtime."""

    name: Final = "torch"
    api: Final = torch

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

    # ------------------------------------------------------------------ module calls (bridge)
    def observe_module_calls(
        self, begin: Callable[[Any], None], end: Callable[[Any], None]
    ) -> Removable:
        return observe_module_calls(begin, end)

    def unwrap(self, module: Any) -> Any:
        return unwrap(module)

    # --- grad_clip kernels: total norms, clipping to a norm, by value, unit-wise (AGC) ---
    def total_norms(
        self,
        groups: Sequence[Sequence[Any]],
        norm_types: Sequence[float],
        error_if_nonfinite: bool = False,
    ) -> list[tuple[float, ...]]:
        return total_norms(groups, norm_types, error_if_nonfinite)

    def clip_with_norm_(self, tensors: Sequence[Any], max_norm: float, total_norm: float) -> float:
        return clip_with_norm_(tensors, max_norm, total_norm)

    def clamp(self, tensors: Sequence[Any], limit: float, *, in_place: bool) -> Clamped:
        return clamp(tensors, limit, in_place=in_place)

    def agc_clip_(
        self, weights: Sequence[Any], grads: Sequence[Any | None], clipping: float, eps: float
    ) -> tuple[float, float, bool]:
        return agc_clip_(weights, grads, clipping, eps)

    # ------------------------------------------------------------------ distributed agreement (ddp)
    def agree_on_step(self, optimizer: Any, vetoed_by: str | None, failed: bool) -> str | None:
        return agree_on_step(optimizer, vetoed_by, failed)

    # ------------------------------------------------------------------ grad_stats kernels
    def grad_summaries(self, tensors: Sequence[Any]) -> list[GradSummary | None]:
        return _kernels.grad_summaries(tensors)

    def histograms(
        self, tensors: Sequence[Any], bins: int, ranges: Sequence[tuple[float, float] | None]
    ) -> list[dict[str, list[Any]] | None]:
        return _kernels.histograms(tensors, bins, ranges)

    def snapshot(self, tensors: Sequence[Any]) -> list[Any]:
        return _kernels.snapshot(tensors)

    def diff_norms(
        self, after: Sequence[Any], before: Sequence[Any]
    ) -> list[tuple[float, float] | None]:
        return _kernels.diff_norms(after, before)

    # ---------------------------------------------------- finiteness and loss scaling
    # (nan_guard, grad_scale)
    def first_nonfinite(self, values: Sequence[Any], skip: Any = None) -> int | None:
        return _kernels.first_nonfinite(values, skip)

    def nonfinite_counts(self, tensors: Sequence[Any]) -> list[tuple[int, int]]:
        return _kernels.nonfinite_counts(tensors)

    def zero_nonfinite_(self, tensors: Sequence[Any]) -> int:
        return _kernels.zero_nonfinite_(tensors)

    def unscale_(self, tensors: Sequence[Any], inv_scale: float) -> bool:
        found_inf = _kernels.unscale_(tensors, inv_scale)
        forget(tensors)  # written with no version bump: their shared norms are stale
        return found_inf

    def dtype_name(self, tensor: Any) -> str:
        return _kernels.dtype_name(tensor)

    def running_loss_scaler(self) -> str | None:
        return "torch.amp.GradScaler" if _private.grad_scaler_stepping() else None

    # ------------------------------------------------------------------ gradient norms (summary)
    def grad_norms(self, tensors: Sequence[Any]) -> list[float | None]:
        return _kernels.grad_norms(tensors)

    def total_norm_of(self, tensors: Sequence[Any], norms: Sequence[float]) -> float | None:
        return _kernels.total_norm_of(tensors, norms)

    def __repr__(self) -> str:
        return f"TorchEngine(torch {torch.__version__})"
