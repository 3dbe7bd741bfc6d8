"""The ``out=`` keyword of torch's function forms (``torch.add(a, b, out=c)``).

The op runs as usual and its result is written into ``out`` (resized when its shape differs,
with torch's deprecation warning when ``out`` held elements), under torch's rules: no autograd
through ``out=``, and no cast to a lower dtype category (float into long).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from .._dtype import scalar_type_name
from ._base import Tensor, grad_state
from .inplace import bump

__all__ = ["accepts_out"]

_F = TypeVar("_F", bound=Callable[..., Any])
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "V": 2, "c": 3}  # "V": bfloat16


def _requires_grad(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    for value in (*args, *kwargs.values()):
        if isinstance(value, Tensor) and value._requires_grad:
            return True
        if isinstance(value, (list, tuple)) and any(
            isinstance(v, Tensor) and v._requires_grad for v in value
        ):
            return True
    return False


def write_out(op: str, result: Tensor, out: Tensor) -> Tensor:
    """Store ``result`` into ``out`` as torch's ``out=`` does, and return ``out``."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}(): argument 'out' must be Tensor, not {type(out).__name__}")
    src, dst = result._data, out._data
    if _CATEGORY[src.dtype.kind] > _CATEGORY[dst.dtype.kind]:
        raise RuntimeError(
            f"result type {scalar_type_name(src.dtype)} can't be cast to the desired output "
            f"type {scalar_type_name(dst.dtype)}"
        )
    if src.shape != dst.shape:
        if dst.size:
            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(dst.shape)}, which does not match the required output shape "
                f"{list(src.shape)}. This behavior is deprecated, and in a future PyTorch "
                "release outputs will not be resized unless they have zero elements. You can "
                "explicitly reuse an out tensor t by resizing it, inplace, to zero elements "
                "with t.resize_(0).",
                UserWarning,
                stacklevel=3,
            )
        out._data = np.empty(src.shape, dtype=dst.dtype)
    np.copyto(out._data, src, casting="unsafe")
    return bump(out)


def accepts_out(fn: _F) -> _F:
    """``fn`` with torch's keyword-only ``out=`` argument."""
    op = fn.__name__

    @functools.wraps(fn)
    def with_out(*args: Any, out: Tensor | None = None, **kwargs: Any) -> Any:
        if out is None:
            return fn(*args, **kwargs)
        if grad_state.enabled and _requires_grad(args, kwargs):
            raise RuntimeError(
                f"{op}(): functions with out=... arguments don't support automatic "
                "differentiation, but one of the arguments requires grad."
            )
        return write_out(op, fn(*args, **kwargs), out)

    return with_out  # type: ignore[return-value]
