"""RAdam, as torch's for-loop implementation (``_single_tensor_radam``).

Per parameter with gradient ``g`` (``-g`` when maximizing), at step ``t``::

    p = p * (1 - lr * weight_decay)   if decoupled   else   g = g + weight_decay * p
    m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
    rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
    p = p - lr * m / (1 - beta1**t) * sqrt(1 - beta2**t) / (sqrt(v) + eps) * r_t   (rho_t > 5)
    p = p - lr * m / (1 - beta1**t)                                               (otherwise)

with the variance rectification ``r_t`` of Liu et al.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np

from .._tensor import Tensor, _wrap
from ._checks import check_betas, check_lr, check_nonnegative
from ._kernels import addcmul_, bump_step, lerp_, step_counter, weight_decayed
from ._per_parameter import PerParameterOptimizer
from .optimizer import ParamsT, _refuse_unsupported

__all__ = ["RAdam"]


class _Hyper(NamedTuple):
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    decoupled: bool
    maximize: bool


class RAdam(PerParameterOptimizer):
    """RAdam (Liu et al.): Adam with a rectified adaptive lr; ``decoupled_weight_decay`` too."""

    _group_defaults: ClassVar[dict[str, Any]] = {
        "foreach": None,
        "maximize": False,
        "differentiable": False,
        "capturable": False,
        "decoupled_weight_decay": False,
    }

    def __init__(
        self,
        params: ParamsT,
        lr: float | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_lr(lr)
        check_nonnegative(eps=eps)
        check_betas(betas)
        check_nonnegative(weight_decay=weight_decay)
        _refuse_unsupported("RAdam", capturable=capturable, differentiable=differentiable)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "decoupled_weight_decay": decoupled_weight_decay,
            "differentiable": differentiable,
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
            bool(group["decoupled_weight_decay"]),
            bool(group["maximize"]),
        )

    def _init_state(self, p_state: dict[str, Any], data: np.ndarray, group: dict[str, Any]) -> None:
        p_state["step"] = step_counter()
        p_state["exp_avg"] = _wrap(np.zeros_like(data))
        p_state["exp_avg_sq"] = _wrap(np.zeros_like(data))

    def _update(self, p: Tensor, grad: np.ndarray, p_state: dict[str, Any], h: _Hyper) -> None:
        step = bump_step(p_state)
        grad = weight_decayed(p, grad, h.lr, h.weight_decay, h.decoupled, h.maximize)
        exp_avg = p_state["exp_avg"]._data
        exp_avg_sq = p_state["exp_avg_sq"]._data
        lerp_(exp_avg, grad, 1 - h.beta1)
        exp_avg_sq *= h.beta2
        addcmul_(exp_avg_sq, grad, grad, 1 - h.beta2)
        bias_correction1 = 1 - h.beta1**step
        bias_correction2 = 1 - h.beta2**step
        update = exp_avg / bias_correction1
        update *= h.lr
        rho_inf = 2 / (1 - h.beta2) - 1
        rho_t = rho_inf - 2 * step * h.beta2**step / bias_correction2
        if rho_t > 5.0:
            # Python scalar / tensor is reciprocal(tensor) * scalar in torch.
            adaptive_lr = np.sqrt(exp_avg_sq)
            adaptive_lr += h.eps
            np.reciprocal(adaptive_lr, out=adaptive_lr)
            adaptive_lr *= bias_correction2**0.5
            update *= adaptive_lr
            update *= (
                (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            ) ** 0.5
        p._data -= update
        p._vbox[0] += 1
