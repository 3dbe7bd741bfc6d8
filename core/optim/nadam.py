"""NAdam, as torch's for-loop implementation (``_single_tensor_nadam``).

Per parameter with gradient ``g`` (``-g`` when maximizing), at step ``t``::

    p = p * (1 - lr * weight_decay)   if decoupled   else   g = g + weight_decay * p
    mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay));  prod = prod * mu_t
    m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
    denom = sqrt(v / (1 - beta2**t)) + eps
    p = p - lr * (1 - mu_t) / (1 - prod) * g / denom
    p = p - lr * mu_{t+1} / (1 - prod * mu_{t+1}) * m / denom
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np

from .._tensor import Tensor, _wrap
from ._checks import check_betas, check_lr, check_nonnegative
from ._kernels import addcdiv_, addcmul_, bump_step, lerp_, step_counter, weight_decayed
from ._per_parameter import PerParameterOptimizer
from .optimizer import ParamsT, _refuse_unsupported

__all__ = ["NAdam"]


class _Hyper(NamedTuple):
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    momentum_decay: float
    decoupled: bool
    maximize: bool


class NAdam(PerParameterOptimizer):
    """NAdam (Dozat): Adam with Nesterov momentum; ``decoupled_weight_decay`` gives NAdamW."""

    _group_defaults: ClassVar[dict[str, Any]] = {
        "maximize": False,
        "foreach": None,
        "capturable": False,
        "differentiable": False,
        "decoupled_weight_decay": False,
    }

    def __init__(
        self,
        params: ParamsT,
        lr: float | Tensor = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
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
        check_nonnegative(weight_decay=weight_decay, momentum_decay=momentum_decay)
        _refuse_unsupported("NAdam", capturable=capturable, differentiable=differentiable)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum_decay": momentum_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for p_state in self.state.values():
            if p_state and not isinstance(p_state.get("mu_product", 1.0), Tensor):
                p_state["mu_product"] = step_counter(float(p_state["mu_product"]))

    def _hyper(self, group: dict[str, Any]) -> _Hyper:
        beta1, beta2 = group["betas"]
        return _Hyper(
            float(group["lr"]),
            float(beta1),
            float(beta2),
            float(group["eps"]),
            float(group["weight_decay"]),
            float(group["momentum_decay"]),
            bool(group["decoupled_weight_decay"]),
            bool(group["maximize"]),
        )

    def _init_state(self, p_state: dict[str, Any], data: np.ndarray, group: dict[str, Any]) -> None:
        p_state["step"] = step_counter()
        p_state["mu_product"] = step_counter(1.0)
        p_state["exp_avg"] = _wrap(np.zeros_like(data))
        p_state["exp_avg_sq"] = _wrap(np.zeros_like(data))

    def _update(self, p: Tensor, grad: np.ndarray, p_state: dict[str, Any], h: _Hyper) -> None:
        step = bump_step(p_state)
        bias_correction2 = 1 - h.beta2**step
        grad = weight_decayed(p, grad, h.lr, h.weight_decay, h.decoupled, h.maximize)
        mu = h.beta1 * (1.0 - 0.5 * 0.96 ** (step * h.momentum_decay))
        mu_next = h.beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * h.momentum_decay))
        mu_product_t = p_state["mu_product"]._data
        mu_product_t *= mu
        mu_product = float(mu_product_t)
        exp_avg = p_state["exp_avg"]._data
        exp_avg_sq = p_state["exp_avg_sq"]._data
        lerp_(exp_avg, grad, 1 - h.beta1)
        exp_avg_sq *= h.beta2
        addcmul_(exp_avg_sq, grad, grad, 1 - h.beta2)
        denom = exp_avg_sq / bias_correction2
        np.sqrt(denom, out=denom)
        denom += h.eps
        mu_product_next = mu_product * mu_next
        data = p._data
        addcdiv_(data, grad, denom, -h.lr * (1.0 - mu) / (1.0 - mu_product))
        addcdiv_(data, exp_avg, denom, -h.lr * mu_next / (1.0 - mu_product_next))
        p._vbox[0] += 2
