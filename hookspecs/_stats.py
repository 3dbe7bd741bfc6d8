"""Tensor summaries: the JSON-safe numbers sinks write instead of arrays.

A summary is computed with numpy on the tensor's array, non-finite-safe: ``norm``, ``mean``,
``std``, ``min`` and ``max`` are over the finite entries, and the others are counted. The
common case (every entry finite) is decided by the sum of squares itself, so a finite tensor
costs one BLAS dot, one sum, min, max and a zero count, with no mask.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Final

import numpy as np
from typing_extensions import TypedDict  # pydantic validates it on Python 3.11 too

from hookgrad._tensor import Tensor
from hookgrad.engines import engine_of

__all__ = [
    "TENSOR_SUMMARY_SCHEMA",
    "GradSummary",
    "TensorSummary",
    "array_stats",
    "grad_summary",
    "tensor_stats",
    "to_json",
]

# ``var`` from the sum of squares cancels when the mean dominates; recompute it from the
# centred values when mean**2 > var / _CANCELLATION.
_CANCELLATION: Final = 1e-2

# A sum of squares below tiny / eps may hold squares that fell into the subnormal range and
# lost their digits (float32 entries under about 1e-19, a vanishing gradient): it is
# recomputed in float64, rescaled if needed, as an overflowing one is.
_FADED: Final = {
    np.dtype(t): float(np.finfo(t).tiny / np.finfo(t).eps) for t in (np.float32, np.float64)
}
_FADED_ANY: Final = max(_FADED.values())  # one float comparison in the common case
_MAX_DEPTH: Final = 8
_MAX_REPR: Final = 120


class TensorSummary(TypedDict):
    """The summary of one tensor (see :func:`tensor_stats`)."""

    shape: list[int]
    dtype: str
    norm: float
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    nonfinite: int
    nan: int
    inf: int
    zero_fraction: float | None


_NUMBER_OR_NULL: Final[dict[str, Any]] = {"anyOf": [{"type": "number"}, {"type": "null"}]}

TENSOR_SUMMARY_SCHEMA: Final[dict[str, Any]] = {
    "title": "TensorSummary",
    "description": (
        "A tensor as sinks record it. norm, mean, std (population), min and max are over the "
        "finite entries (null when there are none); nonfinite = nan + inf counts the rest; "
        "zero_fraction is exact zeros over all entries (null for an empty tensor)."
    ),
    "type": "object",
    "properties": {
        "shape": {"type": "array", "items": {"type": "integer"}},
        "dtype": {"type": "string"},
        "norm": {"type": "number"},
        "mean": _NUMBER_OR_NULL,
        "std": _NUMBER_OR_NULL,
        "min": _NUMBER_OR_NULL,
        "max": _NUMBER_OR_NULL,
        "nonfinite": {"type": "integer"},
        "nan": {"type": "integer"},
        "inf": {"type": "integer"},
        "zero_fraction": _NUMBER_OR_NULL,
    },
    "required": list(TensorSummary.__annotations__),
    "additionalProperties": False,
}


def tensor_stats(tensor: Any) -> TensorSummary:
    """Summarise ``tensor``: shape, dtype, L2 norm, mean, std, min, max and entry counts.

    ``std`` is the population standard deviation (correction 0) of the finite entries.
    ``nonfinite`` counts NaN and ±Inf entries (``nan`` and ``inf`` split it);
    ``zero_fraction`` is the share of exact zeros among all entries. Shared-memory read only:
    the tensor is not modified. A tensor of another engine (``torch.Tensor``) is summarised by
    that engine, where the tensor is (:meth:`hookgrad.engines.Engine.summaries`).
    """
    if isinstance(tensor, Tensor):
        return array_stats(tensor._data)
    engine = engine_of(tensor)
    if engine is None:
        raise TypeError(f"tensor_stats() takes a tensor, got {type(tensor).__name__}")
    return engine.summaries([tensor])[0]


def array_stats(array: np.ndarray) -> TensorSummary:
    """:func:`tensor_stats` for a numpy array."""
    n = int(array.size)
    summary = TensorSummary(
        shape=list(array.shape),
        dtype=_dtype_name(array.dtype),
        norm=0.0,
        mean=None,
        std=None,
        min=None,
        max=None,
        nonfinite=0,
        nan=0,
        inf=0,
        zero_fraction=None,
    )
    if n == 0:
        return summary
    x = array.reshape(-1)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)  # bool and integer tensors: exact up to 2**53
    elif x.dtype.itemsize < 4:
        x = x.astype(np.float32)  # float16 squares overflow at 256
    summary["zero_fraction"] = int(np.count_nonzero(x == 0)) / n
    ss = float(np.vdot(x, x))
    scale = 1.0
    if not math.isfinite(ss) or (
        ss < _FADED_ANY and ss < _FADED.get(x.dtype, 0.0) and summary["zero_fraction"] != 1.0
    ):
        x, ss, scale = _finite_part(x, summary)
        if x.size == 0:
            return summary
    _moments(x, ss, scale, summary)
    return summary


def _finite_part(x: np.ndarray, summary: TensorSummary) -> tuple[np.ndarray, float, float]:
    """The finite entries of ``x`` in float64, over ``scale``, their sum of squares, ``scale``.

    Counts the non-finite entries into ``summary``. ``scale`` is 1 unless the squares overflow
    or fade below float64's normal range; then it is the power of two at or just below the
    largest magnitude (exact to undo).
    """
    finite = np.isfinite(x)
    kept = int(np.count_nonzero(finite))
    if kept != x.size:
        nan = int(np.count_nonzero(np.isnan(x)))
        summary["nan"] = nan
        summary["inf"] = x.size - kept - nan
        summary["nonfinite"] = x.size - kept
        x = x[finite]
    x = x.astype(np.float64)  # finite float32 entries whose squares overflow float32
    ss = float(np.vdot(x, x))
    if math.isfinite(ss) and (ss >= _FADED[x.dtype] or not x.any()):
        return x, ss, 1.0
    # 2**(e - 1) <= max |x| < 2**e; dividing by 2**(e - 1), not 2**e, keeps the scale finite
    # for entries at 2**1023 and above.
    scale = math.ldexp(1.0, math.frexp(float(np.abs(x).max()))[1] - 1)
    x = x / scale
    return x, float(np.vdot(x, x)), scale


def _moments(x: np.ndarray, ss: float, scale: float, summary: TensorSummary) -> None:
    """Fill norm, mean, std, min and max of the finite, non-empty ``x * scale``."""
    m = x.size
    mean = float(x.sum()) / m  # numpy's pairwise sum: float32 keeps ~7 digits
    var = ss / m - mean * mean
    if var < mean * mean * _CANCELLATION:  # two passes in float64 instead
        x64 = x.astype(np.float64)
        mean = float(x64.sum()) / m
        d = x64 - mean
        var = float(np.vdot(d, d)) / m
    summary["norm"] = math.sqrt(ss) * scale
    summary["mean"] = mean * scale
    summary["std"] = math.sqrt(max(var, 0.0)) * scale
    summary["min"] = float(x.min()) * scale
    summary["max"] = float(x.max()) * scale


@lru_cache(maxsize=64)
def _dtype_name(dtype: np.dtype[Any]) -> str:
    return dtype.name  # a Python-level property in numpy: worth caching


class GradSummary(TypedDict):
    """A gradient as grad_stats records it (keys in record order): :class:`TensorSummary`'s
    moments with ``max_abs`` and ``numel``, and a ``norm`` that is None when it overflows."""

    norm: float | None
    mean: float | None
    std: float | None
    max_abs: float | None
    min: float | None
    max: float | None
    zero_fraction: float | None
    nonfinite: int
    numel: int


def grad_summary(stats: TensorSummary, numel: int) -> GradSummary:
    """The :class:`GradSummary` of a tensor of ``numel`` entries whose summary is ``stats``.

    ``norm``, ``mean``, ``std``, ``min``, ``max`` and ``max_abs`` are over the finite entries
    (None, or a norm of 0.0, when there are none); ``nonfinite`` counts the rest. Each engine
    computes ``stats`` where its tensors are; this is the one place that turns it into a record.
    """
    lo, hi, norm = stats["min"], stats["max"], stats["norm"]
    return GradSummary(
        norm=norm if math.isfinite(norm) else None,
        mean=stats["mean"],
        std=stats["std"],
        max_abs=None if lo is None or hi is None else max(abs(lo), abs(hi)),
        min=lo,
        max=hi,
        zero_fraction=stats["zero_fraction"],
        nonfinite=stats["nonfinite"],
        numel=numel,
    )


NONFINITE_JSON: Final = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
"""How hookgrad writes non-finite floats in JSON (protobuf's JSON mapping): ``str(float)`` to
the string, so every record is RFC 8259 JSON. The JSON-lines sink and :func:`to_json` both
use it; ``hookgrad.runtime.read_events`` turns the strings back into floats."""


def json_float(value: float) -> float | str:
    """``value`` itself if finite, else its string in :data:`NONFINITE_JSON`."""
    return value if math.isfinite(value) else NONFINITE_JSON[str(float(value))]


def to_json(value: Any, depth: int = 0) -> Any:
    """A JSON-safe form of a hook argument: tensors become summaries, containers lists/dicts.

    Python scalars stay as they are (non-finite floats become ``"NaN"``, ``"Infinity"``,
    ``"-Infinity"``, as in the logs); numpy scalars become Python scalars; anything else becomes
    its ``repr`` (shortened), so a summary never fails on an unusual argument.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Tensor):
        return array_stats(value._data)
    if isinstance(value, float):
        return json_float(value)
    if depth >= _MAX_DEPTH:
        return "..."
    if isinstance(value, tuple | list):
        return [to_json(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return array_stats(value)
    if isinstance(value, np.generic):
        return to_json(value.item(), depth + 1)
    engine = engine_of(value)
    if engine is not None:  # another engine's tensor
        return engine.summaries([value])[0]
    text = repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."
