"""Adam, as torch's for-loop implementation (``_single_tensor_adam``), with AdamW's decoupled decay.

Per parameter with gradient ``g`` (``-g`` when maximizing), at step ``t``::

    p = p * (1 - lr * weight_decay)     if decoupled    else    g = g + weight_decay * p
    m = lerp(m, g, 1 - beta1)
    v = beta2 * v + (1 - beta2) * g * g
    v_max = max(v_max, v)               (amsgrad; used in place of v below)
    denom = sqrt(v) / sqrt(1 - beta2**t) + eps
    p = p - lr / (1 - beta1**t) * m / denom
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._tensor import Tensor, _wrap
from ._checks import check_betas, check_lr, check_nonnegative
from ._kernels import lerp_, step_counter
from ._per_parameter import steps_as_tensors
from .optimizer import Optimizer, ParamsT, _refuse_unsupported

__all__ = ["Adam"]


class _Hyper(NamedTuple):
    """One group's options, read once per step."""

    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    amsgrad: bool
    maximize: bool
    decoupled: bool


class Adam(Optimizer):
    """Adam (Kingma & Ba) with optional AMSGrad; ``decoupled_weight_decay=True`` gives AdamW."""

    def __init__(
        self,
        params: ParamsT,
        lr: float | Tensor = 1e-3,
        betas: tuple[float | Tensor, float | Tensor] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        _validate(lr, betas, eps, weight_decay)
        _refuse_unsupported(
            type(self).__name__, capturable=capturable, differentiable=differentiable, fused=fused
        )
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
            "fused": fused,
            "decoupled_weight_decay": decoupled_weight_decay,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)
            group.setdefault("differentiable", False)
            group.setdefault("decoupled_weight_decay", False)
            group.setdefault("fused", None)
        steps_as_tensors(self)

    def _step_group(self, group: dict[str, Any]) -> None:
        beta1, beta2 = group["betas"]
        hyper = _Hyper(
            float(group["lr"]),
            float(beta1),
            float(beta2),
            float(group["eps"]),
            float(group["weight_decay"]),
            bool(group["amsgrad"]),
            bool(group["maximize"]),
            bool(group["decoupled_weight_decay"]),
        )
        state = self.state
        for p in group["params"]:
            g = p._grad
            if g is None:
                continue
            p_state = state[p]
            if not p_state:
                _init_state(p_state, p._data, hyper.amsgrad)
            _adam_update(p, g._data, p_state, hyper)


def _validate(lr: Any, betas: tuple[Any, Any], eps: float, weight_decay: float) -> None:
    """Torch's checks and messages, in torch's order."""
    check_lr(lr)
    check_nonnegative(eps=eps)
    check_betas(betas)
    check_nonnegative(weight_decay=weight_decay)
    if not (all(isinstance(b, float) for b in betas) or all(isinstance(b, Tensor) for b in betas)):
        raise ValueError("betas must be either both floats or both Tensors")


def _init_state(p_state: dict[str, Any], data: np.ndarray, amsgrad: bool) -> None:
    """Lazy state, in torch's key order: a float32 step counter and zeroed moments."""
    p_state["step"] = step_counter()
    p_state["exp_avg"] = _wrap(np.zeros_like(data))
    p_state["exp_avg_sq"] = _wrap(np.zeros_like(data))
    if amsgrad:
        p_state["max_exp_avg_sq"] = _wrap(np.zeros_like(data))


def _adam_update(p: Tensor, grad: np.ndarray, p_state: dict[str, Any], h: _Hyper) -> None:
    step_t = p_state["step"]
    step_t._data += 1
    step = float(step_t._data)
    data = p._data
    if h.maximize:
        grad = -grad
    if h.weight_decay != 0:
        if h.decoupled:
            data *= 1 - h.lr * h.weight_decay
            p._vbox[0] += 1
        else:
            decayed = data * h.weight_decay
            grad = np.add(decayed, grad, out=decayed)
    exp_avg = p_state["exp_avg"]._data
    exp_avg_sq = p_state["exp_avg_sq"]._data
    lerp_(exp_avg, grad, 1 - h.beta1)
    exp_avg_sq *= h.beta2
    tmp = grad * (1 - h.beta2)  # addcmul_ order: (value * g) * g
    tmp *= grad
    exp_avg_sq += tmp
    bias_correction1 = 1 - h.beta1**step
    bias_correction2_sqrt = (1 - h.beta2**step) ** 0.5
    second = exp_avg_sq
    if h.amsgrad:
        second = p_state["max_exp_avg_sq"]._data
        np.maximum(second, exp_avg_sq, out=second)
    denom = np.sqrt(second)
    denom /= bias_correction2_sqrt
    denom += h.eps
    np.multiply(exp_avg, -(h.lr / bias_correction1), out=tmp)  # addcdiv_: (value * m) / denom
    tmp /= denom
    data += tmp
    p._vbox[0] += 1
