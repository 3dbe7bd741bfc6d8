"""Dtypes and devices: numpy dtypes under PyTorch's names, and a CPU-only ``device``."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "bool_",
    "device",
    "float16",
    "float32",
    "float64",
    "get_default_dtype",
    "int8",
    "int16",
    "int32",
    "int64",
    "resolve_dtype",
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


def get_default_dtype() -> np.dtype[Any]:
    """The dtype of floating tensors created from Python numbers: float32, as in torch."""
    return float32


def resolve_dtype(dtype: Any) -> np.dtype[Any] | None:
    """Accept hookgrad/numpy dtypes, Python types and names ('float32'); None stays None."""
    if dtype is None:
        return None
    if dtype is float:
        return float32
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
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
