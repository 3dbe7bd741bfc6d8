"""The numpy engine's adapter: hookgrad's own hook points, which the engine was built with."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Final, TypeVar

from ..._tensor import Tensor
from ...autograd._observers import register_backward_observer
from ...hookspecs._stats import GradSummary, TensorSummary, array_stats
from ...nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from ...optim._hooks import register_optimizer_step_gate, register_optimizer_step_post_hook
from .._grad_norms import forget
from .._protocol import (
    BackwardBegin,
    BackwardEnd,
    Clamped,
    HandleGroup,
    Removable,
    StepGate,
    StepPost,
)
from . import _grad_stats, _kernels
from ._kernels import agc_clip_, clamp, clip_with_norm_, total_norms

__all__ = ["NumpyEngine"]

_T = TypeVar("_T")


class NumpyEngine:
    """hookgrad's numpy engine: every hook point the runtime needs is native here."""

    name: Final = "hookgrad"

    @property
    def api(self) -> ModuleType:
        return sys.modules["hookgrad"]

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

    # ------------------------------------------------------------------ module calls (bridge)
    def observe_module_calls(
        self, begin: Callable[[Any], None], end: Callable[[Any], None]
    ) -> Removable:
        return HandleGroup(
            (
                register_module_forward_pre_hook(lambda module, args: begin(module)),
                register_module_forward_hook(
                    lambda module, args, output=None: end(module), always_call=True
                ),
            )
        )

    def unwrap(self, module: Any) -> Any:
        return module  # hookgrad has no wrapper modules

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
        """hookgrad's engine is never distributed: this process's verdict is the run's."""
        return vetoed_by

    # ------------------------------------------------------------------ grad_stats kernels
    def grad_summaries(self, tensors: Sequence[Any]) -> list[GradSummary | None]:
        arrays = [t._data for t in tensors if t is not None]
        summaries = _grad_stats.grad_summaries(arrays)
        if len(arrays) == len(tensors):
            return summaries  # type: ignore[return-value]
        return _spread(summaries, [t is not None for t in tensors])

    def histograms(
        self, tensors: Sequence[Any], bins: int, ranges: Sequence[tuple[float, float] | None]
    ) -> list[dict[str, list[Any]] | None]:
        arrays = [None if t is None else t._data for t in tensors]
        return _grad_stats.histograms(arrays, bins, ranges)

    def snapshot(self, tensors: Sequence[Any]) -> list[Any]:
        return [None if t is None else t._data.copy() for t in tensors]

    def diff_norms(
        self, after: Sequence[Any], before: Sequence[Any]
    ) -> list[tuple[float, float] | None]:
        both = [a is not None and b is not None for a, b in zip(after, before, strict=True)]
        arrays = [a._data for a, ok in zip(after, both) if ok]
        norms = _grad_stats.diff_norms(arrays, [b for b, ok in zip(before, both) if ok])
        return norms if len(arrays) == len(both) else _spread(norms, both)  # type: ignore[return-value]

    # ---------------------------------------------------- finiteness and loss scaling
    # (nan_guard, grad_scale)
    def first_nonfinite(self, values: Sequence[Any], skip: Any = None) -> int | None:
        return _kernels.first_nonfinite(values, skip)

    def nonfinite_counts(self, tensors: Sequence[Any]) -> list[tuple[int, int]]:
        return _kernels.count_nonfinite(tensors)

    def zero_nonfinite_(self, tensors: Sequence[Any]) -> int:
        return _kernels.zero_nonfinite_(tensors)

    def unscale_(self, tensors: Sequence[Any], inv_scale: float) -> bool:
        found_inf = _kernels.unscale_(tensors, inv_scale)
        forget(tensors)  # written with no version bump: their shared norms are stale
        return found_inf

    def dtype_name(self, tensor: Any) -> str:
        return _kernels.dtype_name(tensor)

    def running_loss_scaler(self) -> str | None:
        return None  # hookgrad has no loss scaler of its own

    # ------------------------------------------------------------------ gradient norms (summary)
    def grad_norms(self, tensors: Sequence[Any]) -> list[float | None]:
        return _kernels.grad_norms(tensors)

    def total_norm_of(self, tensors: Sequence[Any], norms: Sequence[float]) -> float | None:
        return _kernels.total_norm_of(tensors, norms)

    def __repr__(self) -> str:
        return "NumpyEngine()"


def _spread(results: list[_T], kept: Sequence[bool]) -> list[_T | None]:
    """``results`` of the entries ``kept`` marks, in their places; None in the others."""
    found = iter(results)
    return [next(found) if keep else None for keep in kept]
