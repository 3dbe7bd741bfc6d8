"""In-place numpy kernels for optimizer steps, in the operation order of torch's CPU kernels.

Torch's ``addcmul_``/``addcdiv_`` compute ``self + (value * t1) * t2`` and
``self + (value * t1) / t2`` with the scalar rounded to the tensor's dtype; ``lerp_`` uses a
two-sided formula. Writing the same steps in numpy keeps results within float32 rounding of
torch's (torch's vectorised kernels fuse some multiply-adds, so the last bit may differ).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._tensor import Tensor, _wrap

__all__ = [
    "addcdiv_",
    "addcmul_",
    "bump_step",
    "decayed",
    "lerp_",
    "step_counter",
    "weight_decayed",
]


def decayed(grad: np.ndarray, param: np.ndarray, weight_decay: float, maximize: bool) -> np.ndarray:
    """The gradient (negated when maximizing) plus L2 weight decay; never written in place."""
    if weight_decay != 0:
        out: np.ndarray = param * weight_decay
        if maximize:
            out -= grad
        else:
            out += grad
        return out
    return -grad if maximize else grad


def lerp_(start: np.ndarray, end: np.ndarray, weight: float) -> None:
    """``start += weight * (end - start)`` in place, with torch's two-sided lerp formula."""
    diff = end - start
    if abs(weight) < 0.5:
        diff *= weight
        start += diff
    else:
        one = start.dtype.type(1)
        diff *= one - start.dtype.type(weight)
        np.subtract(end, diff, out=start)


def addcmul_(out: np.ndarray, t1: np.ndarray, t2: np.ndarray, value: float = 1.0) -> None:
    """``out += (value * t1) * t2`` in place."""
    tmp = t1 * value
    tmp *= t2
    out += tmp


def addcdiv_(out: np.ndarray, t1: np.ndarray, t2: np.ndarray, value: float = 1.0) -> None:
    """``out += (value * t1) / t2`` in place."""
    tmp = t1 * value
    tmp /= t2
    out += tmp


def step_counter(value: float = 0.0) -> Tensor:
    """A step count as torch keeps it: a float32 0-dim tensor."""
    return _wrap(np.array(value, dtype=np.float32))


def bump_step(p_state: dict[str, Any]) -> float:
    """Add one to ``p_state["step"]`` and return the new count as a Python float."""
    step_t = p_state["step"]
    step_t._data += 1
    return float(step_t._data)


def weight_decayed(
    p: Tensor, grad: np.ndarray, lr: float, weight_decay: float, decoupled: bool, maximize: bool
) -> np.ndarray:
    """The step's gradient after weight decay, torch's two ways.

    Decoupled (AdamW-style) decay shrinks the parameter in place, ``p *= 1 - lr *
    weight_decay``, bumping its version; otherwise the decay is added to the gradient (L2).
    """
    if decoupled and weight_decay != 0:
        p._data *= 1 - lr * weight_decay
        p._vbox[0] += 1
        return -grad if maximize else grad
    return decayed(grad, p._data, weight_decay, maximize)
