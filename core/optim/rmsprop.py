"""RMSprop, as torch's for-loop implementation (``_single_tensor_rmsprop``).

Per parameter with gradient ``g`` (``-g`` when maximizing)::

    g = g + weight_decay * p
    v = alpha * v + (1 - alpha) * g * g
    avg = sqrt(v)                                                  (plain)
    g_avg = lerp(g_avg, g, 1 - alpha); avg = sqrt(v - g_avg**2)    (centered)
    buf = momentum * buf + g / (avg + eps); p = p - lr * buf        (momentum > 0)
    p = p - lr * g / (avg + eps)                                    (otherwise)
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np

from .._tensor import Tensor, _wrap
from ._checks import check_lr, check_nonnegative
from ._kernels import addcdiv_, addcmul_, bump_step, decayed, lerp_, step_counter
from ._per_parameter import PerParameterOptimizer
from .optimizer import ParamsT, _refuse_unsupported

__all__ = ["RMSprop"]


class _Hyper(NamedTuple):
    lr: float
    alpha: float
    eps: float
    weight_decay: float
    momentum: float
    centered: bool
    maximize: bool


class RMSprop(PerParameterOptimizer):
    """RMSprop (Hinton), optionally centered (Graves) and with momentum; torch's defaults."""

    _group_defaults: ClassVar[dict[str, Any]] = {
        "momentum": 0,
        "centered": False,
        "foreach": None,
        "maximize": False,
        "differentiable": False,
        "capturable": False,
    }

    def __init__(
        self,
        params: ParamsT,
        lr: float | Tensor = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_lr(lr)
        check_nonnegative(eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        _refuse_unsupported("RMSprop", capturable=capturable, differentiable=differentiable)
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "alpha": alpha,
            "eps": eps,
            "centered": centered,
            "weight_decay": weight_decay,
            "capturable": capturable,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _hyper(self, group: dict[str, Any]) -> _Hyper:
        return _Hyper(
            float(group["lr"]),
            float(group["alpha"]),
            float(group["eps"]),
            float(group["weight_decay"]),
            float(group["momentum"]),
            bool(group["centered"]),
            bool(group["maximize"]),
        )

    def _init_state(self, p_state: dict[str, Any], data: np.ndarray, group: dict[str, Any]) -> None:
        p_state["step"] = step_counter()
        p_state["square_avg"] = _wrap(np.zeros_like(data))
        if group["momentum"] > 0:
            p_state["momentum_buffer"] = _wrap(np.zeros_like(data))
        if group["centered"]:
            p_state["grad_avg"] = _wrap(np.zeros_like(data))

    def _update(self, p: Tensor, grad: np.ndarray, p_state: dict[str, Any], h: _Hyper) -> None:
        bump_step(p_state)
        data = p._data
        grad = decayed(grad, data, h.weight_decay, h.maximize)
        square_avg = p_state["square_avg"]._data
        square_avg *= h.alpha
        addcmul_(square_avg, grad, grad, 1 - h.alpha)
        if h.centered:
            grad_avg = p_state["grad_avg"]._data
            lerp_(grad_avg, grad, 1 - h.alpha)
            avg = square_avg.copy()
            addcmul_(avg, grad_avg, grad_avg, -1)
            np.sqrt(avg, out=avg)
        else:
            avg = np.sqrt(square_avg)
        avg += h.eps
        if h.momentum > 0:
            buf = p_state["momentum_buffer"]._data
            buf *= h.momentum
            addcdiv_(buf, grad, avg)
            data += buf * -h.lr
        else:
            addcdiv_(data, grad, avg, -h.lr)
        p._vbox[0] += 1
