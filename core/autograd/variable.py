"""``torch.autograd.Variable`` as torch keeps it: a legacy name for Tensor.

Since torch 0.4 ``Variable(t)`` returns a plain tensor, a leaf sharing ``t``'s memory with
``requires_grad`` as asked, and every tensor is an instance of ``Variable``. Old code (and
old tutorials) still wrap inputs in it.
"""

from __future__ import annotations

import warnings
from typing import Any

from .._dtype import can_require_grad
from .._tensor import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    """``isinstance(x, Variable)`` is ``isinstance(x, Tensor)``, as in torch."""

    def __instancecheck__(cls, other: Any) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False)``: ``data`` detached, as a new leaf."""

    def __new__(  # type: ignore[misc]
        cls, data: Any = None, requires_grad: bool = False, volatile: bool = False
    ) -> Tensor:
        from .._creation import tensor

        if volatile:
            warnings.warn(
                "volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                UserWarning,
                stacklevel=2,
            )
        if data is None:
            data = tensor([])
        elif not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad and not can_require_grad(out._data.dtype):
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients"
            )
        out._requires_grad = bool(requires_grad)
        return out
