"""Adamax, as torch's for-loop implementation (``_single_tensor_adamax``).

Per parameter with gradient ``g`` (``-g`` when maximizing), at step ``t``::

    g = g + weight_decay * p
    m = lerp(m, g, 1 - beta1)
    u = max(beta2 * u, |g| + eps)
    p = p - lr / (1 - beta1**t) * m / u
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np

from .._tensor import Tensor, _wrap
from ._checks import check_betas, check_lr, check_nonnegative
from ._kernels import addcdiv_, bump_step, decayed, lerp_, step_counter
from ._per_parameter import PerParameterOptimizer
from .optimizer import ParamsT, _refuse_unsupported

__all__ = ["Adamax"]


class _Hyper(NamedTuple):
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    maximize: bool


class Adamax(PerParameterOptimizer):
    """Adamax (Kingma & Ba): Adam with the infinity norm in place of the second moment."""

    _group_defaults: ClassVar[dict[str, Any]] = {
        "foreach": None,
        "maximize": False,
        "differentiable": False,
        "capturable": False,
    }

    def __init__(
        self,
        params: ParamsT,
        lr: float | Tensor = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        check_lr(lr)
        check_nonnegative(eps=eps)
        check_betas(betas)
        check_nonnegative(weight_decay=weight_decay)
        _refuse_unsupported("Adamax", capturable=capturable, differentiable=differentiable)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def _hyper(self, group: dict[str, Any]) -> _Hyper:
        beta1, beta2 = group["betas"]
        return _Hyper(
            float(group["lr"]),
            float(beta1),
            float(beta2),
            float(group["eps"]),
            float(group["weight_decay"]),
            bool(group["maximize"]),
        )

    def _init_state(self, p_state: dict[str, Any], data: np.ndarray, group: dict[str, Any]) -> None:
        p_state["step"] = step_counter()
        p_state["exp_avg"] = _wrap(np.zeros_like(data))
        p_state["exp_inf"] = _wrap(np.zeros_like(data))

    def _update(self, p: Tensor, grad: np.ndarray, p_state: dict[str, Any], h: _Hyper) -> None:
        step = bump_step(p_state)
        data = p._data
        grad = decayed(grad, data, h.weight_decay, h.maximize)
        exp_avg = p_state["exp_avg"]._data
        exp_inf = p_state["exp_inf"]._data
        lerp_(exp_avg, grad, 1 - h.beta1)
        exp_inf *= h.beta2
        norm = np.abs(grad)
        norm += h.eps
        np.maximum(exp_inf, norm, out=exp_inf)
        clr = h.lr / (1 - h.beta1**step)
        addcdiv_(data, exp_avg, exp_inf, -clr)
        p._vbox[0] += 1
