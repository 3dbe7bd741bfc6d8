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

from collections.abc import Sequence

import torch

from ...hookspecs._stats import TensorSummary

__all__ = ["summaries"]

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
