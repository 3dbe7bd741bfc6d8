"""Dtypes and devices: numpy dtypes under PyTorch's names, and a CPU-only ``device``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "bool_",
    "device",
    "float16",
    "float32",
    "float64",
    "finfo",
    "get_default_dtype",
    "iinfo",
    "is_floating",
    "is_reduced_float",
    "opmath",
    "opsum",
    "int8",
    "int16",
    "int32",
    "int64",
    "c_type_name",
    "can_require_grad",
    "resolve_dtype",
    "scalar_type_name",
    "uint8",
]

float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
bool_ = np.dtype(np.bool_)


# torch's two spellings of a dtype in error messages: its ScalarType name ("Float") and the
# C++ type behind it ("float").
_SCALAR_TYPE_NAMES = {
    float16: ("Half", "c10::Half"),
    float32: ("Float", "float"),
    float64: ("Double", "double"),
    int8: ("Char", "signed char"),
    int16: ("Short", "short int"),
    int32: ("Int", "int"),
    int64: ("Long", "long int"),
    uint8: ("Byte", "unsigned char"),
    bool_: ("Bool", "bool"),
}


def is_floating(dtype: np.dtype[Any]) -> bool:
    """True for floating dtypes, bfloat16 included (numpy files ml_dtypes' under kind 'V')."""
    return dtype.kind == "f" or dtype.name == "bfloat16"


def is_reduced_float(dtype: np.dtype[Any]) -> bool:
    """float16 and bfloat16: the dtypes torch's CPU kernels compute in float32 ("opmath")
    and round back once, rather than rounding every step."""
    return dtype == float16 or dtype.name == "bfloat16"


def opmath(a: np.ndarray) -> np.ndarray:
    """``a`` in the dtype torch's CPU kernels compute it in: float16 and bfloat16 widened to
    float32 (the caller rounds its result back once), any other dtype as it is."""
    if a.dtype.itemsize == 2 and a.dtype.kind in "fV":  # float16, bfloat16: no int16
        return a.astype(float32)
    return a


def opsum(a: np.ndarray, axis: Any = None, keepdims: bool = False) -> np.ndarray:
    """``a.sum(axis)``; float16 and bfloat16 accumulated in float32 and rounded once, as torch
    sums them (numpy would add bfloat16 in bfloat16). Hot callers test
    ``a.dtype.itemsize > 2`` first and call numpy's sum directly."""
    if a.dtype.itemsize == 2 and a.dtype.kind in "fV":
        return np.asarray(a.sum(axis=axis, keepdims=keepdims, dtype=float32)).astype(a.dtype)
    return np.asarray(a.sum(axis=axis, keepdims=keepdims))


def can_require_grad(dtype: np.dtype[Any]) -> bool:
    """Floating and complex dtypes can require gradients, as in torch."""
    return dtype.kind == "c" or is_floating(dtype)


def scalar_type_name(dtype: np.dtype[Any]) -> str:
    """torch's ScalarType name of ``dtype``, as in ``FloatTensor`` or "grad_dtype 'Float'"."""
    return _names(dtype, (str(dtype), ""))[0]


def c_type_name(dtype: np.dtype[Any]) -> str:
    """The C++ type torch names for ``dtype`` in some messages ("double", "long int")."""
    return _names(dtype, ("", str(dtype)))[1]


def _names(dtype: np.dtype[Any], default: tuple[str, str]) -> tuple[str, str]:
    if dtype.name == "bfloat16":  # not a key of the table: ml_dtypes is imported lazily
        return ("BFloat16", "c10::BFloat16")
    return _SCALAR_TYPE_NAMES.get(dtype, default)


def _bfloat16() -> np.dtype[Any]:
    """numpy's bfloat16, which the ``ml_dtypes`` package supplies (imported on first use)."""
    try:
        import ml_dtypes
    except ImportError:
        raise ImportError(
            "bfloat16 tensors need the ml_dtypes package, which numpy's bfloat16 comes from: "
            "pip install 'hookgrad[bfloat16]'"
        ) from None
    return np.dtype(ml_dtypes.bfloat16)


def __getattr__(name: str) -> Any:
    """``bfloat16`` on first access (PEP 562), so that only its users need ml_dtypes."""
    if name == "bfloat16":
        return _bfloat16()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_default_dtype() -> np.dtype[Any]:
    """The dtype of floating tensors created from Python numbers: float32, as in torch."""
    return float32


def resolve_dtype(dtype: Any) -> np.dtype[Any] | None:
    """Accept hookgrad/numpy dtypes, Python types and names ('float32'); None stays None."""
    if dtype is None:
        return None
    if dtype is float:  # a Python float is a double: torch maps it to float64
        return float64
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    if isinstance(dtype, str) and dtype.removeprefix("torch.") == "bfloat16":
        return _bfloat16()
    return np.dtype(dtype)


class device:
    """A device descriptor. hookgrad computes on the CPU only, so only 'cpu' is accepted."""

    __slots__ = ("index", "type")

    index: int | None
    type: str

    def __init__(self, type: str | device = "cpu", index: int | None = None) -> None:
        if isinstance(type, device):
            index = type.index
            type = type.type
        kind = type.split(":")[0]
        if kind != "cpu":
            raise RuntimeError(f"hookgrad runs on the CPU only; got device {type!r}")
        self.type = "cpu"
        self.index = index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and other.type == self.type

    def __hash__(self) -> int:
        return hash(self.type)

    def __repr__(self) -> str:
        return "device(type='cpu')"

    def __str__(self) -> str:
        return "cpu"


def _torch_name(dtype: np.dtype[Any] | None) -> str:
    return "bool" if dtype == bool_ else str(getattr(dtype, "name", dtype))


class finfo:
    """``torch.finfo``: the limits of a floating dtype (bfloat16's from ml_dtypes), as floats."""

    bits: int
    eps: float
    max: float
    min: float
    tiny: float
    smallest_normal: float
    resolution: float
    dtype: str

    def __init__(self, type: Any = None) -> None:
        dtype = get_default_dtype() if type is None else resolve_dtype(type)
        assert dtype is not None
        if not is_floating(dtype):
            raise TypeError(
                "hookgrad.finfo() requires a floating point input type. Use hookgrad.iinfo "
                "to handle 'hookgrad.finfo'"
            )
        if dtype.name == "bfloat16":
            import ml_dtypes

            info: Any = ml_dtypes.finfo(dtype)
        else:
            info = np.finfo(dtype)
        self.bits = int(info.bits)
        for name in ("eps", "max", "min", "tiny", "smallest_normal"):
            setattr(self, name, float(getattr(info, name)))
        # torch's rule: a power of ten, from the decimal digits eps resolves
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))
        self.dtype = dtype.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(self.dtype)

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
            f"tiny={self.tiny:g}, dtype={self.dtype})"
        )


class iinfo:
    """``torch.iinfo``: the limits of an integer dtype, as ints."""

    bits: int
    max: int
    min: int
    dtype: str

    def __init__(self, type: Any) -> None:
        dtype = resolve_dtype(type)
        if dtype is None or dtype.kind not in "iu":
            raise TypeError(f"hookgrad.{_torch_name(dtype)} is not supported by hookgrad.iinfo")
        info = np.iinfo(dtype)
        self.bits, self.max, self.min, self.dtype = (
            int(info.bits),
            int(info.max),
            int(info.min),
            dtype.name,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(self.dtype)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
