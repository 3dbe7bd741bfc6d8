"""The few ``torch._C`` names hookgrad mirrors, for code (and torch's own tests) that uses them.

``torch._C`` is torch's compiled core; hookgrad keeps here only what pure-Python code reaches
for: a weak reference to a tensor that does not keep it alive (``_WeakTensorRef``).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._tensor import Tensor

__all__ = ["_WeakTensorRef"]


class _WeakTensorRef:
    """A weak reference to a tensor: ``expired()`` is True once nothing else holds it."""

    __slots__ = ("_ref",)

    def __init__(self, tensor: Tensor) -> None:
        self._ref = weakref.ref(tensor)

    def expired(self) -> bool:
        return self._ref() is None
