"""In-place operations and the version counter behind saved-tensor checks.

Without recording (grad mode off, or nothing requires grad) the numpy array is updated in
place: that is the optimizer's fast path. When recording, the op runs out of place on a
snapshot of the old value (so nodes that need the old value keep it, as torch's
``original_self``), the result is copied into the tensor's own array, and the tensor takes the
new node as its ``grad_fn``. Hooks registered before stay on the old node (SEMANTICS T-19).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..autograd._view import DEFAULT, rebase_error, set_history
from ._base import Node, Tensor, edge, grad_state, wrap
from ._rebase import AsStridedBackward0, CopySlices, ViewGeometry

__all__ = [
    "add_",
    "apply_inplace",
    "bump",
    "clamp_",
    "copy_",
    "div_",
    "fill_",
    "functional_",
    "masked_fill_",
    "mul_",
    "pin_saved_output",
    "rebase_history",
    "relu_",
    "sub_",
]

_LEAF_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation."
_LEAF_VIEW_MESSAGE = (
    "a view of a leaf Variable that requires grad is being used in an in-place operation."
)


def _check_allowed(x: Tensor, recording: bool) -> None:
    """torch's ``check_inplace``: refuse what the write could not be recorded for."""
    if not recording:
        return
    base = x._base
    if base is not None:
        if x._view_kind != DEFAULT:
            raise RuntimeError(rebase_error(x, indirect=False))
        if base._requires_grad and base._grad_fn is None:
            raise RuntimeError(_LEAF_VIEW_MESSAGE)
    elif x._grad_fn is None and x._requires_grad:
        raise RuntimeError(_LEAF_MESSAGE)


def pin_saved_output(x: Tensor) -> None:
    """Call before ``x``'s storage is overwritten: make backward refuse a stale saved output.

    Nodes such as ExpBackward0 or TanhBackward0 keep their output array but record no version
    for it (a tensor saving its own node would be a reference cycle on every op). The first
    in-place write pins the current version on that node instead, so backward raises as torch
    does rather than use the new values. ``x`` may be the output, a view of it, a
    ``detach()`` of it (which is no view but remembers its source in ``_detached_from``), or
    any chain of these.
    """
    t: Tensor | None = x
    while t is not None:
        fn = t._grad_fn
        if fn is not None and getattr(fn, "out", None) is t._data:
            _pin(fn, t)
        t = t._base if t._base is not None else getattr(t, "_detached_from", None)


def _pin(fn: Node, t: Tensor) -> None:
    """Record ``t``'s current version on ``fn``, which keeps ``t``'s array as its output."""
    vbox = t._vbox
    if any(saved._vbox is vbox for saved, _ in fn._versions):
        return
    saved = wrap(t._data)
    saved._vbox = vbox
    saved.grad_fn = fn
    saved._output_nr = t._output_nr
    fn._versions = (*fn._versions, (saved, vbox[0]))


def _snapshot(x: Tensor) -> Tensor:
    """The value and graph position ``x`` has before the in-place op."""
    src = wrap(x._data.copy())
    src.grad_fn = x.grad_fn  # a view's history made current first (autograd._view)
    src._requires_grad = x._requires_grad
    src._output_nr = x._output_nr
    src._acc = x._acc
    return src


def apply_inplace(x: Tensor, kernel: Callable[[Tensor], Tensor], other: Tensor | None) -> Tensor:
    """Run ``kernel`` (an out-of-place op) and store its result into ``x``'s own array."""
    recording = not _fast(x, other)
    _check_allowed(x, recording)
    base = x._base if recording else None
    # Measured before the write, so an overlapping view is refused with x unchanged.
    geometry = ViewGeometry(x._data, base._data) if base is not None else None
    source = _snapshot(x) if recording else x
    result = kernel(source)
    if result._data.shape != x._data.shape:
        raise RuntimeError(
            f"output with shape {list(x._data.shape)} doesn't match the broadcast shape "
            f"{list(result._data.shape)}"
        )
    pin_saved_output(x)
    np.copyto(x._data, result._data, casting="unsafe")
    x._vbox[0] += 1
    if not recording:
        return x
    fn = result.grad_fn
    if fn is not None and getattr(fn, "out", None) is result._data:
        # The op's saved output is x now, as torch's: a later write to it, through x, its
        # base or another view, is caught at backward.
        setattr(fn, "out", x._data)  # noqa: B010 - a slot only nodes that keep it have
        _pin(fn, x)
    if base is not None and geometry is not None and fn is not None:
        _rebase(x, base, fn, geometry)
    else:
        set_history(x, fn, result._requires_grad)
    return x


def rebase_history(x: Tensor, fn: Node) -> None:
    """A view ``x`` already written in place by ``fn`` (a custom Function that marked it
    dirty): torch's checks and rebase, as for the built-in in-place ops."""
    _check_allowed(x, True)
    base = x._base
    assert base is not None
    if fn._n_out != 1:
        raise RuntimeError("Functions which modify views in-place must return a single Variable")
    _rebase(x, base, fn, ViewGeometry(x._data, base._data))


def _rebase(x: Tensor, base: Tensor, fn: Node, geometry: ViewGeometry) -> None:
    """torch's view + in-place rule: the base takes a CopySlices node wrapping ``fn`` (its
    values changed too) and the view an AsStridedBackward0 node into that base history."""
    copy = CopySlices(edge(base), fn, geometry)
    set_history(base, copy, True)
    view_node = AsStridedBackward0(((copy, 0),))
    view_node._geometry = geometry
    set_history(x, view_node, True)


def _fast(x: Tensor, other: Any) -> bool:
    """True when the op can write straight into the array: nothing is recorded, because grad
    mode is off or neither ``x``, ``other`` nor the base ``x`` is a view of requires grad (as
    torch, a view of such a base requires grad even when made under no_grad, which
    _check_allowed then refuses)."""
    if not grad_state.enabled:
        return True
    if x._requires_grad or (isinstance(other, Tensor) and other._requires_grad):
        return False
    base = x._base
    return base is None or not base._requires_grad


def _operand(other: Any) -> Any:
    return other._data if isinstance(other, Tensor) else other


def bump(x: Tensor) -> Tensor:
    """Count an in-place write that recorded nothing (the data is already changed)."""
    if x._grad_fn is not None or x._base is not None or hasattr(x, "_detached_from"):
        pin_saved_output(x)
    x._vbox[0] += 1
    return x


def add_(x: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    if _fast(x, other):
        value = _operand(other)
        try:
            np.add(x._data, value if alpha == 1 else value * alpha, out=x._data, casting="unsafe")
        except ValueError:  # not broadcastable into x: the general path raises torch's error
            pass
        else:
            return bump(x)
    from .arith import add

    return apply_inplace(x, lambda s: add(s, other, alpha=alpha), _tensor_or_none(other))


def sub_(x: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    return add_(x, other, alpha=-alpha)


def mul_(x: Tensor, other: Any) -> Tensor:
    if _fast(x, other):
        try:
            np.multiply(x._data, _operand(other), out=x._data, casting="unsafe")
        except ValueError:  # not broadcastable into x: the general path raises torch's error
            pass
        else:
            return bump(x)
    from .arith import mul

    return apply_inplace(x, lambda s: mul(s, other), _tensor_or_none(other))


def div_(x: Tensor, other: Any) -> Tensor:
    if _fast(x, other):
        try:
            np.true_divide(x._data, _operand(other), out=x._data, casting="unsafe")
        except ValueError:  # not broadcastable into x: the general path raises torch's error
            pass
        else:
            return bump(x)
    from .arith import div

    return apply_inplace(x, lambda s: div(s, other), _tensor_or_none(other))


def clamp_(x: Tensor, min: Any = None, max: Any = None) -> Tensor:
    if _fast(x, None):
        np.clip(x._data, _operand(min), _operand(max), out=x._data)
        return bump(x)
    from .unary import clamp

    return apply_inplace(x, lambda s: clamp(s, min, max), None)


def relu_(x: Tensor) -> Tensor:
    """ReLU in place, with relu's backward (no gradient at 0), which ``clamp_(x, 0)``'s is not."""
    if _fast(x, None):
        np.maximum(x._data, 0, out=x._data)
        return bump(x)
    from .unary import relu

    return apply_inplace(x, relu, None)


def fill_(x: Tensor, value: Any) -> Tensor:
    if _fast(x, value):
        x._data[...] = _operand(value)
        return bump(x)
    from .index import index_put

    return apply_inplace(x, lambda s: index_put(s, Ellipsis, value), _tensor_or_none(value))


def copy_(x: Tensor, src: Any) -> Tensor:
    """Copy ``src`` (broadcast) into ``x``; the gradient flows to ``src``."""
    return fill_(x, src)


def masked_fill_(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    """``masked_fill`` in place: the mask broadcasts to ``x`` (a (T, T) causal mask fills every
    head of (B, H, T, T) scores), which indexing by the mask would not."""
    m = mask._data
    if _fast(x, value) and m.dtype.kind == "b" and _broadcasts_to(m.shape, x._data.shape):
        np.copyto(x._data, _operand(value), casting="unsafe", where=m)
        return bump(x)
    from .index import masked_fill

    return apply_inplace(x, lambda s: masked_fill(s, mask, value), _tensor_or_none(value))


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def _tensor_or_none(value: Any) -> Tensor | None:
    return value if isinstance(value, Tensor) else None


def functional_(x: Tensor, kernel: Callable[[Tensor], Tensor], *others: Any) -> Tensor:
    """The in-place form of an out-of-place op ``kernel`` (``tril_``, ``addcmul_``, ...):
    recorded as that op when ``x`` or a tensor among ``others`` requires grad."""
    needing = [t for t in others if isinstance(t, Tensor) and t._requires_grad]
    return apply_inplace(x, kernel, needing[0] if needing else None)
