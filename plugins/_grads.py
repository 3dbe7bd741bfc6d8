"""Finiteness checks the built-in plugins share: numpy reductions, no per-element Python.

:func:`all_finite` is ``np.isfinite(a).all()``. A sum or dot product would be one pass cheaper
on a finite array, but it overflows on large finite entries and raises numpy's floating-point
warnings on ``inf - inf``; ``isfinite`` never does, and on a 64x64 float32 gradient it costs
about 3 us against 2.5 us for the sum.
"""

from __future__ import annotations

import numpy as np

__all__ = ["all_finite", "nonfinite_counts"]


def all_finite(array: np.ndarray) -> bool:
    """Whether every entry of ``array`` is finite (integer and bool arrays always are)."""
    if array.dtype.kind not in "fc":
        return True
    return bool(np.isfinite(array).all())


def nonfinite_counts(array: np.ndarray) -> tuple[int, int]:
    """``(nan, inf)``: how many entries are NaN and how many are +-Inf."""
    if array.dtype.kind not in "fc":
        return 0, 0
    nan = int(np.count_nonzero(np.isnan(array)))
    inf = int(np.count_nonzero(np.isinf(array)))
    return nan, inf
