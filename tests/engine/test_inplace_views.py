"""In-place ops on views of tensors that require grad: torch's rebase, pinned against torch.

An in-place write to a view changes its base too, so torch gives the base a CopySlices node
(the in-place op's formula applied to the view's region of the base's gradient) and the view an
AsStridedBackward0 node into that history. Gradients, values and node names are compared with
torch 2.13; the refusals (a view of a leaf, a view made under no_grad, an overlapping view)
raise torch's RuntimeError texts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookgrad

torch = pytest.importorskip("torch")

# view of x (2, 3): a differentiable view, as torch makes it
VIEWS: dict[str, Callable[[Any], Any]] = {
    "select": lambda x: x[0],
    "slice": lambda x: x[:, 1:],
    "step": lambda x: x[:, ::2],
    "view": lambda x: x.view(-1),
    "transpose": lambda x: x.transpose(0, 1),
    "t_select": lambda x: x.t()[1],
    "nested": lambda x: x[1][1:],
    "unsqueeze": lambda x: x.unsqueeze(0),
    "permute": lambda x: x.permute(1, 0),
}
# in-place op on the view v; y is a (2, 3) tensor requiring grad (broadcast slices of it)
INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "mul_2": lambda v, y: v.mul_(2),
    "add_y": lambda v, y: v.add_(y.reshape(-1)[: v.shape[-1]]),
    "mul_y": lambda v, y: v.mul_(y.reshape(-1)[: v.shape[-1]]),
    "zero_": lambda v, y: v.zero_(),
    "relu_": lambda v, y: v.relu_(),
    "clamp_": lambda v, y: v.clamp_(-1, 1),
    "sub_": lambda v, y: v.sub_(1.5),
    "copy_y": lambda v, y: v.copy_(y.reshape(-1)[: v.shape[-1]]),
    "fill_": lambda v, y: v.fill_(7.0),
}


def _program(lib: Any, view: str, op: str, a0: np.ndarray) -> dict[str, Any]:
    a = lib.tensor(a0, requires_grad=True)
    y = lib.tensor(np.cos(np.arange(6, dtype=np.float32)).reshape(2, 3), requires_grad=True)
    x = a * a
    v = VIEWS[view](x)
    out = INPLACE[op](v, y)
    weights = lib.tensor(np.sin(np.arange(6, dtype=np.float32) + 1).reshape(2, 3))
    ((x * weights).sum() + (v * v).sum()).backward()
    return {
        "x": x.detach().numpy().copy(),
        "a.grad": a.grad.numpy(),
        "y.grad": None if y.grad is None else y.grad.numpy(),
        "names": (type(v.grad_fn).__name__, x.grad_fn.name(), out is v),
    }


@pytest.mark.parametrize("op", sorted(INPLACE))
@pytest.mark.parametrize("view", sorted(VIEWS))
@settings(max_examples=5, deadline=None)
@given(a0=st.lists(st.floats(-3, 3, width=32), min_size=6, max_size=6))
def test_inplace_on_a_view_rebases_as_torch(view: str, op: str, a0: list[float]) -> None:
    """An in-place op on a view of a non-leaf gives torch's values, gradients for the base's
    inputs and the operand, and node names (AsStridedBackward0 on the view, CopySlices on the
    base)."""
    array = np.array(a0, np.float32).reshape(2, 3)
    ours = _program(hookgrad, view, op, array)
    theirs = _program(torch, view, op, array)
    assert ours["names"] == theirs["names"]
    for key in ("x", "a.grad", "y.grad"):
        if theirs[key] is None:
            assert ours[key] is None, key
        else:
            np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-5, err_msg=key)


def test_base_without_grad_takes_the_operand_history(lib):
    """``b[:2].add_(w)`` on a tensor that needs no grad makes ``b`` require grad through
    CopySlices, so the gradient of ``b`` reaches ``w``."""
    b = lib.zeros(3)
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    b[:2].add_(w)
    assert b.requires_grad and b.grad_fn.name() == "torch::autograd::CopySlices"
    (b * lib.tensor([3.0, 4.0, 5.0])).sum().backward()
    assert w.grad.tolist() == [3.0, 4.0]


def test_view_and_base_next_functions(lib):
    """The base's CopySlices points at the base's old history and the op's other edges; the
    view's node points at the CopySlices."""
    a = lib.ones(2, 3, requires_grad=True)
    x = a * 1
    v = x[0]
    v.mul_(2)
    (base_prev, _), (other, _) = x.grad_fn.next_functions
    assert base_prev.name() == "MulBackward0" and other is None
    assert v.grad_fn.next_functions == ((x.grad_fn, 0),)
    assert (v._version, x._version) == (1, 1)


def test_a_view_of_a_leaf_is_refused(lib):
    """In-place on a view of a leaf that requires grad raises torch's RuntimeError."""
    a = lib.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is "):
        a[0].mul_(2)
    assert a.tolist() == [[1.0] * 3] * 2


def test_a_view_made_under_no_grad_is_refused(lib):
    """A view taken under no_grad and modified in place with grad on raises torch's error."""
    x = lib.ones(2, 3, requires_grad=True) * 1
    with lib.no_grad():
        v = x[0]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is being"):
        v.mul_(2)
    with lib.no_grad():
        v.mul_(2)  # both inside no_grad: allowed, not tracked
    assert x[0].tolist() == [2.0, 2.0, 2.0]


def test_an_overlapping_view_is_refused(lib):
    """In-place on an expanded view (elements sharing memory) raises torch's error."""
    x = lib.ones(1, 3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x.expand(3, 3).mul_(2)


def test_detach_is_not_rebased(lib):
    """A detach() output modified in place with an operand requiring grad takes its own
    history; the tensor it came from keeps its own."""
    x = lib.ones(3, requires_grad=True) * 1
    d = x.detach()
    d.add_(lib.ones(3, requires_grad=True))
    assert type(d.grad_fn).__name__ == "AddBackward0"
    assert type(x.grad_fn).__name__ == "MulBackward0"


def test_hooks_and_retain_grad_follow_the_rebased_tensors(lib):
    """A hook on the view registered after the write sees the view's gradient; retain_grad on
    the base fills the base's .grad with the gradient arriving at its new node."""
    a = lib.ones(2, 2, requires_grad=True)
    x = a * 3
    x.retain_grad()
    v = x[1]
    v.mul_(2)
    seen = []
    v.register_hook(lambda g: seen.append(g.tolist()))
    (v.sum() * 5 + x.sum()).backward()
    assert seen == [[5.0, 5.0]]
    assert x.grad.tolist() == [[1.0, 1.0], [6.0, 6.0]]
    assert a.grad.tolist() == [[3.0, 3.0], [36.0, 36.0]]


def test_second_backward_through_copyslices_raises(lib):
    """CopySlices frees the saved values of the op it wraps: a second backward raises."""
    x = lib.ones(3, requires_grad=True) * 1
    x[1:].mul_(x[:2].detach() + 1)
    x.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        x.sum().backward()


def test_saved_operand_modified_after_the_write_is_caught(lib):
    """The wrapped op's saved operand is still version-checked at backward."""
    x = lib.ones(3, requires_grad=True) * 1
    y = lib.ones(2, requires_grad=True) * 2
    x[1:].mul_(y)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        x.sum().backward()
