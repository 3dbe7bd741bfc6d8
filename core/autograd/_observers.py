"""hookgrad only: process-wide observers of ``backward`` (the runtime's training-loop seam).

Torch has no such hook. An observer is a pair of callbacks that :func:`hookgrad.autograd.backward`
(and so ``Tensor.backward``) calls around the graph walk:

* ``begin(root, gradient)`` once per root, in order, before the walk and after the roots were
  checked. ``gradient`` is the seed the caller passed (a Tensor; array-likes are wrapped) or None
  for the implicit ones of a scalar root; a non-None return replaces it. With several
  observers, each receives the previous one's replacement (registration order).
* ``end(root)`` once per root, in order, after every ``.grad`` is accumulated; only when the
  walk did not raise.

``hookgrad.autograd.grad`` notifies nobody: it accumulates nothing. With no observer
registered ``backward`` pays one truthiness test on :data:`BACKWARD_OBSERVERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from ..utils.hooks import HookDict, RemovableHandle

if TYPE_CHECKING:
    from .._tensor import Tensor

__all__ = ["BACKWARD_OBSERVERS", "BackwardBegin", "BackwardEnd", "register_backward_observer"]

BackwardBegin: TypeAlias = Callable[["Tensor", "Tensor | None"], Any]
"""``begin(root, gradient) -> replacement seed or None``."""
BackwardEnd: TypeAlias = Callable[["Tensor"], None]
"""``end(root) -> None``."""

BACKWARD_OBSERVERS: HookDict = HookDict()
"""handle id -> (begin or None, end or None), in registration order; empty by default."""


def register_backward_observer(
    begin: BackwardBegin | None = None, end: BackwardEnd | None = None
) -> RemovableHandle:
    """Observe every ``backward`` of the process: ``begin`` before the walk, ``end`` after it.

    Returns a handle whose ``remove()`` unregisters both callbacks.

    Raises:
        TypeError: neither callback was given.
    """
    if begin is None and end is None:
        raise TypeError("register_backward_observer() needs begin, end or both")
    handle = RemovableHandle(BACKWARD_OBSERVERS)
    BACKWARD_OBSERVERS[handle.id] = (begin, end)
    return handle


def notify_begin(roots: list[Tensor], seeds: list[Any]) -> list[Any]:
    """Run every ``begin`` on each root; the seeds after their replacements."""
    observers = tuple(BACKWARD_OBSERVERS.values())
    result = []
    for root, seed in zip(roots, seeds):
        if seed is not None:  # (None: a scalar loss's implicit seed, the common case)
            seed = _as_seed(seed, root)
        for begin, _ in observers:
            if begin is not None:
                replacement = begin(root, seed)
                if replacement is not None:
                    seed = replacement
        result.append(seed)
    return result


def notify_end(roots: list[Tensor]) -> None:
    """Run every ``end`` on each root (after a walk that did not raise)."""
    observers = tuple(BACKWARD_OBSERVERS.values())
    for root in roots:
        for _, end in observers:
            if end is not None:
                end(root)


def _as_seed(seed: Any, root: Tensor) -> Tensor:
    """``seed`` as a Tensor: array-likes are wrapped in ``root``'s dtype.

    Imports here, not at the top: the tensor module imports this one."""
    import numpy as np

    from .._tensor import Tensor, _wrap

    if isinstance(seed, Tensor):
        return seed
    return _wrap(np.asarray(seed, dtype=root._data.dtype))
