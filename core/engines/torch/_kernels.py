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

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...hookspecs._stats import TensorSummary

__all__ = [
    "dtype_name",
    "first_nonfinite",
    "nonfinite_counts",
    "summaries",
    "unscale_",
    "zero_nonfinite_",
]

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


# ---------------------------------------------------- finiteness and loss scaling
# (nan_guard, grad_scale: the Engine methods of the same names, on torch tensors)
# Each kernel works per (device, dtype) group, as GradScaler does, so that the foreach ops take
# their fused route, and brings its results to the host in one transfer per device.
_HALF = (torch.float16, torch.bfloat16)


def first_nonfinite(values: Sequence[Any], skip: Any = None) -> int | None:
    """The index of the first tensor in ``values`` with a NaN or Inf (see ``Engine``).

    The screen is the L2 norm of every tensor (``torch._foreach_norm``; half types in
    float32, where their squares cannot overflow): a NaN or an Inf entry always makes it
    non-finite. A flagged tensor is confirmed entry-wise, since huge finite float32 or
    float64 entries overflow the norm too.
    """
    indices = [i for i, v in enumerate(values) if v is not skip and _floating(v)]
    tensors = [values[i] for i in indices]
    screened = _per_group(tensors, _norms_finite)
    suspects = [k for k, finite in enumerate(screened) if not finite]
    if not suspects:
        return None
    confirmed = _per_group([tensors[k] for k in suspects], _all_finite)
    return next((indices[k] for k, finite in zip(suspects, confirmed) if not finite), None)


def nonfinite_counts(tensors: Sequence[Any]) -> list[tuple[int, int]]:
    """``(nan, inf)`` per tensor, (0, 0) for None and non-floating tensors."""
    floating = [k for k, t in enumerate(tensors) if _floating(t)]
    counts = [(0, 0)] * len(tensors)
    for k, (nan, inf) in zip(floating, _per_group([tensors[k] for k in floating], _counts)):
        counts[k] = (nan, inf)
    return counts


def zero_nonfinite_(tensors: Sequence[Any]) -> int:
    """Zero the NaN/Inf entries in place, writing (and bumping the version counter of) only
    the tensors that hold some, as numpy does; how many entries there were."""
    floating = [t for t in tensors if _floating(t)]
    counts = _per_group(floating, _bad_counts)
    with torch.no_grad():
        for t, count in zip(floating, counts):
            if count:
                t.masked_fill_(~torch.isfinite(t), 0.0)
    return sum(counts)


def unscale_(tensors: Sequence[Any], inv_scale: float) -> bool:
    """``torch._amp_foreach_non_finite_check_and_unscale_`` on every (device, dtype) group,
    with a float32 ``inv_scale`` on each device; whether any tensor held NaN or Inf."""
    grads = [t for t in tensors if t is not None]
    found: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}
    with torch.no_grad():
        for positions in _groups(grads):
            device = grads[positions[0]].device
            if device not in found:
                found[device] = (
                    torch.zeros((), dtype=torch.float32, device=device),
                    torch.full((), inv_scale, dtype=torch.float32, device=device),
                )
            found_inf, inv = found[device]
            group = [grads[k] for k in positions]
            torch._amp_foreach_non_finite_check_and_unscale_(group, found_inf, inv)
    return any(found_inf.item() for found_inf, _ in found.values())  # one sync per device


def dtype_name(tensor: torch.Tensor) -> str:
    """``"float32"`` for ``torch.float32``: the dtype's name as numpy spells it."""
    return str(tensor.dtype).removeprefix("torch.")


def _floating(value: Any) -> bool:
    """A tensor that can hold NaN or Inf (integer and bool tensors cannot)."""
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def _groups(tensors: Sequence[torch.Tensor]) -> list[list[int]]:
    """The positions of ``tensors`` grouped by device and dtype, in order of appearance."""
    groups: defaultdict[tuple[torch.device, torch.dtype], list[int]] = defaultdict(list)
    for k, t in enumerate(tensors):
        groups[t.device, t.dtype].append(k)
    return list(groups.values())


def _per_group(
    tensors: Sequence[torch.Tensor], rows: Callable[[list[torch.Tensor]], torch.Tensor]
) -> list[Any]:
    """``rows(group)`` (one row per tensor, on the group's device) of every (device, dtype)
    group of ``tensors``, brought to the host as one list per device, in the order of
    ``tensors``."""
    per_device: defaultdict[torch.device, list[tuple[list[int], torch.Tensor]]]
    per_device = defaultdict(list)
    with torch.no_grad():
        for positions in _groups(tensors):
            group = [tensors[k].detach() for k in positions]
            per_device[group[0].device].append((positions, rows(group)))
    host: list[Any] = [None] * len(tensors)
    for parts in per_device.values():
        values = torch.cat([part for _, part in parts]).tolist()  # the device's one sync
        for k, value in zip((k for positions, _ in parts for k in positions), values):
            host[k] = value
    return host


def _norms_finite(group: list[torch.Tensor]) -> torch.Tensor:
    dtype = torch.float32 if group[0].dtype in _HALF else None
    return torch.stack(torch._foreach_norm(group, 2, dtype=dtype)).isfinite()


def _all_finite(group: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([torch.isfinite(t).all() for t in group])


def _counts(group: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([torch.stack([torch.isnan(t).sum(), torch.isinf(t).sum()]) for t in group])


def _bad_counts(group: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([(~torch.isfinite(t)).sum() for t in group])
