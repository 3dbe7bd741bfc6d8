"""The few ``torch._C`` names hookgrad mirrors, for code (and torch's own tests) that uses them.

``torch._C`` is torch's compiled core; hookgrad keeps here only what pure-Python code reaches
for: a weak reference to a tensor that does not keep it alive (``_WeakTensorRef``), and
``_autograd._saved_tensors_hooks_is_enabled()``.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._tensor import Tensor

__all__ = ["_WeakTensorRef", "_autograd"]


class _WeakTensorRef:
    """A weak reference to a tensor: ``expired()`` is True once nothing else holds it."""

    __slots__ = ("_ref",)

    def __init__(self, tensor: Tensor) -> None:
        self._ref = weakref.ref(tensor)

    def expired(self) -> bool:
        return self._ref() is None


class _autograd:  # torch's module name, lowercase
    """``torch._C._autograd``: the switches of autograd's thread state hookgrad mirrors."""

    @staticmethod
    def _saved_tensors_hooks_is_enabled() -> bool:
        """False inside ``torch.autograd.graph.disable_saved_tensors_hooks``."""
        from .autograd._saved import hooks_enabled

        return hooks_enabled()
