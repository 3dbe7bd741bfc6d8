"""Numeric kernels on torch tensors: computed on the tensors' device, batched, one host sync.

A summary is what :func:`hookgrad.hookspecs.array_stats` gives for a numpy array (shape,
dtype, L2 norm, mean, population std, min and max of the finite entries, NaN/Inf counts, share
of exact zeros), computed here with torch reductions in float64 on the tensor's own device.
The per-tensor results are stacked into one tensor and moved to the host in one ``tolist()``,
so summarising many gradients on a GPU costs one synchronisation, not one per tensor. Values
equal numpy's to float32 tolerance (both accumulate in float64; the order of additions
differs).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import torch
from torch.nn.utils import get_total_norm

from ...hookspecs._stats import TensorSummary
from .._protocol import Clamped

__all__ = ["agc_clip_", "clamp", "clip_with_norm_", "summaries", "total_norms"]

_FIELDS = 9  # n, finite, nan, zeros, sum, L2 norm, min, max, sum of squared deviations


def summaries(tensors: Sequence[torch.Tensor]) -> list[TensorSummary]:
    """The summary of each tensor, in order (see the module docstring)."""
    if not tensors:
        return []
    rows = [_reductions(t) for t in tensors]
    host = torch.stack([row.to("cpu") for row in rows]).tolist()  # the one sync
    return [_summary(t, values) for t, values in zip(tensors, host)]


def _reductions(tensor: torch.Tensor) -> torch.Tensor:
    """The nine float64 reductions of one tensor, on its device."""
    x = tensor.detach().reshape(-1)
    x = x.to(torch.float64)
    n = x.numel()
    if n == 0:
        return torch.zeros(_FIELDS, dtype=torch.float64, device=x.device)
    finite = torch.isfinite(x)
    kept = finite.sum()
    values = torch.where(finite, x, 0.0)
    total = values.sum()
    mean = total / kept.clamp(min=1)
    deviations = torch.where(finite, x - mean, 0.0)
    return torch.stack(
        [
            torch.tensor(float(n), dtype=torch.float64, device=x.device),
            kept.to(torch.float64),
            torch.isnan(x).sum().to(torch.float64),
            (x == 0).sum().to(torch.float64),
            total,
            torch.linalg.vector_norm(values),
            torch.where(finite, x, torch.inf).amin(),
            torch.where(finite, x, -torch.inf).amax(),
            (deviations * deviations).sum(),
        ]
    )


def _summary(tensor: torch.Tensor, values: list[float]) -> TensorSummary:
    n, kept, nan, zeros, total, norm, low, high, deviations = values
    summary = TensorSummary(
        shape=list(tensor.shape),
        dtype=str(tensor.dtype).removeprefix("torch."),
        norm=0.0,
        mean=None,
        std=None,
        min=None,
        max=None,
        nonfinite=int(n - kept),
        nan=int(nan),
        inf=int(n - kept - nan),
        zero_fraction=None,
    )
    if n == 0:
        return summary
    summary["zero_fraction"] = zeros / n
    if kept:
        summary["norm"] = norm
        summary["mean"] = total / kept
        summary["std"] = (deviations / kept) ** 0.5
        summary["min"] = low
        summary["max"] = high
    return summary


# --- grad_clip kernels: total norms, clipping to a norm, by value, unit-wise (AGC) ---
# Norms are torch.nn.utils.get_total_norm itself (foreach norms, then the norm of their
# stack), so they and the clipped values are bit for bit clip_grad_norm_'s; only the
# error_if_nonfinite check moves after the one sync (torch's own check syncs).
_AGC_MIN_GRAD_NORM: Final = 1e-6
"""Floor of a unit's gradient norm in the AGC scale factor (Brock et al., timm): no 0/0."""

_HOST_SCALARS: Final[dict[torch.dtype, type[np.floating[Any]]]] = {
    torch.float32: np.float32,
    torch.float64: np.float64,
}
"""Dtypes whose torch arithmetic numpy scalars repeat bit for bit: the op's own dtype, IEEE."""


def total_norms(
    groups: Sequence[Sequence[torch.Tensor | None]],
    norm_types: Sequence[float],
    error_if_nonfinite: bool = False,
) -> list[tuple[float, ...]]:
    """:meth:`hookgrad.engines.Engine.total_norms` (see the banner comment)."""
    present = [[t for t in group if t is not None] for group in groups]
    norms = [get_total_norm(group, p) for group in present if group for p in norm_types]
    host = iter(_to_host(norms))
    totals = [tuple(next(host) if group else 0.0 for _ in norm_types) for group in present]
    if error_if_nonfinite:
        for group, values in zip(present, totals):
            if not math.isfinite(values[0]):  # the same arithmetic again raises torch's error
                get_total_norm(group, norm_types[0], error_if_nonfinite=True)
    return totals


def clip_with_norm_(
    tensors: Sequence[torch.Tensor | None], max_norm: float, total_norm: float
) -> float:
    """:meth:`hookgrad.engines.Engine.clip_with_norm_`: one ``_foreach_mul_``, no sync."""
    present = [t for t in tensors if t is not None]
    if not present:  # as for clip_grad_norm_ of no gradients, whose norm is float32
        return _clip_coefficient(max_norm, total_norm, torch.float32)
    dtype = functools.reduce(torch.promote_types, [t.dtype for t in present])
    coefficient = _clip_coefficient(max_norm, total_norm, dtype)
    if coefficient != 1.0:
        with torch.no_grad():
            torch._foreach_mul_(present, coefficient)
    return coefficient


def _clip_coefficient(max_norm: float, total_norm: float, dtype: torch.dtype) -> float:
    """``clamp(max_norm / (total_norm + 1e-6), max=1.0)`` as clip_grads_with_norm_ computes
    it on a ``dtype`` tensor: ``reciprocal(total_norm + 1e-6) * max_norm``
    (``Tensor.__rtruediv__``), each op rounded to ``dtype``.

    For float32 and float64 numpy scalars do the same IEEE ops 15x faster than 0-d tensors;
    float16 and bfloat16 tensors compute in float32 and round each result, which 0-d tensors
    repeat exactly.
    """
    scalar = _HOST_SCALARS.get(dtype)
    if scalar is None:
        total = torch.tensor(total_norm, dtype=dtype)
        return float(torch.clamp(max_norm / (total + 1e-6), max=1.0))
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        coefficient = scalar(1.0) / (scalar(total_norm) + scalar(1e-6)) * scalar(max_norm)
    return float(coefficient) if not coefficient > 1.0 else 1.0  # nan stays nan, as in clamp


def clamp(tensors: Sequence[torch.Tensor | None], limit: float, *, in_place: bool) -> Clamped:
    """:meth:`hookgrad.engines.Engine.clamp`: clamps whether or not an entry is outside
    (same values then), so that norms and the finding reach the host in one sync."""
    present = [t for t in tensors if t is not None]
    if not present:
        return Clamped(None, 0.0, 0.0)
    with torch.no_grad():
        pre = get_total_norm(present, 2.0)
        outside = torch.stack([(t.abs() > limit).any() for t in present]).any()
        if in_place:  # clip_grad_value_
            torch._foreach_clamp_min_(present, -limit)
            torch._foreach_clamp_max_(present, limit)
            clamped = tuple(tensors)
        else:
            clamped = tuple(None if t is None else t.clamp(-limit, limit) for t in tensors)
        post = get_total_norm([t for t in clamped if t is not None], 2.0)
    pre_norm, post_norm, found = _to_host([pre, post, outside])
    return Clamped(clamped, pre_norm, post_norm) if found else Clamped(None, pre_norm, pre_norm)


def agc_clip_(
    weights: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor | None],
    clipping: float,
    eps: float,
) -> tuple[float, float, bool]:
    """:meth:`hookgrad.engines.Engine.agc_clip_`: every gradient is multiplied by its units'
    scale (1 for a unit within its limit), so the findings reach the host in one sync."""
    rows = []
    with torch.no_grad():
        for weight, grad in zip(weights, grads):
            if grad is None:
                continue
            grad_norm = _unit_norms(grad)
            max_norm = clipping * _unit_norms(weight).clamp(min=eps)
            over = grad_norm > max_norm
            floor = grad_norm.clamp(min=_AGC_MIN_GRAD_NORM)
            scale = torch.where(over, max_norm / floor, 1.0).to(grad.dtype)
            grad.mul_(scale)
            rows += [grad_norm.square().sum(), (grad_norm * scale).square().sum(), over.any()]
    if not rows:
        return 0.0, 0.0, False
    host = _to_host(rows)
    return math.sqrt(sum(host[0::3])), math.sqrt(sum(host[1::3])), any(host[2::3])


def _unit_norms(tensor: torch.Tensor) -> torch.Tensor:
    """2-norms of the units of a parameter (timm's ``unitwise_norm``): one per index of the
    first dim of a tensor of two or more dims (keepdims, to broadcast), else the whole."""
    if tensor.ndim <= 1:
        return torch.linalg.vector_norm(tensor)
    return torch.linalg.vector_norm(tensor, dim=tuple(range(1, tensor.ndim)), keepdim=True)


def _to_host(values: Sequence[torch.Tensor]) -> list[float]:
    """0-d tensors as floats, in one sync: stacked (dtypes promoted, exactly) where the first
    is; a single one is read as it is."""
    if not values:
        return []
    if len(values) == 1:
        return [values[0].item()]
    device = values[0].device
    return torch.stack([v.to(device) for v in values]).tolist()
