"""Numeric kernels on torch tensors: computed on the tensors' device, batched, one host sync.

A summary is what :func:`hookgrad.hookspecs.array_stats` gives for a numpy array (shape,
dtype, L2 norm, mean, population std, min and max of the finite entries, NaN/Inf counts, share
of exact zeros), computed here with torch reductions in float64 on the tensor's own device.
The tensors of a device, dtype and size are reduced together, stacked as the rows of one
float64 matrix (one reduction per statistic, not one per tensor), and every result moves to
the host in one ``tolist()`` per device, so summarising many gradients on a GPU
costs one synchronisation, not one per tensor. Values
equal numpy's to float32 tolerance (both accumulate in float64; the order of additions
differs). A float64 tensor is reduced over a power of two near its largest finite magnitude,
as numpy's summary rescales, so squares of entries past 1e154 or under 1e-154 neither overflow
nor fade.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Final

import numpy as np
import torch
from torch.nn.utils import get_total_norm

from ...hookspecs._stats import GradSummary, TensorSummary, grad_summary
from .._grad_norms import forget, scaled
from .._protocol import Clamped
from . import _private

__all__ = [
    "agc_clip_",
    "clamp",
    "clip_with_norm_",
    "diff_norms",
    "grad_summaries",
    "histograms",
    "restore_",
    "snapshot",
    "summaries",
    "dtype_name",
    "first_nonfinite",
    "nonfinite_counts",
    "total_norms",
    "unscale_",
    "zero_nonfinite_",
    "zero_units",
]

_BATCH_ENTRIES = 1 << 22
"""Most entries reduced together: the batch's float64 copy (32 MiB) and masks stay small next
to the tensors; a larger tensor is reduced on its own."""


def summaries(tensors: Sequence[torch.Tensor]) -> list[TensorSummary]:
    """The summary of each tensor, in order (see the module docstring)."""
    host = _reduced(tensors)
    return [_summary(t, values) for t, values in zip(tensors, host, strict=True)]


def _reduced(tensors: Sequence[torch.Tensor]) -> list[list[float]]:
    """Each tensor's row of :func:`_reductions`, on the host, with one transfer per device."""
    batches = _batches(tensors)
    blocks = _to_host([_reductions([tensors[i] for i in batch]) for batch in batches])
    rows: list[Any] = [None] * len(tensors)
    for batch, block in zip(batches, blocks, strict=True):
        for i, row in zip(batch, block, strict=True):
            rows[i] = row
    return rows


def _batches(tensors: Sequence[torch.Tensor]) -> list[list[int]]:
    """The indices of the tensors reduced together: of one device, dtype and size (so they
    stack as the rows of a matrix, casting nothing), at most _BATCH_ENTRIES entries unless
    one tensor has more. A model has few distinct parameter sizes: few batches."""
    batches: list[list[int]] = []
    filling: dict[tuple[torch.device, torch.dtype, int], tuple[list[int], int]] = {}
    for i, tensor in enumerate(tensors):
        key = (tensor.device, tensor.dtype, tensor.numel())
        batch, entries = filling.get(key, ([], 0))
        if not batch or entries + tensor.numel() > _BATCH_ENTRIES:
            batch, entries = [], 0
            batches.append(batch)
        batch.append(i)
        filling[key] = (batch, entries + tensor.numel())
    return batches


def _reductions(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The float64 reductions of tensors of one device, dtype and size, one row each, there.

    A row is: finite, NaN and zero counts, then over ``scale``: the sum, the L2 norm and the
    sum of squared deviations of the finite entries; min and max of the finite entries; and
    ``scale``, a power of two at or below the largest finite magnitude of a float64 tensor
    (1 for the others, whose squares cannot overflow or fade in float64). The tensors are
    stacked as the rows of one matrix (see :func:`_batches`), so each statistic is one
    reduction along its rows for the whole batch.
    """
    rows = [t.detach().reshape(-1) for t in tensors]
    x = (torch.stack(rows) if len(rows) > 1 else rows[0][None]).to(torch.float64)
    if x.shape[1] == 0:  # empty tensors: nothing counted, no moments
        return x.new_zeros(len(tensors), 9)
    finite = torch.isfinite(x)
    kept = finite.sum(dim=1, dtype=torch.float64)
    low = torch.where(finite, x, torch.inf).amin(dim=1)
    high = torch.where(finite, x, -torch.inf).amax(dim=1)
    scale = x.new_ones(len(tensors))
    if tensors[0].dtype == torch.float64:
        largest = torch.maximum(low.abs(), high.abs())
        usable = torch.isfinite(largest) & (largest > 0)
        scale = torch.where(usable, torch.ldexp(scale, torch.frexp(largest).exponent - 1), 1.0)
        x = x / scale[:, None]  # a power of two: exact
    values = torch.where(finite, x, 0.0)
    total = values.sum(dim=1)
    mean = total / kept.clamp(min=1)
    deviations = torch.where(finite, x - mean[:, None], 0.0)
    return torch.stack(
        [
            kept,
            torch.isnan(x).sum(dim=1, dtype=torch.float64),
            (x == 0).sum(dim=1, dtype=torch.float64),
            total,
            torch.linalg.vector_norm(values, dim=1),
            low,
            high,
            (deviations * deviations).sum(dim=1),
            scale,
        ],
        dim=1,
    )


def _to_device(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``host`` (a CPU tensor) on ``device``; to a GPU through pinned memory, asynchronously,
    so the copy waits for no queued work (a plain copy to other devices)."""
    if device.type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host.to(device)


def _summary(tensor: torch.Tensor, values: list[float]) -> TensorSummary:
    n = tensor.numel()
    kept, nan, zeros, total, norm, low, high, deviations, scale = values
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


# ---------------------------------- clipping: total norms, to a norm, by value, unit-wise (AGC)
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
_NO_OVERFLOW: Final = 1e30
"""A max_norm below which a clip coefficient's float32 arithmetic cannot overflow (the
reciprocal of a norm plus 1e-6 is at most 1e6; float32 reaches 3.4e38)."""


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
    dtype = present[0].dtype
    if not all(t.dtype is dtype for t in present):
        dtype = functools.reduce(torch.promote_types, [t.dtype for t in present])
    coefficient = _clip_coefficient(max_norm, total_norm, dtype)
    if coefficient != 1.0:
        versions = [t._version for t in present]
        with torch.no_grad():
            _private.foreach_mul_(present, coefficient)
        scaled(present, versions, coefficient)
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
    if max_norm < _NO_OVERFLOW:  # 1 / (norm + 1e-6) <= 1e6: nothing can overflow or warn
        coefficient = scalar(1.0) / (scalar(total_norm) + scalar(1e-6)) * scalar(max_norm)
    else:  # numpy would warn where torch is silent (inf, or inf * 0 = nan)
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
            _private.foreach_clamp_min_(present, -limit)
            _private.foreach_clamp_max_(present, limit)
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


def _to_host(tensors: Sequence[torch.Tensor]) -> list[Any]:
    """``[t.tolist() for t in tensors]`` with one transfer (one sync) per device: the tensors
    of a device (of one dtype) are flattened and laid end to end there first."""
    by_device: dict[torch.device, list[int]] = {}
    for i, tensor in enumerate(tensors):
        by_device.setdefault(tensor.device, []).append(i)
    host: list[Any] = [None] * len(tensors)
    for indices in by_device.values():
        flat = torch.cat([tensors[i].reshape(-1) for i in indices]).tolist()
        start = 0
        for i in indices:
            shape = tensors[i].shape
            part, start = flat[start : start + shape.numel()], start + shape.numel()
            host[i] = _unflattened(part, shape)
    return host


def _unflattened(values: list[Any], shape: torch.Size) -> Any:
    """``values`` (a flat list) nested as a tensor of ``shape`` (0 to 2 dimensions)."""
    if not shape:
        return values[0]
    if len(shape) == 1:
        return values
    width = shape[1]
    return [values[row * width : (row + 1) * width] for row in range(shape[0])]


# -------------------------------------------------------------------------- gradient statistics
def grad_summaries(tensors: Sequence[torch.Tensor | None]) -> list[GradSummary | None]:
    """The GradSummary of each tensor (None for None), from the summary's reductions."""
    present = [t for t in tensors if t is not None]
    host = iter(_reduced(present))
    return [
        None if t is None else grad_summary(_summary(t, next(host)), t.numel()) for t in tensors
    ]


def histograms(
    tensors: Sequence[torch.Tensor | None], bins: int, ranges: Sequence[tuple[float, float] | None]
) -> list[dict[str, list[Any]] | None]:
    """``np.histogram`` of each tensor over its range, counted on the tensor's device.

    The edges are numpy's own (computed on the host from the range, as numpy's histogram
    computes them), so a bin holds the entries ``edges[i] <= x < edges[i + 1]`` (the last bin
    includes its right edge), as numpy's does: the counts equal numpy's exactly. Tensors of a
    device, dtype and size are counted together (see :func:`_batches`); the edges go to each
    device in one transfer, the counts come back in one.
    """
    found: list[tuple[int, torch.Tensor, np.ndarray]] = []  # (index, tensor, edges)
    for i, (tensor, span) in enumerate(zip(tensors, ranges, strict=True)):
        edges = None if tensor is None or span is None else _bin_edges(tensor.dtype, bins, span)
        if tensor is not None and edges is not None:
            found.append((i, tensor, edges))
    out: list[dict[str, list[Any]] | None] = [None] * len(tensors)
    if not found:
        return out
    batches = _batches([tensor for _, tensor, _ in found])
    order = [j for batch in batches for j in batch]  # each batch's edges: a slice of table
    table = torch.from_numpy(np.stack([found[j][2] for j in order]).astype(np.float64))
    on_device: dict[torch.device, torch.Tensor] = {}
    blocks, start = [], 0
    for batch in batches:
        device = found[batch[0]][1].device
        if device not in on_device:
            on_device[device] = _to_device(table, device)
        batch_edges = on_device[device][start : start + len(batch)]
        blocks.append(_bin_counts([found[j][1] for j in batch], batch_edges))
        start += len(batch)
    for batch, block in zip(batches, _to_host(blocks), strict=True):
        for j, numbers in zip(batch, block, strict=True):
            i, _, edges = found[j]
            out[i] = {"counts": numbers, "edges": edges.tolist()}
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


def _bin_counts(tensors: Sequence[torch.Tensor], edges: torch.Tensor) -> torch.Tensor:
    """How many entries of each tensor (of one device, dtype and size) each bin holds: one
    row of counts per tensor, by its row of ``edges`` (float64, on their device)."""
    rows = [t.detach().reshape(-1) for t in tensors]
    x = torch.stack(rows).to(torch.float64)  # exact for every narrower dtype
    inner = edges[:, 1:-1].contiguous()
    index = torch.searchsorted(inner, x, right=True)  # edges[i] <= x < edges[i + 1]
    inside = (x >= edges[:, :1]) & (x <= edges[:, -1:])  # NaN and ±Inf are not
    bins = edges.shape[1] - 1
    counts = torch.zeros(len(tensors), bins, dtype=torch.int64, device=x.device)
    return counts.scatter_add_(1, index, inside.to(torch.int64))


def snapshot(tensors: Sequence[torch.Tensor | None]) -> list[torch.Tensor | None]:
    """Detached copies of the tensors, on their devices."""
    return [None if t is None else t.detach().clone() for t in tensors]


def restore_(tensors: Sequence[torch.Tensor], snapshots: Sequence[torch.Tensor]) -> None:
    """:meth:`hookgrad.engines.Engine.restore_`: ``copy_`` on each tensor's device."""
    with torch.no_grad():
        for tensor, kept in zip(tensors, snapshots, strict=True):
            tensor.copy_(kept)


def diff_norms(
    after: Sequence[torch.Tensor | None], before: Sequence[torch.Tensor | None]
) -> list[tuple[float, float] | None]:
    """(||a - b||, ||b||) of each pair: the difference in the tensors' dtype, the norms
    accumulated in float64 (``torch._foreach_norm``), handed to the host together."""
    pairs = [(a, b) for a, b in zip(after, before, strict=True) if a is not None and b is not None]
    if not pairs:
        return [None] * len(after)
    moved = _private.foreach_sub([a.detach() for a, _ in pairs], [b for _, b in pairs])
    bases = [b for _, b in pairs]
    norms = _to_host(_private.foreach_norm([*moved, *bases], 2, dtype=torch.float64))
    found = iter(zip(norms[: len(pairs)], norms[len(pairs) :], strict=True))
    return [None if a is None or b is None else next(found) for a, b in zip(after, before)]


def zero_units(tensors: Sequence[torch.Tensor | None]) -> list[np.ndarray | None]:
    """:meth:`hookgrad.engines.Engine.zero_units`: each tensor viewed as a matrix with one row
    per unit; the matrices of one device, dtype and row width joined, each row's largest
    magnitude compared with 0 (``abs().amax``: on CPU several times faster than ``any``), and
    the flags of a device brought to the host in one transfer."""
    groups: defaultdict[tuple[torch.device, torch.dtype, int], list[tuple[int, torch.Tensor]]]
    groups = defaultdict(list)
    for k, t in enumerate(tensors):
        if t is not None:
            matrix = _rows(t.detach())
            groups[matrix.device, matrix.dtype, matrix.shape[1]].append((k, matrix))
    per_device: defaultdict[torch.device, list[tuple[list[tuple[int, torch.Tensor]], torch.Tensor]]]
    per_device = defaultdict(list)
    with torch.no_grad():
        for (device, dtype, width), members in groups.items():
            parts = [matrix for _, matrix in members]
            joined = parts[0] if len(parts) == 1 else torch.cat(parts)
            if width == 0:  # no entry: every unit is (vacuously) zero
                zero = torch.ones(joined.shape[0], dtype=torch.bool, device=device)
            elif dtype.is_floating_point or dtype.is_complex:
                zero = joined.abs().amax(dim=1).eq(0)  # a NaN row is not zero
            else:  # bool and integers (abs of the least int64 is negative)
                zero = joined.ne(0).any(dim=1).logical_not_()
            per_device[device].append((members, zero))
    flags: list[np.ndarray | None] = [None] * len(tensors)
    for found in per_device.values():
        joined_flags = torch.cat([zero for _, zero in found]) if len(found) > 1 else found[0][1]
        host = joined_flags.cpu().numpy()  # the device's one sync
        start = 0
        for k, matrix in (member for members, _ in found for member in members):
            flags[k] = host[start : start + matrix.shape[0]]
            start += matrix.shape[0]
    return flags


def _rows(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` as a matrix with one row per index of its first dim (0-dim: one row)."""
    if tensor.ndim == 0:
        return tensor.reshape(1, 1)
    if tensor.ndim == 2:
        return tensor
    return tensor.reshape(tensor.shape[0], math.prod(tensor.shape[1:]))  # -1 fails on 0 rows


# ------------------------------------------------------------------ finiteness and loss scaling
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
    seen = {id(skip)}  # each tensor once (a module's grad_input is the next's grad_output)
    indices = []
    for i, v in enumerate(values):
        if id(v) not in seen and _floating(v):
            seen.add(id(v))
            indices.append(i)
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
            _private.amp_unscale_(group, found_inf, inv)
    forget(grads)  # written with no version bump: their shared norms are stale
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
    return torch.stack(_private.foreach_norm(group, 2, dtype=dtype)).isfinite()


def _all_finite(group: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([torch.isfinite(t).all() for t in group])


def _counts(group: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([torch.stack([torch.isnan(t).sum(), torch.isinf(t).sum()]) for t in group])


def _bad_counts(group: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([(~torch.isfinite(t)).sum() for t in group])


# -------------------------------------------------------- gradient norms (the per-step summary)
# (the kernels behind hookgrad.engines.grad_norms, on torch tensors)
_NORMED_AS_IS: Final = (torch.float32, torch.float64)
"""Dtypes normed in their own precision, as clip_grad_norm_ norms them (the others in float32)."""


def grad_norms(tensors: Sequence[torch.Tensor | None]) -> list[float | None]:
    """:meth:`hookgrad.engines.Engine.grad_norms`: one ``torch._foreach_norm`` per device and
    dtype (a model's gradients: one), stacked, one ``tolist()`` per device."""
    present = [t for t in tensors if t is not None]
    if not present:
        return [None] * len(tensors)
    values: list[Any] | None = None
    dtypes = {t.dtype for t in present}
    if len(dtypes) == 1:
        # No no_grad (2 us): the norms go straight to the host, no graph outlives this line.
        with contextlib.suppress(RuntimeError):  # several devices: stack refuses, grouped below
            norms = _private.foreach_norm(present, 2.0, dtype=_norm_dtype(dtypes.pop()))
            values = torch.stack(norms).tolist()
    if values is None:
        values = _per_group(present, _norm_rows)
    if len(present) == len(tensors):
        return values
    found = iter(values)
    return [None if t is None else next(found) for t in tensors]


def total_norm_of(tensors: Sequence[torch.Tensor], norms: Sequence[float]) -> float | None:
    """:meth:`hookgrad.engines.Engine.total_norm_of`: ``get_total_norm``'s second step
    (``vector_norm`` of the stacked per-tensor norms) on a CPU tensor of ``norms``, for CPU
    tensors of one float32 or float64 dtype (how torch orders several groups is its own)."""
    if not tensors:
        return 0.0
    dtype = tensors[0].dtype
    if dtype not in _NORMED_AS_IS or {(t.dtype, t.is_cpu) for t in tensors} != {(dtype, True)}:
        return None
    # The norms' tensor through numpy: 3x torch.tensor's speed, the same float32/64 values.
    stacked = torch.from_numpy(np.array(norms, dtype=_HOST_SCALARS[dtype]))
    return torch.linalg.vector_norm(stacked, 2.0).item()


def _norm_dtype(dtype: torch.dtype) -> torch.dtype | None:
    """The dtype ``_foreach_norm`` accumulates and returns a ``dtype`` tensor's norm in."""
    return None if dtype in _NORMED_AS_IS else torch.float32


def _norm_rows(group: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(_private.foreach_norm(group, 2.0, dtype=_norm_dtype(group[0].dtype)))
