"""Tensor factories and the seeded random generator (``manual_seed``)."""

from __future__ import annotations

import operator
import os
from typing import Any

import numpy as np

from ._dtype import device as _device
from ._dtype import float32, int64, resolve_dtype
from ._random_stream import TorchStream, decode_state, encode_state
from ._tensor import Tensor, _wrap

__all__ = [
    "arange",
    "as_tensor",
    "default_generator",
    "empty",
    "empty_like",
    "eye",
    "from_numpy",
    "full",
    "full_like",
    "linspace",
    "manual_seed",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "randperm",
    "tensor",
    "zeros",
    "zeros_like",
]


class Generator:
    """A seedable source of random numbers: torch's CPU generator, draw for draw.

    Seeded alike, hookgrad and torch draw the same numbers (see :mod:`hookgrad._random_stream`),
    so weight initialisation, ``rand``/``randn``, dropout masks and shuffles repeat torch's.
    """

    def __init__(self, device: Any = "cpu") -> None:
        if device != "cpu":
            _cpu_only(device)
        self.stream = TorchStream()

    def manual_seed(self, seed: int) -> Generator:
        self.stream.manual_seed(int(seed))
        return self

    def initial_seed(self) -> int:
        return self.stream.seed

    def seed(self) -> int:
        """Reseed from the operating system's entropy, as torch does; returns the seed."""
        value = int.from_bytes(os.urandom(8), "little")
        self.manual_seed(value)
        return value

    def get_state(self) -> Tensor:
        """The generator's state as a uint8 tensor, for :meth:`set_state`."""
        return _wrap(encode_state(self.stream))

    def set_state(self, new_state: Tensor) -> Generator:
        decode_state(self.stream, new_state.numpy() if isinstance(new_state, Tensor) else new_state)
        return self

    @property
    def device(self) -> Any:
        return _device("cpu")


# torch keeps one process-wide default generator too; manual_seed() reseeds it.
default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator: weight init, rand/randn and dropout become reproducible."""
    return default_generator.manual_seed(int(seed))


def _infer_dtype(arr: np.ndarray, source: Any) -> np.dtype[Any]:
    """torch's dtype for Python data: float32, int64, bool (complex kept); refuse the rest.

    ``arr`` is ``np.asarray(source)``. numpy falls back to uint64 or object arrays for
    integers past int64, to object arrays for None or other objects, and to string arrays
    for text; torch refuses all of them.
    """
    kind = arr.dtype.kind
    if kind == "f":
        return float32
    if kind == "i":
        return int64
    if kind in "bc":
        return arr.dtype
    if kind in "US":
        raise TypeError("new(): invalid data type 'str'")
    odd = _first_non_number(source)
    if kind == "u" or odd is _NUMBERS_ONLY:  # integers out of int64's range
        raise ValueError("Overflow when unpacking long long")
    raise RuntimeError(f"Could not infer dtype of {type(odd).__name__}")


_NUMBERS_ONLY: Any = object()
"""What :func:`_first_non_number` returns when every leaf is a number."""


def _first_non_number(data: Any) -> Any:
    """The first leaf of nested lists/tuples that is not a number, else ``_NUMBERS_ONLY``."""
    if isinstance(data, (list, tuple)):
        for item in data:
            odd = _first_non_number(item)
            if odd is not _NUMBERS_ONLY:
                return odd
        return _NUMBERS_ONLY
    return _NUMBERS_ONLY if isinstance(data, (int, float, complex, np.number, np.bool_)) else data


def _to_array(data: Any, dtype: Any, *, copy: bool) -> np.ndarray:
    """Convert data to an array: Python floats become float32, ints int64 (torch defaults)."""
    target = resolve_dtype(dtype)
    if isinstance(data, Tensor):
        arr = data._data
    elif isinstance(data, np.ndarray):
        arr = data
    elif isinstance(data, np.generic):  # numpy scalars keep their dtype, as in torch
        arr = np.asarray(data)
    elif isinstance(data, (list, tuple)) and any(isinstance(v, Tensor) for v in data):
        arr = np.asarray([v._data if isinstance(v, Tensor) else v for v in data])
        target = target or arr.dtype
    else:
        arr = np.asarray(data)
        if target is None:
            target = _infer_dtype(arr, data)
    if target is not None and arr.dtype != target:
        return arr.astype(target)
    return np.array(arr, copy=True) if copy else arr


def _cpu_only(device: Any) -> None:
    """torch's ``device=`` argument: hookgrad computes on the CPU only; another device raises."""
    if device is not None:
        _device(device)


def tensor(
    data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """Copy ``data`` (nested lists, numbers, arrays) into a new leaf tensor."""
    _cpu_only(device)
    out = _wrap(_to_array(data, dtype, copy=True))
    if requires_grad:
        out.requires_grad_(True)
    return out


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Like :func:`tensor`, but reuse a Tensor or array's memory when the dtype already fits."""
    _cpu_only(device)
    if isinstance(data, Tensor) and (dtype is None or resolve_dtype(dtype) == data._data.dtype):
        return data
    return _wrap(_to_array(data, dtype, copy=False))


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``array`` (keeps its dtype)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    return _wrap(array)


def _shape(size: tuple[Any, ...], caller: str, keyword: Any = None) -> tuple[int, ...]:
    """A size given as ints, one sequence of ints or the ``size=`` keyword (``keyword``),
    checked as torch checks it."""
    if keyword is not None:
        if size:
            raise TypeError(f"{caller}() got multiple values for argument 'size'")
        size = (keyword,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    dims = []
    for s in size:
        try:
            dims.append(operator.index(s))
        except TypeError:
            raise TypeError(
                f"{caller}(): argument 'size' (position 1) must be tuple of ints, not "
                f"{type(s).__name__}"
            ) from None
    negative = [d for d in dims if d < 0]
    if negative:
        raise RuntimeError(f"Trying to create tensor with negative dimension {negative[0]}: {dims}")
    return tuple(dims)


def _leaf(arr: np.ndarray, requires_grad: bool) -> Tensor:
    out = _wrap(arr)
    if requires_grad:
        out.requires_grad_(True)
    return out


def zeros(
    *sizes: Any,
    size: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    _cpu_only(device)
    return _leaf(
        np.zeros(_shape(sizes, "zeros", size), dtype=resolve_dtype(dtype) or float32), requires_grad
    )


def ones(
    *sizes: Any,
    size: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    _cpu_only(device)
    return _leaf(
        np.ones(_shape(sizes, "ones", size), dtype=resolve_dtype(dtype) or float32), requires_grad
    )


def empty(
    *sizes: Any,
    size: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    _cpu_only(device)
    return _leaf(
        np.empty(_shape(sizes, "empty", size), dtype=resolve_dtype(dtype) or float32), requires_grad
    )


def full(
    size: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    _cpu_only(device)
    target = resolve_dtype(dtype) or _infer_dtype(np.asarray(fill_value), fill_value)
    return _leaf(np.full(_shape((size,), "full"), fill_value, dtype=target), requires_grad)


def _like(input: Tensor, dtype: Any) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and dtype of a ``*_like`` result (``memory_format=`` is accepted by the
    callers and changes nothing: hookgrad tensors are row-major)."""
    return input._data.shape, resolve_dtype(dtype) or input._data.dtype


def zeros_like(
    input: Tensor,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    _cpu_only(device)
    shape, dt = _like(input, dtype)
    return _leaf(np.zeros(shape, dtype=dt), requires_grad)


def ones_like(
    input: Tensor,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    _cpu_only(device)
    shape, dt = _like(input, dtype)
    return _leaf(np.ones(shape, dtype=dt), requires_grad)


def empty_like(
    input: Tensor,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    _cpu_only(device)
    shape, dt = _like(input, dtype)
    return _leaf(np.empty(shape, dtype=dt), requires_grad)


def full_like(
    input: Tensor,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    _cpu_only(device)
    shape, dt = _like(input, dtype)
    return _leaf(np.full(shape, fill_value, dtype=dt), requires_grad)


def rand_like(
    input: Tensor,
    *,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    _cpu_only(device)
    shape, dt = _like(input, dtype)
    return _leaf(_generator(generator).uniform(shape, dt), requires_grad)


def randn_like(
    input: Tensor,
    *,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    _cpu_only(device)
    shape, dt = _like(input, dtype)
    return _leaf(_generator(generator).normal(shape, dt), requires_grad)


def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    _cpu_only(device)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    values = np.arange(start, end, step)
    target = resolve_dtype(dtype) or _infer_dtype(values, values)
    return _leaf(values.astype(target), requires_grad)


def linspace(
    start: float,
    end: float,
    steps: int,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    _cpu_only(device)
    target = resolve_dtype(dtype) or float32
    return _leaf(_linspace_points(start, end, steps, target), requires_grad)


def _linspace_points(start: float, end: float, steps: int, dtype: np.dtype[Any]) -> np.ndarray:
    """torch's CPU points: the step in the output's type (double for integers), the first half
    counted up from ``start`` and the rest down from ``end``, each point one fused multiply-add
    (computed wider, then rounded once: float32's points are torch's to the last bit)."""
    compute = np.dtype(dtype if np.issubdtype(dtype, np.floating) else np.float64)
    first, last = compute.type(start), compute.type(end)
    step = (last - first) / compute.type(max(steps - 1, 1))
    wide = np.dtype(np.longdouble if compute.itemsize >= 8 else np.float64)
    w_first, w_last, w_step = (np.asarray(v, dtype=wide) for v in (first, last, step))
    idx = np.arange(steps)
    up = w_step * idx.astype(wide) + w_first
    down = w_last - w_step * (steps - 1 - idx).astype(wide)
    return np.where(idx < max(steps // 2, 1), up, down).astype(dtype)


def eye(
    n: int,
    m: int | None = None,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    _cpu_only(device)
    return _leaf(np.eye(n, m, dtype=resolve_dtype(dtype) or float32), requires_grad)


def _generator(generator: Generator | None) -> TorchStream:
    return (generator or default_generator).stream


def rand(
    *sizes: Any,
    size: Any = None,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform samples on [0, 1)."""
    _cpu_only(device)
    shape = _shape(sizes, "rand", size)
    return _leaf(
        _generator(generator).uniform(shape, resolve_dtype(dtype) or float32), requires_grad
    )


def randn(
    *sizes: Any,
    size: Any = None,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Standard normal samples."""
    _cpu_only(device)
    shape = _shape(sizes, "randn", size)
    return _leaf(
        _generator(generator).normal(shape, resolve_dtype(dtype) or float32), requires_grad
    )


def randint(
    low: int,
    high: Any = None,
    size: Any = None,
    *,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
) -> Tensor:
    """Integers uniform on [low, high); ``randint(high, size)`` and ``randint(high,
    size=size)`` start at 0."""
    _cpu_only(device)
    if size is None:
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    arr = _generator(generator).integers(low, high, _shape((size,), "randint"))
    return _wrap(arr.astype(resolve_dtype(dtype) or int64))


def randperm(
    n: int, *, generator: Generator | None = None, dtype: Any = None, device: Any = None
) -> Tensor:
    _cpu_only(device)
    return _wrap(_generator(generator).permutation(n).astype(resolve_dtype(dtype) or int64))


def _rebuild(data: np.ndarray, requires_grad: bool) -> Tensor:
    """Unpickling target of Tensor.__reduce_ex__."""
    return _leaf(data, requires_grad)
