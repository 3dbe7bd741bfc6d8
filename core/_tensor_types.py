"""The legacy typed tensor classes (``hookgrad.FloatTensor``, ``LongTensor``, ...) and
``Tensor.type()``'s names for them.

As in torch, each class is a constructor (``FloatTensor([1, 2])``, ``FloatTensor(2, 3)``) and
an ``isinstance`` check on the dtype (``isinstance(x, LongTensor)`` for any int64 tensor); it
is not a subclass of Tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _dtype
from ._dtype import scalar_type_name
from ._tensor import Tensor, _wrap

__all__ = [
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
    "type_dtype",
    "type_name",
]


def type_name(dtype: np.dtype[Any]) -> str:
    """``Tensor.type()``: ``'torch.FloatTensor'`` for float32, and so on."""
    return f"torch.{scalar_type_name(dtype)}Tensor"


class _TensorType(type):
    """Metaclass of the typed classes: calling one builds a Tensor of its dtype, and
    ``isinstance`` checks a tensor's dtype."""

    _dtype: np.dtype[Any]

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj._data.dtype == cls._dtype

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:
        from ._creation import _cpu_only

        _cpu_only(device)
        if len(args) == 1 and isinstance(args[0], Tensor):
            source = args[0]
            if source._data.dtype != cls._dtype:
                raise TypeError(
                    f"expected {type_name(cls._dtype)} (got {type_name(source._data.dtype)})"
                )
            return source
        return _wrap(legacy_array(args, cls._dtype, cls.__name__))


def legacy_array(args: tuple[Any, ...], dtype: np.dtype[Any], caller: str) -> np.ndarray:
    """The array a legacy constructor (``torch.Tensor``, ``FloatTensor``) builds from its
    positional arguments: sizes (ints or one ``Size``) give zeros of that shape (torch leaves
    them uninitialised), one sequence or array gives its values in ``dtype``."""
    from ._creation import _shape, _to_array
    from ._size import Size

    if len(args) == 1 and isinstance(args[0], Size):  # Size([]) is the 0-dim shape
        return np.zeros(_shape(tuple(args[0]), caller), dtype=dtype)
    if not args or all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        return np.zeros(_shape(args or (0,), caller), dtype=dtype)
    if len(args) == 1:
        if isinstance(args[0], int | float | bool):
            raise TypeError(f"new(): data must be a sequence (got {type(args[0]).__name__})")
        return _to_array(args[0], dtype, copy=True)
    raise TypeError(f"{caller}() received an invalid combination of arguments")


def _typed(name: str, dtype: np.dtype[Any]) -> Any:
    # Not a Tensor subclass (as in torch): instances are plain Tensors of the dtype.
    cls = _TensorType(name, (), {"__slots__": (), "__module__": "hookgrad"})
    cls._dtype = dtype
    return cls


FloatTensor = _typed("FloatTensor", _dtype.float32)
DoubleTensor = _typed("DoubleTensor", _dtype.float64)
HalfTensor = _typed("HalfTensor", _dtype.float16)
LongTensor = _typed("LongTensor", _dtype.int64)
IntTensor = _typed("IntTensor", _dtype.int32)
ShortTensor = _typed("ShortTensor", _dtype.int16)
CharTensor = _typed("CharTensor", _dtype.int8)
ByteTensor = _typed("ByteTensor", _dtype.uint8)
BoolTensor = _typed("BoolTensor", _dtype.bool_)

_BY_NAME = {
    type_name(cls._dtype): cls._dtype
    for cls in (
        FloatTensor,
        DoubleTensor,
        HalfTensor,
        LongTensor,
        IntTensor,
        ShortTensor,
        CharTensor,
        ByteTensor,
        BoolTensor,
    )
}


def type_dtype(target: Any) -> Any:
    """The dtype ``Tensor.type(target)`` casts to: a dtype, a typed class or its name."""
    if isinstance(target, _TensorType):
        return target._dtype
    if isinstance(target, str) and target in _BY_NAME:
        return _BY_NAME[target]
    if isinstance(target, str) and target.startswith("torch.cuda."):
        raise RuntimeError(f"hookgrad runs on the CPU only; got type {target!r}")
    if isinstance(target, str) and target.startswith("torch."):
        raise ValueError(f"invalid type: '{target}'")
    return target
