"""grad_stats' kernels on numpy arrays: gradient summaries, histograms and update norms.

A step's gradients are mostly small arrays, whose cost is numpy's per-call overhead, not the
arithmetic, so small arrays are summarised in batches: one float64 copy of them all, then one
numpy call per statistic (``ufunc.reduceat`` over the arrays' segments), about 15 µs of fixed
cost. Measured break-even points: a batch of 2 arrays for the statistics, of 4 to 8 for the
update-ratio norms (a subtraction and two dot products per weight otherwise); past 8192
entries (statistics) or 2048 (norms) one array is cheaper on its own, in its dtype (BLAS dot,
SIMD passes), than through the float64 copy. The arrays that stay out of a batch (see
:func:`_plan`) are summarised by :func:`hookgrad.hookspecs._stats.array_stats` itself.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from ...hookspecs._stats import (
    _CANCELLATION,
    _FADED,
    GradSummary,
    array_stats,
    grad_summary,
)

__all__ = ["diff_norms", "grad_summaries", "histograms"]

_BATCH_LARGEST: Final = 4096
"""Largest gradient (entries) whose statistics are computed in a batch."""

_BATCH_FEWEST: Final = 3
"""Fewest gradients worth a batch; the arrays of a smaller one are summarised alone."""

_MOVE_LARGEST: Final = 1024
"""Largest weight whose update-ratio norms are computed in a batch."""

_MOVE_FEWEST: Final = 8
"""Fewest weights worth a batch of update-ratio norms."""

_BATCH_ENTRIES: Final = 1 << 16
"""Most entries in one batch: 1 MiB of float64 rows, which the batch's passes find in cache."""

_FADED_64: Final = _FADED[np.dtype(np.float64)]
"""Below this a float64 sum of squares may have lost digits to underflow (array_stats redoes it)."""

_REAL: Final = frozenset(np.dtype(code) for code in "?bhilqBHILQefd")
"""The dtypes a batch takes (native byte order): those float64 holds exactly, as array_stats
reads them (it casts float16 to float32, bool and integers to float64)."""


# ---------------------------------------------------------------------- summaries
def grad_summaries(grads: Sequence[np.ndarray]) -> list[GradSummary]:
    """:func:`_grad_summary` of each array, the small ones computed together in batches.

    array_stats' eight or so numpy calls per array become about ten per batch.
    """
    alone, batches = _plan(grads, [g.dtype in _REAL for g in grads], _BATCH_LARGEST, _BATCH_FEWEST)
    done = {i: _grad_summary(grads[i]) for i in alone}
    for batch, bounds in batches:
        summaries = _batch_summaries([grads[i] for i in batch], bounds)
        done.update(zip(batch, summaries, strict=True))
    return [done[i] for i in range(len(grads))]


def _grad_summary(grad: np.ndarray) -> GradSummary:
    """The :class:`GradSummary` of one gradient array, from ``array_stats``."""
    return grad_summary(array_stats(grad), int(grad.size))


def _batch_summaries(arrays: Sequence[np.ndarray], bounds: list[int]) -> list[GradSummary]:
    """:func:`_grad_summary` of a batch from :func:`_plan`, with array_stats' formulas.

    An array whose sum of squares is not finite (NaN, ±Inf, squares overflowing float64) or
    fades below float64's normal range, or whose variance cancels, goes to array_stats
    itself, which counts the non-finite entries, rescales, or takes two passes.
    """
    total, total_sq, lows, highs, zeros = _reductions(arrays, bounds)
    summaries: list[GradSummary] = []
    for i, array in enumerate(arrays):
        n, squares = bounds[i + 1] - bounds[i], total_sq[i]
        if math.isfinite(squares) and (squares >= _FADED_64 or zeros[i] == n):
            mean = total[i] / n
            var = squares / n - mean * mean
            if var >= mean * mean * _CANCELLATION:  # array_stats' test, so var >= 0
                lo, hi = lows[i], highs[i]
                summary: GradSummary = {
                    "norm": math.sqrt(squares),
                    "mean": mean,
                    "std": math.sqrt(var),
                    "max_abs": max(abs(lo), abs(hi)),
                    "min": lo,
                    "max": hi,
                    "zero_fraction": zeros[i] / n,
                    "nonfinite": 0,
                    "numel": n,
                }
                summaries.append(summary)
                continue
        summaries.append(_grad_summary(array))
    return summaries


def _reductions(
    arrays: Sequence[np.ndarray], bounds: list[int]
) -> tuple[list[float], list[float], list[float], list[float], list[int]]:
    """Per array of a batch: sum, sum of squares, min, max and zero count, as Python lists.

    One float64 copy of all entries, then one call per statistic (``ufunc.reduceat`` over
    the arrays' segments). min, max and the zero count are exact, so equal array_stats'.
    The sums are of float64 values and squares (a float32's square is exact in float64),
    where array_stats sums in the array's dtype: norm, mean and std agree to its rounding.
    Each sum has at most _BATCH_LARGEST terms, so even summed one by one (numpy sums pairwise)
    its error stays below 1e-12 of the sum of magnitudes. Non-finite entries make non-finite
    sums, without a warning: the caller redoes their arrays.
    """
    edges = np.array(bounds, dtype=np.intp)
    starts = edges[:-1]
    rows = np.empty((2, bounds[-1]))
    values, squares = rows
    np.concatenate(arrays, axis=None, out=values)  # raveled, cast on the way
    zeros_before = np.searchsorted(np.flatnonzero(values == 0), edges).tolist()
    with np.errstate(over="ignore", invalid="ignore"):
        lows = np.minimum.reduceat(values, starts).tolist()
        highs = np.maximum.reduceat(values, starts).tolist()
        np.multiply(values, values, out=squares)
        total, total_sq = np.add.reduceat(rows, starts, axis=1).tolist()
    zeros = [end - start for start, end in itertools.pairwise(zeros_before)]
    return total, total_sq, lows, highs, zeros


def _plan(
    arrays: Sequence[np.ndarray], ok: Sequence[bool], largest: int, fewest: int
) -> tuple[list[int], list[tuple[list[int], list[int]]]]:
    """The indices of the arrays computed alone, and batches of at most _BATCH_ENTRIES entries.

    A batch is its arrays' indices and its bounds: where each array starts when they are
    laid end to end, then the total. Empty arrays go alone, as ``reduceat`` gives an empty
    segment the entry at its start, not the reduction's identity; so do the arrays that
    are not ``ok`` or have more than ``largest`` entries, and those of a batch of fewer
    than ``fewest`` arrays.
    """
    alone: list[int] = []
    batches: list[tuple[list[int], list[int]]] = []
    batch: list[int] = []
    bounds = [0]
    for i, (array, fits) in enumerate(zip(arrays, ok, strict=True)):
        size = array.size
        if not (fits and 0 < size <= largest):
            alone.append(i)
            continue
        if bounds[-1] + size > _BATCH_ENTRIES:
            batches.append((batch, bounds))
            batch, bounds = [], [0]
        batch.append(i)
        bounds.append(bounds[-1] + size)
    batches.append((batch, bounds))
    for batch, _ in batches:
        if len(batch) < fewest:
            alone += batch
    return alone, [b for b in batches if len(b[0]) >= fewest]


# ---------------------------------------------------------------------- histograms
def histograms(
    grads: Sequence[np.ndarray | None], bins: int, ranges: Sequence[tuple[float, float] | None]
) -> list[dict[str, list[Any]] | None]:
    """:func:`_histogram` of each array over its range; None for a None array or range."""
    return [
        None if grad is None or span is None else _histogram(grad, bins, *span)
        for grad, span in zip(grads, ranges, strict=True)
    ]


def _histogram(grad: np.ndarray, bins: int, lo: float, hi: float) -> dict[str, list[Any]] | None:
    """``np.histogram`` of the finite entries, whose extremes are ``lo`` and ``hi``.

    Passing that range spares numpy its own min/max passes and drops NaN and ±Inf without a
    mask. The bounds go in as scalars of the gradient's dtype, as numpy's own ones would, so
    the edges are the same to the last bit. None when ``hi - lo`` overflows the dtype (numpy
    cannot bin that range; a statistic must not stop training).
    """
    scalar = grad.dtype.type
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            counts, edges = np.histogram(grad, bins=bins, range=(scalar(lo), scalar(hi)))
    except ValueError:  # "Too many bins for data range": the edges are not finite
        return None
    return {"counts": counts.tolist(), "edges": edges.tolist()}


# ---------------------------------------------------------------------- update norms
def diff_norms(
    after: Sequence[np.ndarray], before: Sequence[np.ndarray]
) -> list[tuple[float, float]]:
    """(||a - b||, ||b||) of each pair, the small equally shaped ones computed in batches."""
    ok = [
        a.shape == b.shape and a.dtype in _REAL and b.dtype in _REAL
        for a, b in zip(after, before, strict=True)
    ]
    alone, batches = _plan(after, ok, _MOVE_LARGEST, _MOVE_FEWEST)
    done = {i: (_l2_norm(after[i] - before[i]), _l2_norm(before[i])) for i in alone}
    for batch, bounds in batches:
        pairs = _batch_moves([after[i] for i in batch], [before[i] for i in batch], bounds)
        done.update(zip(batch, pairs, strict=True))
    return [done[i] for i in range(len(after))]


def _batch_moves(
    after: Sequence[np.ndarray], prior: Sequence[np.ndarray], bounds: list[int]
) -> list[tuple[float, float]]:
    """(||a - b||, ||b||) of a batch of equally shaped pairs from :func:`_plan`.

    The difference is taken in float64, where the single-array path rounds it to the weights'
    dtype first: the norms agree to that rounding. Non-finite weights give NaN or Inf norms
    and float64 squares overflow to Inf, as on that path, so no pair needs redoing.
    """
    rows = np.empty((2, bounds[-1]))
    np.concatenate(after, axis=None, out=rows[0])
    np.concatenate(prior, axis=None, out=rows[1])
    with np.errstate(over="ignore", invalid="ignore"):
        np.subtract(rows[0], rows[1], out=rows[0])
        np.multiply(rows, rows, out=rows)
        sums = np.add.reduceat(rows, np.array(bounds[:-1], dtype=np.intp), axis=1)
        moved, base = np.sqrt(sums).tolist()
    return list(zip(moved, base, strict=True))


def _l2_norm(array: np.ndarray) -> float:
    """The L2 norm as a float; in float64 only if the squares overflow the array's dtype."""
    flat = array.reshape(-1)
    squares = float(np.vdot(flat, flat))
    if math.isinf(squares):
        flat = flat.astype(np.float64)
        squares = float(np.vdot(flat, flat))
    return math.sqrt(squares)
