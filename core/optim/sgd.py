"""Stochastic gradient descent, optionally with (Nesterov) momentum, as torch's for-loop SGD.

Per parameter with gradient ``g`` (``-g`` when maximizing)::

    g = g + weight_decay * p
    buf = g                                      (first step)
    buf = momentum * buf + (1 - dampening) * g   (later steps)
    g = g + momentum * buf   if nesterov   else   buf
    p = p - lr * g
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._tensor import Tensor, _wrap
from ._kernels import decayed
from .optimizer import Optimizer, ParamsT, _refuse_unsupported

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent (optionally with momentum); torch's defaults and formulas."""

    def __init__(
        self,
        params: ParamsT,
        lr: float | Tensor = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float | Tensor = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _refuse_unsupported("SGD", differentiable=differentiable, fused=fused)
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
            "foreach": foreach,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", False)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr = float(group["lr"])
        momentum = float(group["momentum"])
        weight_decay = float(group["weight_decay"])
        maximize = group["maximize"]
        if momentum == 0 and weight_decay == 0:
            # The hot path: one multiply and one in-place add per parameter.
            update = np.add if maximize else np.subtract
            for p in group["params"]:
                g = p._grad
                if g is not None:
                    data = p._data
                    update(data, g._data * lr, out=data)
                    p._vbox[0] += 1
            return
        dampening = float(group["dampening"])
        nesterov = group["nesterov"]
        state = self.state
        for p in group["params"]:
            g = p._grad
            if g is None:
                continue
            data = p._data
            d_p = decayed(g._data, data, weight_decay, maximize)
            if momentum != 0:
                d_p = _momentum(state[p], d_p, momentum, dampening, nesterov)
            np.subtract(data, d_p * lr, out=data)
            p._vbox[0] += 1


def _momentum(
    state: dict[str, Any], d_p: np.ndarray, momentum: float, dampening: float, nesterov: bool
) -> np.ndarray:
    """Update the momentum buffer in ``state`` and return the direction to step along."""
    buf = state.get("momentum_buffer")
    if buf is None:
        buf = state["momentum_buffer"] = _wrap(d_p.copy())
        b = buf._data
    else:
        b = buf._data
        b *= momentum
        if dampening == 0:
            b += d_p
        else:
            b += d_p * (1 - dampening)
        buf._vbox[0] += 1
    if nesterov:
        out: np.ndarray = b * momentum
        out += d_p
        return out
    return b
