"""Read-only aliases of tensors: what the plugin runtime hands to plugins in event payloads.

A plugin that wrote into a payload tensor (``event.args[0].add_(1)``, ``t.numpy()[:] = 0``)
would silently change the caller's input or the gradient backward is computing. An alias is a
second Tensor object over a read-only numpy view of the same memory, with the original's autograd
identity (node, output number, leaf accumulator, version counter, hooks): computing from it is
computing from the original, so a replacement built from it differentiates as before, while a
write raises numpy's ``ValueError`` (``... is read-only``) before anything changed.
``Tensor._read_only_alias`` is the entry point (the event contract imports nothing else).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ._tensor import Tensor
from .autograd.graph import AccumulateGrad

__all__ = ["read_only_alias", "read_only_array"]

_new = object.__new__


def _dead() -> None:
    return None


# (the array viewed last, its read-only view), both held weakly: see read_only_array.
_last: tuple[Any, Any] = (_dead, _dead)


def read_only_array(data: np.ndarray) -> np.ndarray:
    """A read-only view of ``data``.

    The same view again when ``data`` is the array viewed last and that view is still alive:
    a module's ``grad_input`` is the very array the next module receives as ``grad_output``,
    and a plugin that compares the arrays of consecutive calls by identity (to skip the one
    it checked last) then recognises it.
    """
    global _last
    if not isinstance(data, np.ndarray):  # a numpy scalar: immutable already
        return data
    data_ref, view_ref = _last
    if data_ref() is data:
        view = view_ref()
        if view is not None:
            return view
    view = data.view()
    view.setflags(write=False)
    _last = (weakref.ref(data), weakref.ref(view))
    return view


def read_only_alias(t: Tensor) -> Tensor:
    """``t`` as a read-only alias (module docstring); ``t.grad`` as it is now."""
    if t._requires_grad and t._grad_fn is None and t._acc is None:
        t._acc = AccumulateGrad(t)  # one accumulator for both: gradients reach t.grad
    out = _new(Tensor)
    out._data = read_only_array(t._data)
    out._grad = t._grad
    out._requires_grad = t._requires_grad
    out._grad_fn = t._grad_fn
    out._output_nr = t._output_nr
    out._vbox = t._vbox
    out._base = t._base
    if t._base is not None:  # a view: regenerated on use as t would be (autograd._view)
        out._view_version = t._view_version
        out._view_kind = t._view_kind
    out._acc = t._acc
    out._hooks = t._hooks
    return out
