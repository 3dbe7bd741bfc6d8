"""Gradient clipping by total norm and by value, computed as torch.nn.utils.clip_grad does.

The total norm is the norm of the per-gradient norms (the norm of all gradients viewed as one
vector), in the gradients' dtype. Clipping multiplies every gradient in place by
``min(max_norm / (total_norm + 1e-6), 1.0)``, computed in that dtype: torch multiplies even
when the coefficient is clamped to 1.0, and so does this module (each gradient's version
counter is bumped). Nothing here records a graph.
"""

from __future__ import annotations

import math
import types
import warnings
from collections.abc import Iterable
from typing import Any, TypeAlias

import numpy as np

from ..._tensor import Tensor, _wrap

__all__ = [
    "clip_grad_norm",
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
]

_TensorOrTensors: TypeAlias = Tensor | Iterable[Tensor]


def _vector_norm(a: np.ndarray, p: float) -> Any:
    """``torch.linalg.vector_norm(a, p)`` as a numpy scalar of ``a``'s dtype.

    A one-entry tensor's norm is its magnitude for every p but 0, as torch computes it: no
    power of the entry can overflow or underflow (a scalar parameter's huge gradient).
    """
    flat = a.reshape(-1)
    if flat.size == 1 and p != 0.0:
        return np.abs(flat[0])
    if p == 2.0:
        return np.sqrt(np.dot(flat, flat))
    if math.isinf(p):
        if flat.size == 0:
            raise RuntimeError(
                "linalg.vector_norm cannot compute the inf norm on an empty tensor because the "
                "operation does not have an identity"
            )
        return np.abs(flat).max() if p > 0 else np.abs(flat).min()
    if p == 1.0:
        return np.abs(flat).sum()
    if p == 0.0:
        return a.dtype.type(np.count_nonzero(flat))
    return np.power(np.power(np.abs(flat), p).sum(), 1.0 / p)


def get_total_norm(
    tensors: _TensorOrTensors,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` viewed as one vector, as a 0-d Tensor.

    Raises RuntimeError if ``error_if_nonfinite`` and the norm is nan or infinite.
    """
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return _wrap(np.array(0.0, dtype=np.float32))
    dtype = np.result_type(*(t._data.dtype for t in tensors))
    with np.errstate(over="ignore", invalid="ignore"):  # torch is silent on inf/nan norms
        norms = [_vector_norm(t._data, norm_type) for t in tensors]
        total = np.asarray(_vector_norm(np.array(norms, dtype=dtype), norm_type), dtype=dtype)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
            "by the non-finite norm anyway, set `error_if_nonfinite=False`"
        )
    return _wrap(total)


def clip_grads_with_norm_(
    parameters: _TensorOrTensors,
    max_norm: float,
    total_norm: Tensor | float,
    foreach: bool | None = None,
) -> None:
    """Scale the gradients in place by ``min(max_norm / (total_norm + 1e-6), 1)``."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p._grad for p in parameters if p._grad is not None]
    max_norm = float(max_norm)
    if not grads:
        return
    norm = total_norm._data if isinstance(total_norm, Tensor) else total_norm
    with np.errstate(divide="ignore", invalid="ignore"):  # inf * 0 = nan, silently, as in torch
        coef = np.minimum(max_norm / (norm + 1e-6), 1.0)
        for g in grads:
            np.multiply(g._data, coef, out=g._data)
            g._vbox[0] += 1


def clip_grad_norm_(
    parameters: _TensorOrTensors,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Clip the gradients' total norm to ``max_norm`` in place; return the norm before clipping.

    ``parameters`` is a Tensor or an iterable of them; those whose ``.grad`` is None are
    ignored. ``norm_type`` may be ``float("inf")``.
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and not parameters:
            warnings.warn(
                "`parameters` is an empty generator, no gradient clipping will occur.",
                stacklevel=2,
            )
    grads = [p._grad for p in parameters if p._grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(
    parameters: _TensorOrTensors,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Deprecated alias of :func:`clip_grad_norm_` (warns with FutureWarning, as torch does)."""
    warnings.warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
        "`torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(
    parameters: _TensorOrTensors, clip_value: float, foreach: bool | None = None
) -> None:
    """Clamp every gradient in place to ``[-clip_value, clip_value]``; None grads are skipped."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    clip_value = float(clip_value)
    for p in parameters:
        g = p._grad
        if g is not None:
            np.clip(g._data, -clip_value, clip_value, out=g._data)
            g._vbox[0] += 1
