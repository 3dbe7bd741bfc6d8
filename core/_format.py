"""Tensor repr as torch prints it, and ``torch.set_printoptions``.

A port of torch's ``_tensor_str`` onto numpy arrays, so the text is torch's to the character:
one number format for the whole tensor (``_Formatter``: integral floats as ``1.``, fixed with
``precision`` decimals, or scientific once the nonzero finite magnitudes span more than a factor
of 1000, exceed 1e8 or drop below 1e-4), every element right-aligned to the widest, rows
wrapped at ``linewidth``, tensors of more than ``threshold`` elements summarised to
``edgeitems`` per side around ``...``, and suffixes (``dtype=``, ``grad_fn=``) wrapped too.

Dtypes print with torch's module name, ``dtype=torch.float64``: the text a user pastes back
under ``import hookgrad as torch``, and the spelling of ``torch.Size(...)``, ``Tensor.type()``
and ``torch.contiguous_format`` elsewhere in hookgrad.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ._dtype import is_floating

if TYPE_CHECKING:
    from ._tensor import Tensor

__all__ = ["get_printoptions", "printoptions", "set_printoptions", "tensor_repr"]

_DEFAULT_DTYPES = {np.dtype(np.float32), np.dtype(np.complex64), np.dtype(np.int64), np.dtype(bool)}


@dataclasses.dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = _PrintOptions()
_PROFILES = {
    "default": _PrintOptions(),
    "short": _PrintOptions(precision=2, edgeitems=2),
    "full": _PrintOptions(threshold=math.inf),
}


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """Set how tensors print (torch's ``set_printoptions``): a ``profile`` ("default",
    "short", "full") first, then each option given; ``sci_mode`` None lets the values decide."""
    if profile in _PROFILES:
        base = _PROFILES[profile]
        PRINT_OPTS.precision, PRINT_OPTS.threshold = base.precision, base.threshold
        PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = base.edgeitems, base.linewidth
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict[str, Any]:
    """The current options, as keyword arguments for :func:`set_printoptions`."""
    return dataclasses.asdict(PRINT_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs: Any) -> Iterator[None]:
    """Print with ``kwargs`` inside the block, then restore the options."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    """One number format and width for every element of a tensor (torch's ``_Formatter``)."""

    def __init__(self, data: np.ndarray) -> None:
        self.floating = is_floating(data.dtype)
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        if not self.floating:
            self.max_width = max([1, *(len(str(v)) for v in data.reshape(-1).tolist())])
            return
        values = data.reshape(-1).astype(np.float64)
        finite = values[np.isfinite(values) & (values != 0)]
        if finite.size == 0:
            return
        low, high = float(np.abs(finite).min()), float(np.abs(finite).max())
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        self.sci_mode = (
            high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4
            if PRINT_OPTS.sci_mode is None
            else PRINT_OPTS.sci_mode
        )
        precision = PRINT_OPTS.precision
        if self.sci_mode:
            widths = (len(f"{v:.{precision}e}") for v in finite.tolist())
        elif self.int_mode:
            widths = (len(f"{v:.0f}") + 1 for v in finite.tolist())
        else:
            widths = (len(f"{v:.{precision}f}") for v in finite.tolist())
        self.max_width = max(self.max_width, *widths)

    def format(self, value: Any) -> str:
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:{self.max_width}.{PRINT_OPTS.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}"
            if not (math.isinf(value) or math.isnan(value)):
                text += "."
        else:
            text = f"{value:.{PRINT_OPTS.precision}f}"
        return (self.max_width - len(text)) * " " + text


def _python_values(data: np.ndarray) -> list[Any]:
    """Elements as Python numbers (float16/bfloat16 through float64, exactly)."""
    if is_floating(data.dtype) and data.dtype.itemsize < 4:
        data = data.astype(np.float64)
    return data.tolist()


def _vector_str(data: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    edge = PRINT_OPTS.edgeitems
    per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / (fmt.max_width + 2)))
    if summarize and not edge:
        items = ["..."]
    elif summarize and data.shape[0] > 2 * edge:
        items = [
            *(fmt.format(v) for v in _python_values(data[:edge])),
            " ...",
            *(fmt.format(v) for v in _python_values(data[-edge:])),
        ]
    else:
        items = [fmt.format(v) for v in _python_values(data)]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested_str(data: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if data.ndim == 0:
        return fmt.format(_python_values(data))
    if data.ndim == 1:
        return _vector_str(data, indent, summarize, fmt)
    edge, rows = PRINT_OPTS.edgeitems, data.shape[0]
    if summarize and rows > 2 * edge:
        slices = [
            *(_nested_str(data[i], indent + 1, summarize, fmt) for i in range(edge)),
            "...",
            *(_nested_str(data[i], indent + 1, summarize, fmt) for i in range(rows - edge, rows)),
        ]
    else:
        slices = [_nested_str(data[i], indent + 1, summarize, fmt) for i in range(rows)]
    return "[" + ("," + "\n" * (data.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _summarized(data: np.ndarray) -> np.ndarray:
    """The elements a summarised repr shows: what the number format is chosen from."""
    edge = PRINT_OPTS.edgeitems
    if data.ndim == 0:
        return data
    if data.ndim == 1:
        return np.concatenate((data[:edge], data[-edge:])) if data.shape[0] > 2 * edge else data
    if not edge:
        return np.empty((0,) * data.ndim, dtype=data.dtype)
    rows = data.shape[0]
    keep = [*range(edge), *range(rows - edge, rows)] if rows > 2 * edge else range(rows)
    return np.stack([_summarized(data[i]) for i in keep])


def _body(data: np.ndarray, indent: int) -> str:
    summarize = data.size > PRINT_OPTS.threshold
    fmt = _Formatter(_summarized(data) if summarize else data)
    return _nested_str(data, indent, summarize, fmt)


def _add_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    """Append ``, suffix`` items, each starting a new line once the line would pass
    ``linewidth`` (torch's ``_add_suffixes``)."""
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def dtype_repr(dtype: np.dtype[Any]) -> str:
    """``torch.float64``: how a dtype prints inside a tensor's repr."""
    return f"torch.{dtype.name}"


def tensor_repr(t: Tensor) -> str:
    prefix = "tensor("
    data = t._data
    suffixes = []
    if data.size == 0:
        # Nothing to infer the dtype from, so anything but the default float dtype is shown.
        if data.ndim != 1:
            suffixes.append(f"size={tuple(data.shape)}")
        if data.dtype != np.float32:
            suffixes.append(f"dtype={dtype_repr(data.dtype)}")
        body = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append(f"size={tuple(data.shape)}")
        if data.dtype not in _DEFAULT_DTYPES:
            suffixes.append(f"dtype={dtype_repr(data.dtype)}")
        body = _body(data, len(prefix))
    try:
        grad_fn = t.grad_fn
    except RuntimeError:  # a view whose history torch refuses to regenerate: torch's text
        suffixes.append("grad_fn=<Invalid>")
    else:
        if grad_fn is not None:
            suffixes.append(f"grad_fn=<{grad_fn.name()}>")
        elif t.requires_grad:
            suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, len(prefix))
