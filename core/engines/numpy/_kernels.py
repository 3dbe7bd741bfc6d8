"""Finiteness checks the built-in plugins share: numpy reductions, no per-element Python.

:func:`all_finite` first takes the dot product of a contiguous float array with itself: one
BLAS pass and no temporary, about half the cost of ``np.isfinite(a).all()`` (1.1 us against
2.3 us on a 32x64 float32 gradient). A NaN or an Inf entry always makes that sum non-finite,
so a finite sum proves every entry finite. A non-finite sum is confirmed entry by entry: finite
values over about 1e19 overflow it, which must not count as a finding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from ..._creation import from_numpy
from ..._tensor import Tensor
from ...nn.utils.clip_grad import _vector_norm, get_total_norm
from .._grad_norms import forget, scaled
from .._protocol import Clamped

__all__ = [
    "agc_clip_",
    "all_finite",
    "clamp",
    "clip_with_norm_",
    "exceeds",
    "count_nonfinite",
    "dtype_name",
    "first_nonfinite",
    "nonfinite_counts",
    "total_norms",
    "unscale_",
    "zero_nonfinite_",
    "zero_units",
]


def all_finite(array: np.ndarray) -> bool:
    """Whether every entry of ``array`` is finite (integer and bool arrays always are).

    A sum of squares that overflows raises no floating-point warning: ``np.vdot`` is no
    ufunc and checks no error flags, so no ``np.errstate`` is needed around it (pinned by
    tests/engines/test_kernels_finite.py).
    """
    kind = array.dtype.kind
    if kind not in "fc":
        return True
    # float16 squares overflow from 256 on, and a strided array would be copied: both go
    # straight to the entry-wise test.
    screened = kind == "f" and array.dtype.itemsize >= 4 and array.flags.c_contiguous
    if screened and math.isfinite(np.vdot(array, array)):
        return True
    return bool(np.isfinite(array).all())


def nonfinite_counts(array: np.ndarray) -> tuple[int, int]:
    """``(nan, inf)``: how many entries are NaN and how many are +-Inf."""
    if array.dtype.kind not in "fc":
        return 0, 0
    nan = int(np.count_nonzero(np.isnan(array)))
    inf = int(np.count_nonzero(np.isinf(array)))
    return nan, inf


# ---------------------------------- clipping: total norms, to a norm, by value, unit-wise (AGC)
_AGC_MIN_GRAD_NORM: Final = 1e-6
"""Floor of a unit's gradient norm in the AGC scale factor (Brock et al., timm): no 0/0."""


def total_norms(
    groups: Sequence[Sequence[Tensor | None]],
    norm_types: Sequence[float],
    error_if_nonfinite: bool = False,
) -> list[tuple[float, ...]]:
    """:meth:`hookgrad.engines.Engine.total_norms`: :func:`get_total_norm` of each group."""
    norms = []
    for group in groups:
        present = [t for t in group if t is not None]
        norms.append(
            tuple(
                float(get_total_norm(present, p, error_if_nonfinite and i == 0))
                for i, p in enumerate(norm_types)
            )
        )
    return norms


def clip_with_norm_(tensors: Sequence[Tensor | None], max_norm: float, total_norm: float) -> float:
    """:meth:`hookgrad.engines.Engine.clip_with_norm_`: :func:`clip_grads_with_norm_`'s
    coefficient and product, skipped when the coefficient is exactly 1."""
    present = [t for t in tensors if t is not None]
    dtype = present[0]._data.dtype if present else np.dtype(np.float32)
    for t in present:  # get_total_norm's result_type, without its 5 us on one dtype
        if t._data.dtype != dtype:
            dtype = np.promote_types(dtype, t._data.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):  # inf * 0 = nan, silently, as in torch
        coefficient = min(max_norm / (dtype.type(total_norm) + 1e-6), 1.0)  # nan stays nan
        if coefficient != 1.0:
            versions = [t._vbox[0] for t in present]
            for t in present:
                np.multiply(t._data, coefficient, out=t._data)
                t._vbox[0] += 1
            scaled(present, versions, float(coefficient))
    return float(coefficient)


def clamp(tensors: Sequence[Tensor | None], limit: float, *, in_place: bool) -> Clamped:
    """:meth:`hookgrad.engines.Engine.clamp`: nothing is copied or written when no entry is
    outside the limit (:func:`exceeds` first)."""
    present = [t for t in tensors if t is not None]
    pre = float(get_total_norm(present, 2.0))
    if not any(exceeds(t._data, limit) for t in present):
        return Clamped(None, pre, pre)
    if in_place:  # clip_grad_value_ on the tensors themselves
        for t in present:
            np.clip(t._data, -limit, limit, out=t._data)
            t._vbox[0] += 1
        clamped = tuple(tensors)
    else:
        clamped = tuple(None if t is None else t.clamp(-limit, limit) for t in tensors)
    after = [t for t in clamped if t is not None]
    return Clamped(clamped, pre, float(get_total_norm(after, 2.0)))


def exceeds(array: np.ndarray, limit: float) -> bool:
    """Whether some entry lies outside ``[-limit, limit]``; NaN entries do not, infinities do.

    ``fmax``/``fmin`` skip NaN where ``max``/``min`` would return it and hide the other
    entries, at the same cost.
    """
    if array.size == 0:
        return False
    return bool(np.fmax.reduce(array, axis=None) > limit) or bool(
        np.fmin.reduce(array, axis=None) < -limit
    )


def agc_clip_(
    weights: Sequence[Tensor], grads: Sequence[Tensor | None], clipping: float, eps: float
) -> tuple[float, float, bool]:
    """:meth:`hookgrad.engines.Engine.agc_clip_`, one parameter at a time (:func:`_agc_one`)."""
    pre_sq, post_sq, clipped = 0.0, 0.0, False
    for weight, grad in zip(weights, grads):
        if grad is not None:
            pre, post, scaled = _agc_one(weight._data, grad, clipping, eps)
            pre_sq, post_sq, clipped = pre_sq + pre, post_sq + post, clipped or scaled
    return math.sqrt(pre_sq), math.sqrt(post_sq), clipped


def _agc_one(
    weight: np.ndarray, grad: Tensor, clipping: float, eps: float
) -> tuple[float, float, bool]:
    """Clip one gradient unit-wise, in place: its squared 2-norm before, after, and whether
    any unit was scaled."""
    grad_norm = _unit_norms(grad._data)
    max_norm = clipping * np.maximum(_unit_norms(weight), eps)
    pre_sq = float(np.vdot(grad_norm, grad_norm))
    over = grad_norm > max_norm
    if not over.any():
        return pre_sq, pre_sq, False
    floor = np.maximum(grad_norm, _AGC_MIN_GRAD_NORM)
    scale = np.where(over, max_norm / floor, 1.0).astype(grad_norm.dtype)
    grad.mul_(from_numpy(scale))
    post_norm = grad_norm * scale
    return pre_sq, float(np.vdot(post_norm, post_norm)), True


def _unit_norms(array: np.ndarray) -> np.ndarray:
    """2-norms of the units of a parameter, timm's ``unitwise_norm`` rule.

    An array of two or more dims has one unit per index of its first dim (an output row of a
    Linear weight), normed over all the other dims and shaped to broadcast against the array
    (keepdims); a vector or scalar (a bias, a gain) is a single unit.
    """
    if array.ndim <= 1:
        flat = array.reshape(-1)
        return np.sqrt(np.dot(flat, flat))
    rows = array.reshape(array.shape[0], math.prod(array.shape[1:]))  # -1 fails on 0 rows
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    return norms.reshape(array.shape[0], *(1,) * (array.ndim - 1))


def zero_units(tensors: Sequence[Tensor | None]) -> list[np.ndarray | None]:
    """:meth:`hookgrad.engines.Engine.zero_units`: each tensor viewed as a matrix with one row
    per unit; the matrices of one row width and dtype joined, then one ``any`` per join (a deep
    stack of equal layers costs one reduction, not one per layer)."""
    groups: dict[tuple[int, np.dtype[Any]], list[tuple[int, np.ndarray]]] = {}
    for k, t in enumerate(tensors):
        if t is not None:
            matrix = _rows(t._data)
            groups.setdefault((matrix.shape[1], matrix.dtype), []).append((k, matrix))
    flags: list[np.ndarray | None] = [None] * len(tensors)
    for members in groups.values():
        parts = [matrix for _, matrix in members]
        joined = parts[0] if len(parts) == 1 else np.concatenate(parts)
        zero: np.ndarray = ~joined.any(axis=1)  # type: ignore[assignment]
        start = 0
        for k, matrix in members:
            flags[k] = zero[start : start + len(matrix)]
            start += len(matrix)
    return flags


def _rows(array: np.ndarray) -> np.ndarray:
    """``array`` as a matrix with one row per index of its first dim (a 0-dim array: one)."""
    if array.ndim == 2:
        return array
    if array.ndim == 0:
        return array.reshape(1, 1)
    return array.reshape(array.shape[0], math.prod(array.shape[1:]))  # -1 fails on 0 rows


# ------------------------------------------------------------------ finiteness and loss scaling
# (nan_guard, grad_scale: the Engine methods of the same names, on hookgrad tensors)
_JOINT_BATCH: Final = 8
"""Batches of at least this many entries are screened together first (see first_nonfinite)."""
_JOINT_ARRAY: Final = 1 << 14
"""Float32/float64 arrays of at most this many entries join a joint screen; larger ones, whose
own screen costs more than a call, and other dtypes are screened alone."""
_JOINT_CHUNK: Final = 1 << 18
"""Entries concatenated per joint screen: the copy stays at about 1 MiB."""


def first_nonfinite(values: Sequence[Any], skip: Any = None) -> int | None:
    """The index of the first tensor in ``values`` with a NaN or Inf (see ``Engine``).

    Each array is screened once: a batch of a backward's gradients holds each array that
    flows between two modules twice, under two tensors (one module's ``grad_input``, the
    next one's ``grad_output``). Such a batch (many small arrays) is first screened together
    (:func:`_all_finite_together`); only if that fails are the arrays screened in order.
    """
    if len(values) >= _JOINT_BATCH and _all_finite_together(values):
        return None
    screened = {id(skip._data)} if isinstance(skip, Tensor) else set()
    for i, value in enumerate(values):
        if isinstance(value, Tensor):
            array = value._data
            key = id(array)  # the arrays outlive the call: no id is reused meanwhile
            if key not in screened:
                if not all_finite(array):
                    return i
                screened.add(key)
    return None


def _all_finite_together(values: Sequence[Any]) -> bool:
    """Whether every tensor in ``values`` is finite, with one BLAS call per chunk of small
    arrays rather than one per array: the small C-contiguous float32/float64 arrays are
    joined, those of one dtype side by side, and each chunk dotted with itself; the others
    (a broadcast gradient, say) are screened alone.
    False may also mean huge finite values (an overflowing sum of squares): the caller
    confirms array by array. Each array is screened once."""
    chunk: list[np.ndarray] = []
    dtype = None  # the chunk's
    entries = 0
    last = None  # the array met last: most repeats come right after it, without a lookup
    seen: set[int] = set()
    for value in values:
        if not isinstance(value, Tensor) or value._data is last:
            continue
        array = last = value._data
        key = id(array)  # the arrays outlive the call: no id is reused meanwhile
        if key in seen:
            continue
        seen.add(key)
        size = array.size
        joins = size <= _JOINT_ARRAY and array.flags.c_contiguous
        if joins and array.dtype is dtype and entries < _JOINT_CHUNK:
            chunk.append(array)  # the common case: one more gradient like the last
            entries += size
        elif not joins or array.dtype not in _NORMED_AS_IS:
            if not all_finite(array):
                return False
        else:  # a new chunk
            if chunk and not _joint_finite(chunk):
                return False
            chunk, dtype, entries = [array], array.dtype, size
    return not chunk or _joint_finite(chunk)


def _joint_finite(arrays: list[np.ndarray]) -> bool:
    """Whether every entry of ``arrays`` (C-contiguous, of one float32 or float64 dtype) is
    finite, unless huge: their bytes joined (a copy without a call per array) and dotted with
    themselves."""
    joined = b"".join(arrays)  # type: ignore[arg-type]  # numpy's stubs: ndarray is no Buffer
    joint = np.frombuffer(joined, dtype=arrays[0].dtype)
    return math.isfinite(np.vdot(joint, joint))


def count_nonfinite(tensors: Sequence[Any]) -> list[tuple[int, int]]:
    """``(nan, inf)`` per tensor, (0, 0) for None; finite arrays cost one screen."""
    return [
        (0, 0) if t is None or all_finite(t._data) else nonfinite_counts(t._data) for t in tensors
    ]


def zero_nonfinite_(tensors: Sequence[Any]) -> int:
    """Zero the NaN/Inf entries in place (``masked_fill_``, only where there are some)."""
    count = 0
    for t in tensors:
        if t is None or all_finite(t._data):
            continue
        bad = np.asarray(~np.isfinite(t._data))  # an array also for a 0-d tensor
        count += int(np.count_nonzero(bad))
        t.masked_fill_(from_numpy(bad), 0.0)  # bumps the version counter
    return count


def unscale_(tensors: Sequence[Any], inv_scale: float) -> bool:
    """Check for NaN/Inf, then multiply by the float32 ``inv_scale`` in place, as torch's CPU
    kernel does: a float32 or float64 product rounded to the tensor's dtype, and the version
    counter left as it is."""
    factor = np.float32(inv_scale)
    found_inf = False
    for t in tensors:
        if t is not None:
            array = t._data
            found_inf = found_inf or not all_finite(array)
            np.multiply(array, factor, out=array)
    forget(tensors)  # written with no version bump: their shared norms are stale
    return found_inf


_DTYPE_NAMES: dict[np.dtype[Any], str] = {}


def dtype_name(tensor: Any) -> str:
    """numpy's name of the tensor's dtype, looked up: ``dtype.name`` builds it each time."""
    dtype = tensor._data.dtype
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


# -------------------------------------------------------- gradient norms (the per-step summary)
# (the kernels behind hookgrad.engines.grad_norms, on hookgrad tensors)
_NORMED_AS_IS: Final = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
_FLOAT32: Final = np.dtype(np.float32)
"""Dtypes normed in their own precision, as get_total_norm norms them (the others in float32)."""


def grad_norms(tensors: Sequence[Tensor | None]) -> list[float | None]:
    """:meth:`hookgrad.engines.Engine.grad_norms`: ``get_total_norm``'s per-tensor norm
    (``sqrt(dot(a, a))`` in the array's dtype) of every float32 and float64 tensor.

    A model's gradients are all float32: their dot products are taken one by one (``vdot``
    reads any layout without a reshape) and their square roots in one call, which is what a
    norm costs apart from numpy's per-call overhead.
    """
    arrays = [None if t is None else t._data for t in tensors]
    if arrays and all(a is not None and a.dtype == _FLOAT32 and a.size > 1 for a in arrays):
        # No np.errstate (a third of this path's cost on a small model): vdot is no ufunc and
        # checks no error flags when its sum overflows, and the square root of a sum of squares
        # (>= 0, inf or NaN) raises none either.
        dots = np.array([np.vdot(a, a) for a in arrays], dtype=np.float32)  # type: ignore[arg-type]
        return np.sqrt(dots).tolist()
    norms: list[float | None] = []
    with np.errstate(over="ignore", invalid="ignore"):  # np.dot warns of an overflowing sum
        for array in arrays:
            if array is None:
                norms.append(None)
                continue
            if array.dtype not in _NORMED_AS_IS:
                array = array.astype(np.float32 if array.dtype.kind == "f" else np.float64)
            norms.append(float(_vector_norm(array, 2.0)))
    return norms


def total_norm_of(tensors: Sequence[Tensor], norms: Sequence[float]) -> float | None:
    """:meth:`hookgrad.engines.Engine.total_norm_of`: ``get_total_norm``'s second step (the
    norm of the per-tensor norms, in the tensors' promoted dtype) on ``norms``."""
    if not tensors:
        return 0.0
    dtype = tensors[0]._data.dtype
    for t in tensors:
        if t._data.dtype not in _NORMED_AS_IS:
            return None
        if t._data.dtype != dtype:
            dtype = np.promote_types(dtype, t._data.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # a nan or inf norm: silently, as torch
        return float(_vector_norm(np.array(norms, dtype=dtype), 2.0))
