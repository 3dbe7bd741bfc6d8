"""PyTorch's adapter: the runtime's engine interface on torch models (the only code importing torch).

Module, tensor and optimizer API are torch's own, which hookgrad mirrors; what torch lacks a
public hook for is built here: the backward observer (:mod:`._backward`), the optimizer step
gate (:mod:`._steps`), its agreement across the ranks of a distributed run (:mod:`._agreement`)
and module backward events that survive in-place modules (:mod:`._module_hooks`); the
numeric kernels the plugins share are in :mod:`._kernels`. Every reliance on torch's private
state sits in :mod:`._private`.
"""

from __future__ import annotations

from typing import Final

import torch

from . import _kernels, _private
from ._agreement import agree_on_step
from ._backward import observe_backward
from ._module_hooks import install_module_hooks, observe_module_calls, unwrap
from ._steps import gate_optimizer_steps, on_optimizer_step_post

__all__ = ["TorchEngine"]


class TorchEngine:
    """PyTorch (CPU, CUDA, DistributedDataParallel) as an engine of the runtime.

    Each method is a function of this package, bound here: the :class:`Engine` protocol
    documents them.
    """

    name: Final = "torch"
    api: Final = torch

    def owns(self, value: object) -> bool:
        return isinstance(value, torch.Tensor)

    # training-loop points and module calls
    observe_backward = staticmethod(observe_backward)
    gate_optimizer_steps = staticmethod(gate_optimizer_steps)
    on_optimizer_step_post = staticmethod(on_optimizer_step_post)
    agree_on_step = staticmethod(agree_on_step)
    install_module_hooks = staticmethod(install_module_hooks)
    observe_module_calls = staticmethod(observe_module_calls)
    unwrap = staticmethod(unwrap)

    # kernels
    summaries = staticmethod(_kernels.summaries)
    grad_norms = staticmethod(_kernels.grad_norms)
    total_norm_of = staticmethod(_kernels.total_norm_of)
    total_norms = staticmethod(_kernels.total_norms)
    clip_with_norm_ = staticmethod(_kernels.clip_with_norm_)
    clamp = staticmethod(_kernels.clamp)
    agc_clip_ = staticmethod(_kernels.agc_clip_)
    grad_summaries = staticmethod(_kernels.grad_summaries)
    histograms = staticmethod(_kernels.histograms)
    snapshot = staticmethod(_kernels.snapshot)
    restore_ = staticmethod(_kernels.restore_)
    diff_norms = staticmethod(_kernels.diff_norms)
    first_nonfinite = staticmethod(_kernels.first_nonfinite)
    nonfinite_counts = staticmethod(_kernels.nonfinite_counts)
    zero_nonfinite_ = staticmethod(_kernels.zero_nonfinite_)
    unscale_ = staticmethod(_kernels.unscale_)
    zero_units = staticmethod(_kernels.zero_units)
    dtype_name = staticmethod(_kernels.dtype_name)

    def running_loss_scaler(self) -> str | None:
        return "torch.amp.GradScaler" if _private.grad_scaler_stepping() else None

    def __repr__(self) -> str:
        return f"TorchEngine(torch {torch.__version__})"
