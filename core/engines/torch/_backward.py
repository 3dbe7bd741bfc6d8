"""Backward begin/end for torch: a wrapper around ``torch.autograd.backward``.

torch has no global observer of ``backward``. Every outermost ``backward`` (``loss.backward()``
included) goes through ``torch.autograd.backward``, so the adapter puts a wrapper there while
observers exist and restores the original when the last one goes. The wrapper:

* notifies ``begin(root, seed)`` once per root before calling the original, passing the
  replaced seeds on, and ``end(root)`` once per root after it returns, when every ``.grad`` is
  final: DistributedDataParallel's gradient averaging finishes inside the backward call, so
  ``end`` sees the averaged gradients;
* stays out of nested calls made from inside a running backward (reentrant checkpointing):
  those belong to the outer call, which is notified once;
* stays out of calls it cannot describe as (tensor roots, seeds): ``GradientEdge`` roots, or a
  number of seeds that does not match the roots (torch raises on those itself).

Code that bound ``from torch.autograd import backward`` before the runtime started calls the
original directly and is not observed.
"""

from __future__ import annotations

from typing import Any

import torch

from ...utils.hooks import HookDict, RemovableHandle
from .._protocol import BackwardBegin, BackwardEnd
from . import _private
from ._compile import eager_only

__all__ = ["observe_backward"]

_OBSERVERS: HookDict = HookDict()  # handle id -> (begin or None, end or None)
_original: Any = None  # torch's backward while the wrapper is installed


def observe_backward(begin: BackwardBegin | None, end: BackwardEnd | None) -> RemovableHandle:
    """Register an observer pair; the handle's ``remove()`` unregisters it."""
    if begin is None and end is None:
        raise TypeError("observe_backward() needs begin, end or both")
    handle = _ObserverHandle(_OBSERVERS)
    _OBSERVERS[handle.id] = (begin, end)
    _install()
    return handle


class _ObserverHandle(RemovableHandle):
    """Removing the last observer restores torch's own ``backward``."""

    def remove(self) -> None:
        super().remove()
        if not _OBSERVERS:
            _uninstall()


def _install() -> None:
    global _original
    if _original is None:
        _original = _private.autograd_backward()
        _private.set_autograd_backward(_observed_backward)


def _uninstall() -> None:
    global _original
    # Leave the wrapper (inactive without observers) if someone wrapped it in turn.
    if _original is not None and _private.autograd_backward() is _observed_backward:
        _private.set_autograd_backward(_original)
        _original = None


@eager_only
def _observed_backward(
    tensors: Any,
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    grad_variables: Any = None,
    inputs: Any = None,
) -> None:
    original = _original if _original is not None else torch.autograd.backward
    observers = tuple(_OBSERVERS.values())
    roots = (tensors,) if isinstance(tensors, torch.Tensor) else tuple(tensors)
    given = grad_tensors if grad_tensors is not None else grad_variables
    seeds = [given] if isinstance(given, torch.Tensor) else list(given or [None] * len(roots))
    if (
        not observers
        or _private.graph_task_id() != -1
        or len(seeds) != len(roots)
        or not all(isinstance(root, torch.Tensor) for root in roots)
    ):
        original(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)
        return
    for index, root in enumerate(roots):
        for begin, _ in observers:
            if begin is not None:
                replacement = begin(root, seeds[index])
                if replacement is not None:
                    seeds[index] = replacement
    if grad_tensors is None and grad_variables is not None:
        original(roots, None, retain_graph, create_graph, seeds, inputs)  # torch warns, as asked
    else:
        original(roots, seeds, retain_graph, create_graph, None, inputs)
    for root in roots:
        for _, end in observers:
            if end is not None:
                end(root)
