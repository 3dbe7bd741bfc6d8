"""Adadelta, as torch's for-loop implementation (``_single_tensor_adadelta``).

Per parameter with gradient ``g`` (``-g`` when maximizing)::

    g = g + weight_decay * p
    v = rho * v + (1 - rho) * g * g
    delta = sqrt(u + eps) / sqrt(v + eps) * g
    u = rho * u + (1 - rho) * delta * delta
    p = p - lr * delta
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np

from .._tensor import Tensor, _wrap
from ._checks import check_lr, check_nonnegative
from ._kernels import addcmul_, bump_step, decayed, step_counter
from ._per_parameter import PerParameterOptimizer
from .optimizer import ParamsT, _refuse_unsupported

__all__ = ["Adadelta"]


class _Hyper(NamedTuple):
    lr: float
    rho: float
    eps: float
    weight_decay: float
    maximize: bool


class Adadelta(PerParameterOptimizer):
    """Adadelta (Zeiler): step sizes from running averages of squared gradients and updates."""

    _group_defaults: ClassVar[dict[str, Any]] = {
        "foreach": None,
        "maximize": False,
        "differentiable": False,
        "capturable": False,
    }

    def __init__(
        self,
        params: ParamsT,
        lr: float | Tensor = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_nonnegative(eps=eps, weight_decay=weight_decay)
        _refuse_unsupported("Adadelta", capturable=capturable, differentiable=differentiable)
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "capturable": capturable,
            "foreach": foreach,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _hyper(self, group: dict[str, Any]) -> _Hyper:
        return _Hyper(
            float(group["lr"]),
            float(group["rho"]),
            float(group["eps"]),
            float(group["weight_decay"]),
            bool(group["maximize"]),
        )

    def _init_state(self, p_state: dict[str, Any], data: np.ndarray, group: dict[str, Any]) -> None:
        p_state["step"] = step_counter()
        p_state["square_avg"] = _wrap(np.zeros_like(data))
        p_state["acc_delta"] = _wrap(np.zeros_like(data))

    def _update(self, p: Tensor, grad: np.ndarray, p_state: dict[str, Any], h: _Hyper) -> None:
        bump_step(p_state)
        data = p._data
        grad = decayed(grad, data, h.weight_decay, h.maximize)
        square_avg = p_state["square_avg"]._data
        acc_delta = p_state["acc_delta"]._data
        square_avg *= h.rho
        addcmul_(square_avg, grad, grad, 1 - h.rho)
        std = square_avg + h.eps
        np.sqrt(std, out=std)
        delta = acc_delta + h.eps
        np.sqrt(delta, out=delta)
        delta /= std
        delta *= grad
        acc_delta *= h.rho
        addcmul_(acc_delta, delta, delta, 1 - h.rho)
        delta *= -h.lr
        data += delta
        p._vbox[0] += 1
