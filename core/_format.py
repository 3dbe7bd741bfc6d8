"""Tensor repr in PyTorch's style: ``tensor([1.0000, 2.5000], requires_grad=True)``.

The number format follows torch's ``_Formatter``: integral floats print as ``1.``, others with
four decimals, and scientific notation once the nonzero finite magnitudes span more than a
factor of 1000, exceed 1e8 or (non-integral) drop below 1e-4. Every element is right-aligned to
the widest one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ._tensor import Tensor

_DEFAULT_DTYPES = {np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_)}
_PRECISION = 4
_LINE_WIDTH = 80


def _float_style(data: np.ndarray) -> tuple[Callable[[float], str], int]:
    """The format of one element, and the width every element is padded to (as torch)."""
    values = data.reshape(-1).astype(np.float64)
    finite = values[np.isfinite(values) & (values != 0)]
    if finite.size == 0:
        return _int_style, 1
    magnitudes = np.abs(finite)
    low, high = float(magnitudes.min()), float(magnitudes.max())
    integral = bool(np.all(finite == np.ceil(finite)))
    sci = high / low > 1000.0 or high > 1.0e8 or (not integral and low < 1.0e-4)
    if sci:
        style: Callable[[float], str] = _sci_style
        width = max(len(_sci_style(v)) for v in finite.tolist())
    elif integral:
        style, width = _int_style, max(len(f"{v:.0f}") + 1 for v in finite.tolist())
    else:
        style, width = _fixed_style, max(len(_fixed_style(v)) for v in finite.tolist())
    return style, width


def _sci_style(value: float) -> str:
    return f"{value:.{_PRECISION}e}"


def _fixed_style(value: float) -> str:
    return f"{value:.{_PRECISION}f}"


def _int_style(value: float) -> str:
    text = f"{value:.0f}"
    return text if math.isinf(value) or math.isnan(value) else text + "."


def _element_formatter(data: np.ndarray) -> Callable[[object], str]:
    if data.dtype.kind == "f":
        style, width = _float_style(data)
        return lambda v: style(float(v)).rjust(width)  # type: ignore[arg-type]
    width = max(len(str(v)) for v in data.reshape(-1).tolist())
    return lambda v: str(v.item() if isinstance(v, np.generic) else v).rjust(width)


def _body(data: np.ndarray) -> str:
    if data.size == 0:
        return "[]"
    body = np.array2string(
        data,
        separator=", ",
        prefix="tensor(",
        formatter={"all": _element_formatter(data)},
        max_line_width=_LINE_WIDTH,
        threshold=1000,
        edgeitems=3,
    )
    return body.replace(", ...,", ",  ...,")  # torch pads the summary marker like an element


def tensor_repr(t: Tensor) -> str:
    data = t._data
    extras = []
    if data.size == 0:
        # Nothing to infer the dtype from, so anything but the default float dtype is shown.
        if data.ndim != 1:
            extras.append(f"size={tuple(data.shape)}")
        if data.dtype != np.float32:
            extras.append(f"dtype=hookgrad.{data.dtype}")
    elif data.dtype not in _DEFAULT_DTYPES:
        extras.append(f"dtype=hookgrad.{data.dtype}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._requires_grad:
        extras.append("requires_grad=True")
    suffix = "".join(f", {e}" for e in extras)
    return f"tensor({_body(data)}{suffix})"
