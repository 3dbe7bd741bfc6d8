"""``hookgrad.Size``: the tuple subclass ``Tensor.shape`` and ``Tensor.size()`` return.

It prints as torch's ``torch.Size([2, 3])``, so that a program printing shapes prints what it
printed under torch. Slicing and adding keep the type, as torch's does.
"""

from __future__ import annotations

import math
import operator
from typing import Any, SupportsIndex, overload

__all__ = ["Size"]


class Size(tuple[int, ...]):
    """A tensor's shape: a tuple of ints with ``numel()`` and torch's repr."""

    __slots__ = ()

    def __new__(cls, sizes: Any = ()) -> Size:
        items = tuple(sizes)
        for i, s in enumerate(items):
            if not hasattr(s, "__index__"):
                raise TypeError(
                    f"torch.Size() takes an iterable of 'int' (item {i} is '{type(s).__name__}')"
                )
        return tuple.__new__(cls, (operator.index(s) for s in items))

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds."""
        return math.prod(self)

    def __repr__(self) -> str:
        return f"torch.Size({list(self)})"

    __str__ = __repr__

    @overload
    def __getitem__(self, index: SupportsIndex) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Size: ...

    def __getitem__(self, index: Any) -> Any:
        item = tuple.__getitem__(self, index)
        return tuple.__new__(Size, item) if isinstance(index, slice) else item

    def __add__(self, other: Any) -> Size:
        return tuple.__new__(Size, tuple.__add__(self, tuple(other)))

    def __radd__(self, other: Any) -> Size:
        return tuple.__new__(Size, tuple(other) + tuple(self))

    def __mul__(self, count: SupportsIndex) -> Size:
        return tuple.__new__(Size, tuple.__mul__(self, count))

    __rmul__ = __mul__

    def __reduce__(self) -> Any:
        return (Size, (tuple(self),))


def as_size(shape: tuple[int, ...]) -> Size:
    """``shape`` as a Size without re-validating its entries (they come from numpy)."""
    return tuple.__new__(Size, shape)
