"""Adagrad, as torch's for-loop implementation (``_single_tensor_adagrad``, dense gradients).

Per parameter with gradient ``g`` (``-g`` when maximizing), at step ``t``::

    g = g + weight_decay * p
    clr = lr / (1 + (t - 1) * lr_decay)
    sum = sum + g * g
    p = p - clr * g / (sqrt(sum) + eps)

As in torch, the state (``step`` 0 and ``sum`` filled with ``initial_accumulator_value``) is
created for every parameter when the optimizer is built, not at its first gradient.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np

from .._tensor import Tensor, _wrap
from ._checks import check_lr, check_nonnegative
from ._kernels import addcdiv_, addcmul_, bump_step, decayed, step_counter
from ._per_parameter import PerParameterOptimizer
from .optimizer import ParamsT, _refuse_unsupported

__all__ = ["Adagrad"]


class _Hyper(NamedTuple):
    lr: float
    lr_decay: float
    eps: float
    weight_decay: float
    maximize: bool


class Adagrad(PerParameterOptimizer):
    """Adagrad (Duchi et al.) with torch's learning-rate decay and initial accumulator."""

    _group_defaults: ClassVar[dict[str, Any]] = {
        "foreach": None,
        "maximize": False,
        "differentiable": False,
        "fused": None,
    }

    def __init__(
        self,
        params: ParamsT,
        lr: float | Tensor = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        check_lr(lr)
        check_nonnegative(
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
        )
        _refuse_unsupported("Adagrad", differentiable=differentiable, fused=fused)
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "eps": eps,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                _fill_state(self.state[p], p._data, initial_accumulator_value)

    def _hyper(self, group: dict[str, Any]) -> _Hyper:
        return _Hyper(
            float(group["lr"]),
            float(group["lr_decay"]),
            float(group["eps"]),
            float(group["weight_decay"]),
            bool(group["maximize"]),
        )

    def _init_state(self, p_state: dict[str, Any], data: np.ndarray, group: dict[str, Any]) -> None:
        # A group added after construction: torch fills it from the optimizer's defaults.
        _fill_state(p_state, data, self.defaults["initial_accumulator_value"])

    def _update(self, p: Tensor, grad: np.ndarray, p_state: dict[str, Any], h: _Hyper) -> None:
        step = bump_step(p_state)
        data = p._data
        grad = decayed(grad, data, h.weight_decay, h.maximize)
        clr = h.lr / (1 + (step - 1) * h.lr_decay)
        state_sum = p_state["sum"]._data
        addcmul_(state_sum, grad, grad)
        std = np.sqrt(state_sum)
        std += h.eps
        addcdiv_(data, grad, std, -clr)
        p._vbox[0] += 1


def _fill_state(
    p_state: dict[str, Any], data: np.ndarray, initial_accumulator_value: float
) -> None:
    p_state["step"] = step_counter()
    p_state["sum"] = _wrap(np.full_like(data, initial_accumulator_value))
