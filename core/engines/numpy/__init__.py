"""The numpy engine's adapter: hookgrad's own hook points, which the engine was built with."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Final, TypeVar

import numpy as np

from ..._tensor import Tensor
from ...autograd._observers import register_backward_observer
from ...hookspecs._stats import GradSummary, TensorSummary, array_stats
from ...nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from ...optim._hooks import register_optimizer_step_gate, register_optimizer_step_post_hook
from .._protocol import HandleGroup, Removable, StepPost
from . import _grad_stats, _kernels

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

    observe_backward = staticmethod(register_backward_observer)
    gate_optimizer_steps = staticmethod(register_optimizer_step_gate)

    def on_optimizer_step_post(self, hook: StepPost) -> Removable:
        def post(optimizer: Any, args: Any, kwargs: Any) -> None:
            hook(optimizer)

        return register_optimizer_step_post_hook(post)

    # ----------------------------------------------------------------------------- module calls
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

    # ------------------------------------------------------------------ distributed agreement
    def agree_on_step(self, optimizer: Any, vetoed_by: str | None, failed: bool) -> str | None:
        """hookgrad's engine is never distributed: this process's verdict is the run's."""
        return vetoed_by

    # ------------------------------------------------------------------ kernels
    grad_norms = staticmethod(_kernels.grad_norms)
    total_norm_of = staticmethod(_kernels.total_norm_of)
    total_norms = staticmethod(_kernels.total_norms)
    clip_with_norm_ = staticmethod(_kernels.clip_with_norm_)
    clamp = staticmethod(_kernels.clamp)
    agc_clip_ = staticmethod(_kernels.agc_clip_)
    first_nonfinite = staticmethod(_kernels.first_nonfinite)
    nonfinite_counts = staticmethod(_kernels.count_nonfinite)
    zero_nonfinite_ = staticmethod(_kernels.zero_nonfinite_)
    unscale_ = staticmethod(_kernels.unscale_)
    zero_units = staticmethod(_kernels.zero_units)
    dtype_name = staticmethod(_kernels.dtype_name)

    def running_loss_scaler(self) -> str | None:
        return None  # hookgrad has no loss scaler of its own

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

    def restore_(self, tensors: Sequence[Any], snapshots: Sequence[Any]) -> None:
        for tensor, kept in zip(tensors, snapshots, strict=True):
            np.copyto(tensor._data, kept)
            tensor._vbox[0] += 1

    def diff_norms(
        self, after: Sequence[Any], before: Sequence[Any]
    ) -> list[tuple[float, float] | None]:
        both = [a is not None and b is not None for a, b in zip(after, before, strict=True)]
        arrays = [a._data for a, ok in zip(after, both) if ok]
        norms = _grad_stats.diff_norms(arrays, [b for b, ok in zip(before, both) if ok])
        return norms if len(arrays) == len(both) else _spread(norms, both)  # type: ignore[return-value]

    def __repr__(self) -> str:
        return "NumpyEngine()"


def _spread(results: list[_T], kept: Sequence[bool]) -> list[_T | None]:
    """``results`` of the entries ``kept`` marks, in their places; None in the others."""
    found = iter(results)
    return [next(found) if keep else None for keep in kept]
