"""Numeric kernels on torch tensors: computed on the tensors' device, batched, one host sync.

A summary is what :func:`hookgrad.hookspecs.array_stats` gives for a numpy array (shape,
dtype, L2 norm, mean, population std, min and max of the finite entries, NaN/Inf counts, share
of exact zeros), computed here with torch reductions in float64 on the tensor's own device.
The per-tensor results are stacked into one tensor and moved to the host in one ``tolist()``,
so summarising many gradients on a GPU costs one synchronisation, not one per tensor. Values
equal numpy's to float32 tolerance (both accumulate in float64; the order of additions
differs). A float64 tensor is reduced over a power of two near its largest finite magnitude,
as numpy's summary rescales, so squares of entries past 1e154 or under 1e-154 neither overflow
nor fade.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from ...hookspecs._stats import GradSummary, TensorSummary, grad_summary

__all__ = ["diff_norms", "grad_summaries", "histograms", "snapshot", "summaries"]

# n, finite, nan, zeros, then over ``scale``: sum, L2 norm, sum of squared deviations; min,
# max; scale (1 but for float64 tensors)
_FIELDS = 10


def summaries(tensors: Sequence[torch.Tensor]) -> list[TensorSummary]:
    """The summary of each tensor, in order (see the module docstring)."""
    if not tensors:
        return []
    host = _to_host([_reductions(t) for t in tensors])
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
    low = torch.where(finite, x, torch.inf).amin()
    high = torch.where(finite, x, -torch.inf).amax()
    scale = x.new_ones(())
    if tensor.dtype == torch.float64:  # float32 and narrower: float64 squares cannot overflow
        largest = torch.maximum(low.abs(), high.abs())
        usable = torch.isfinite(largest) & (largest > 0)
        scale = torch.where(usable, torch.ldexp(scale, torch.frexp(largest).exponent - 1), 1.0)
        x = x / scale  # a power of two: exact
    values = torch.where(finite, x, 0.0)
    total = values.sum()
    mean = total / kept.clamp(min=1)
    deviations = torch.where(finite, x - mean, 0.0)
    return torch.stack(
        [
            x.new_full((), float(n)),
            kept.to(torch.float64),
            torch.isnan(x).sum().to(torch.float64),
            (x == 0).sum().to(torch.float64),
            total,
            torch.linalg.vector_norm(values),
            low,
            high,
            (deviations * deviations).sum(),
            scale,
        ]
    )


def _summary(tensor: torch.Tensor, values: list[float]) -> TensorSummary:
    n, kept, nan, zeros, total, norm, low, high, deviations, scale = values
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
        summary["norm"] = norm * scale
        summary["mean"] = total / kept * scale
        summary["std"] = (deviations / kept) ** 0.5 * scale
        summary["min"] = low
        summary["max"] = high
    return summary


def _to_host(rows: Sequence[torch.Tensor]) -> list[Any]:
    """``[row.tolist() for row in rows]``, with one transfer (one sync) per device: the rows of
    each device are stacked there first."""
    by_device: dict[torch.device, list[int]] = {}
    for i, row in enumerate(rows):
        by_device.setdefault(row.device, []).append(i)
    host: list[Any] = [None] * len(rows)
    for indices in by_device.values():
        stacked = torch.stack([rows[i] for i in indices]).tolist()
        for i, values in zip(indices, stacked, strict=True):
            host[i] = values
    return host


# ---------------------------------------------------------------------- grad_stats kernels
def grad_summaries(tensors: Sequence[torch.Tensor | None]) -> list[GradSummary | None]:
    """The GradSummary of each tensor (None for None), from the summary's reductions."""
    present = [t for t in tensors if t is not None]
    host = iter(_to_host([_reductions(t) for t in present]))
    return [
        None if t is None else grad_summary(_summary(t, values := next(host)), int(values[0]))
        for t in tensors
    ]


def histograms(
    tensors: Sequence[torch.Tensor | None], bins: int, ranges: Sequence[tuple[float, float] | None]
) -> list[dict[str, list[Any]] | None]:
    """``np.histogram`` of each tensor over its range, counted on the tensor's device.

    The edges are numpy's own (computed on the host from the range, as numpy's histogram
    computes them), so a bin holds the entries ``edges[i] <= x < edges[i + 1]`` (the last bin
    includes its right edge), as numpy's does: the counts equal numpy's exactly. The edges go
    to each device in one transfer, the counts come back in one.
    """
    edges = [
        None if t is None or span is None else _bin_edges(t.dtype, bins, span)
        for t, span in zip(tensors, ranges, strict=True)
    ]
    todo = [i for i, e in enumerate(edges) if e is not None]
    on_device: dict[torch.device, torch.Tensor] = {}
    table = np.stack([edges[i] for i in todo]).astype(np.float64) if todo else None
    counts = []
    for row, i in enumerate(todo):
        tensor = tensors[i]
        assert tensor is not None and table is not None
        device = tensor.device
        if device not in on_device:
            on_device[device] = torch.from_numpy(table).to(device)
        counts.append(_bin_counts(tensor, on_device[device][row]))
    out: list[dict[str, list[Any]] | None] = [None] * len(tensors)
    for i, numbers in zip(todo, _to_host(counts), strict=True):
        out[i] = {"counts": numbers, "edges": edges[i].tolist()}  # type: ignore[union-attr]
    return out


def _bin_edges(dtype: torch.dtype, bins: int, span: tuple[float, float]) -> np.ndarray | None:
    """numpy's histogram edges for entries of ``dtype`` in ``span``; None where numpy cannot
    bin it (the width overflows the dtype)."""
    kind = _numpy_dtype(dtype)
    lo, hi = kind.type(span[0]), kind.type(span[1])
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            return np.histogram_bin_edges(np.empty(0, kind), bins, range=(lo, hi))
    except ValueError:  # "Too many bins for data range": the edges are not finite
        return None


@lru_cache(maxsize=32)
def _numpy_dtype(dtype: torch.dtype) -> np.dtype[Any]:
    """The numpy dtype of torch's ``dtype``; float32 for bfloat16, which numpy lacks (and
    float32 holds exactly)."""
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype
    except TypeError:
        return np.dtype(np.float32)


def _bin_counts(tensor: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
    """How many entries of ``tensor`` each bin of ``edges`` (float64, on its device) holds."""
    x = tensor.detach().reshape(-1).to(torch.float64)  # exact for every narrower dtype
    index = torch.bucketize(x, edges[1:-1], right=True)  # edges[i] <= x < edges[i + 1]
    inside = (x >= edges[0]) & (x <= edges[-1])  # NaN and ±Inf are not
    counts = torch.zeros(edges.numel() - 1, dtype=torch.int64, device=x.device)
    return counts.scatter_add_(0, index, inside.to(torch.int64))


def snapshot(tensors: Sequence[torch.Tensor | None]) -> list[torch.Tensor | None]:
    """Detached copies of the tensors, on their devices."""
    return [None if t is None else t.detach().clone() for t in tensors]


def diff_norms(
    after: Sequence[torch.Tensor | None], before: Sequence[torch.Tensor | None]
) -> list[tuple[float, float] | None]:
    """(||a - b||, ||b||) of each pair: the difference in the tensors' dtype, the norms
    accumulated in float64 (``torch._foreach_norm``), handed to the host together."""
    pairs = [(a, b) for a, b in zip(after, before, strict=True) if a is not None and b is not None]
    if not pairs:
        return [None] * len(after)
    moved = torch._foreach_sub([a.detach() for a, _ in pairs], [b for _, b in pairs])
    bases = [b for _, b in pairs]
    norms = _to_host(torch._foreach_norm([*moved, *bases], 2, dtype=torch.float64))
    found = iter(zip(norms[: len(pairs)], norms[len(pairs) :], strict=True))
    return [None if a is None or b is None else next(found) for a, b in zip(after, before)]
