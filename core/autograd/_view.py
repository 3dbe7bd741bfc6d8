"""Views and the history torch keeps current for them (torch's ``DifferentiableViewMeta``).

A view shares its base's memory and version counter. When the base is written in place,
directly or through another view, the values the view sees change, so the history the view
recorded when it was made (``SliceBackward0`` into the base's old history) is stale. torch
notices on the view's next use: every view remembers the version its history was made at, and
reading its ``grad_fn`` (as an op input, in ``backward``, ``register_hook``, ``.grad_fn``)
when the version has moved gives it a new history, an ``AsStridedBackward0`` into the base's
current one. hookgrad does the same in :func:`current_grad_fn`; a tensor that is not a view
pays one attribute read for the check (``Tensor.grad_fn``, ``_ops._base.edge``).

Views made in a way whose history must not be replaced (under ``no_grad``, by an op returning
several views, by a custom Function) are refused with torch's messages instead, when they or
their base are written in place (:func:`rebase_error`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .._grad_mode import _state as _grad_state

if TYPE_CHECKING:
    from .._tensor import Tensor
    from .graph import Node

__all__ = [
    "CUSTOM",
    "DEFAULT",
    "DETACH_VIEW_MESSAGE",
    "MULTI_OUTPUT",
    "NO_GRAD",
    "current_grad_fn",
    "make_view",
    "rebase_error",
    "set_history",
]

# How a view was made (torch's CreationMeta), kept in Tensor._view_kind.
DEFAULT = 0  # by a view op with grad mode on: its history may be regenerated
NO_GRAD = 1  # with grad mode off
MULTI_OUTPUT = 2  # as one of several views returned by one op (unbind, split, chunk)
CUSTOM = 3  # returned by a custom Function or a module backward-hook wrapper

_HOW = {
    MULTI_OUTPUT: (
        " This view is the output of a function that returns multiple views. Such functions do "
        "not allow the output views to be modified inplace. You should replace the inplace "
        "operation by an out-of-place one."
    ),
    NO_GRAD: (
        " Given that this use case is ambiguous and error-prone, it is forbidden. You can "
        "clarify your code by moving both the view and the inplace either both inside the "
        "no_grad block (if you don't want the inplace to be tracked) or both outside (if you "
        "want the inplace to be tracked)."
    ),
    CUSTOM: (
        " This view was created inside a custom Function (or because an input was returned "
        "as-is) and the autograd logic to handle view+inplace would override the custom "
        "backward associated with the custom Function, leading to incorrect gradients. This "
        "behavior is forbidden. You can fix this by cloning the output of the custom Function."
    ),
}
DETACH_VIEW_MESSAGE = (
    "Can't detach views in-place. Use detach() instead. If you are using "
    "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as True, "
    "gradients are views of DDP buckets, and hence detach_() cannot be called on these "
    "gradients. To fix this error, please refer to the Optimizer.zero_grad() function in "
    "torch/optim/optimizer.py as the solution."
)
_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")


def make_view(out: Tensor, x: Tensor, kind: int | None = None) -> Tensor:
    """Make ``out`` a view of ``x``: it shares ``x``'s version counter, and its base is
    ``x``'s base if ``x`` is itself a view (torch keeps the root base). ``kind`` defaults to
    DEFAULT with grad mode on and NO_GRAD with it off; a view of a view keeps its parent's
    kind unless made in a stricter one, as torch's ``propagate_creation_meta``."""
    if kind is None:
        kind = DEFAULT if _grad_state.enabled else NO_GRAD
    base = x._base
    if base is None:
        base = x
    elif kind == DEFAULT:
        kind = x._view_kind
    out._base = base
    out._vbox = x._vbox
    out._view_version = x._vbox[0]
    out._view_kind = kind
    return out


def current_grad_fn(t: Tensor) -> Node | None:
    """``t.grad_fn`` for a view ``t``, regenerated first if its base was written in place
    since it was recorded (module docstring); the same node until the next write."""
    fn = t._grad_fn
    kind = t._view_kind
    base = t._base
    assert base is not None
    if fn is None and not base._requires_grad:
        return None
    version = t._vbox[0]
    if t._view_version == version:
        return fn
    if kind != DEFAULT:
        raise RuntimeError(rebase_error(t, indirect=True))
    from .._ops._base import edge
    from .._ops._rebase import AsStridedBackward0, ViewGeometry

    node = AsStridedBackward0((edge(base),))
    node._geometry = ViewGeometry(t._data, base._data, overlap=True)
    set_history(t, node, True)
    return node


def set_history(t: Tensor, node: Node | None, requires_grad: bool) -> None:
    """Make ``node`` ``t``'s history (output 0), current at ``t``'s version. Tensor hooks
    stay on the old node, as torch's; a retain_grad() follows the tensor to the new one."""
    old, old_nr = t._grad_fn, t._output_nr
    t._grad_fn = node
    t._output_nr = 0
    t._requires_grad = requires_grad
    if t._base is not None:
        t._view_version = t._vbox[0]
    if t.retains_grad and old is not None and old._hooks is not None:
        old._hooks.retains_grad.pop(old_nr, None)
        if node is not None:
            node._hook_tables().retains_grad[0] = t


def rebase_error(t: Tensor, indirect: bool) -> str:
    """torch's refusal (``handle_view_on_rebase``) to replace the history of a view ``t``
    that was not made by a view op in grad mode: ``t`` is being written in place, or
    (``indirect``) its base or another view of it was."""
    kind = t._view_kind
    fn = t._grad_fn
    modified = "its base or another view of its base has been" if indirect else "is being"
    where = "" if fn is None else f"Output {t._output_nr} of {_op_name(fn)} is a view"
    if kind == NO_GRAD or fn is None:
        prefix = f"{where} of a view which was created in" if fn else "A view was created in"
        head = f"{prefix} no_grad mode and {modified} modified inplace with grad mode enabled."
    else:
        head = f"{where} and {modified} modified inplace."
    return head + _HOW.get(kind, _HOW[NO_GRAD])


def _op_name(fn: Node) -> str:
    """The op a node records, as torch's messages name it: ``SliceBackward0`` -> ``Slice``."""
    return _BACKWARD_SUFFIX.sub("", fn.name())
