"""Views whose base is written in place through something else get a new history, as torch's.

A view shares its base's memory: when the base is written in place, directly or through
another view, the view's recorded history is stale. torch regenerates it on the view's next
use (an ``AsStridedBackward0`` into the base's current history) or, for views that must not
be regenerated (made under no_grad, by unbind/split/chunk, by a custom Function), raises.
Values, gradients, node names and messages are compared with torch 2.13.
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

# views of x (3, 4) that are read after the writes (any view kind, overlapping ones too)
OBSERVED: dict[str, Callable[[Any], Any]] = {
    "slice": lambda x: x[1:3],
    "select": lambda x: x[1],
    "step": lambda x: x[:, ::2],
    "narrow": lambda x: x.narrow(1, 1, 2),
    "view": lambda x: x.view(-1),
    "reshape": lambda x: x.reshape(2, 6),
    "flatten": lambda x: x.flatten(),
    "transpose": lambda x: x.transpose(0, 1),
    "t": lambda x: x.t(),
    "permute": lambda x: x.permute(1, 0),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "squeeze": lambda x: x.unsqueeze(0).squeeze(0),
    "none_index": lambda x: x[None],
    "expand": lambda x: x[:, :1].expand(3, 4),
    "view_of_view": lambda x: x[1:][:, 1:],
    "select_of_t": lambda x: x.t()[2],
    "diagonal": lambda x: x.diagonal(),
    "diagonal_offset": lambda x: x.diagonal(-1, 1, 0),
}
# what is written in place: the base itself or one of its views
WRITERS: dict[str, Callable[[Any], Any]] = {
    "base": lambda x: x,
    "row0": lambda x: x[0],
    "rows12": lambda x: x[1:],
    "col1": lambda x: x[:, 1],
    "flat": lambda x: x.view(-1),
    "t_row": lambda x: x.t()[3],
    "diagonal": lambda x: x.diagonal(1),
}
# in-place ops on w; y is a (3, 4) tensor requiring grad
INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "mul_2": lambda w, y: w.mul_(2),
    "add_y": lambda w, y: w.add_(y.reshape(-1)[: w.shape[-1]]),
    "mul_y": lambda w, y: w.mul_(y.reshape(-1)[: w.shape[-1]]),
    "zero_": lambda w, y: w.zero_(),
    "clamp_": lambda w, y: w.clamp_(-2, 2),
    "copy_y": lambda w, y: w.copy_(y.reshape(-1)[: w.shape[-1]]),
    "relu_": lambda w, y: w.relu_(),
    "div_y": lambda w, y: w.div_(y.reshape(-1)[: w.shape[-1]] + 2),
    "setitem": lambda w, y: w.__setitem__(0, y[0, 0] * 3),
    "no_grad_mul": lambda w, y: _under_no_grad(w, lambda: w.mul_(3)),
}


def _under_no_grad(t: Any, write: Callable[[], Any]) -> None:
    """Run ``write`` under the no_grad of ``t``'s library (an optimizer step's write)."""
    with (hookgrad if isinstance(t, hookgrad.Tensor) else torch).no_grad():
        write()


def _program(lib: Any, observed: str, writes: list[tuple[str, str]], a0: np.ndarray) -> dict:
    a = lib.tensor(a0, requires_grad=True)
    y = lib.tensor(np.cos(np.arange(12, dtype=np.float32)).reshape(3, 4), requires_grad=True)
    x = a * a
    v = OBSERVED[observed](x)
    for writer, op in writes:
        INPLACE[op](WRITERS[writer](x), y)
    name = type(v.grad_fn).__name__
    weights = lib.tensor(np.sin(np.arange(12, dtype=np.float32) + 1).reshape(3, 4))
    try:
        ((v * v).sum() + (x * weights).sum()).backward()
    except RuntimeError as error:  # a saved value was overwritten: the message up to its names
        return {"error": str(error).split(":")[0]}
    return {
        "v": v.detach().numpy().copy(),
        "a.grad": a.grad.numpy(),
        "y.grad": None if y.grad is None else y.grad.numpy(),
        "name": name,
    }


@settings(max_examples=60, deadline=None)
@given(
    observed=st.sampled_from(sorted(OBSERVED)),
    writes=st.lists(
        st.tuples(st.sampled_from(sorted(WRITERS)), st.sampled_from(sorted(INPLACE))),
        min_size=1,
        max_size=3,
    ),
    a0=st.lists(st.floats(-3, 3, width=32), min_size=12, max_size=12),
)
def test_a_view_sees_writes_through_its_base_as_in_torch(
    observed: str, writes: list[tuple[str, str]], a0: list[float]
) -> None:
    """A view made before in-place writes to its base or other views of it gets torch's new
    history (AsStridedBackward0), values and gradients."""
    array = np.array(a0, np.float32).reshape(3, 4)
    ours = _program(hookgrad, observed, writes, array)
    theirs = _program(torch, observed, writes, array)
    if "error" in theirs:
        assert ours == theirs
        return
    assert ours["name"] == theirs["name"]
    for key in ("v", "a.grad", "y.grad"):
        if theirs[key] is None:
            assert ours[key] is None, key
        else:
            np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-4, err_msg=key)


def test_the_issue_example(lib):
    """Issue #15: after ``v1.mul_(5)`` the overlapping view v2 sees the write in its gradient."""
    a = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    b = a * 1
    v1, v2 = b[:2], b[1:3]
    v1.mul_(5)
    assert type(v2.grad_fn).__name__ == "AsStridedBackward0"
    v2.sum().backward()
    assert a.grad.tolist() == [0.0, 5.0, 1.0, 0.0]


def test_the_new_history_is_made_once_per_write(lib):
    """Reading ``grad_fn`` again gives the same node until the next write, which makes a new
    one pointing at the base's current history."""
    b = lib.ones(4, requires_grad=True) * 1
    v = b[1:]
    b.mul_(2)
    first = v.grad_fn
    assert v.grad_fn is first and first.next_functions == ((b.grad_fn, 0),)
    b.add_(1)
    assert v.grad_fn is not first and v.grad_fn.next_functions == ((b.grad_fn, 0),)


def test_a_view_of_a_leaf_after_an_optimizer_step(lib):
    """A view of a leaf kept across a no_grad write (an optimizer step) points straight at the
    leaf's accumulator afterwards, with the same gradient."""
    w = lib.ones(4, requires_grad=True)
    v = w[1:]
    with lib.no_grad():
        w.mul_(3)
    assert type(v.grad_fn).__name__ == "AsStridedBackward0"
    assert type(v.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
    (v * v).sum().backward()
    assert w.grad.tolist() == [0.0, 6.0, 6.0, 6.0]


def test_a_view_is_not_regenerated_by_use_under_no_grad(lib):
    """Using a stale view under no_grad records nothing and raises nothing, even for a view
    whose history torch refuses to regenerate."""
    b = lib.ones(4, requires_grad=True) * 1
    with lib.no_grad():
        v = b[1:]
    b.mul_(2)
    with lib.no_grad():
        assert not (v * 2).requires_grad


def test_a_view_requires_grad_when_its_base_comes_to(lib):
    """A view of a tensor that needed no grad requires grad once the base does, and a write
    that made the base require grad reaches the gradient through the view's new history."""
    b = lib.ones(4)
    v = b[1:]
    w = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    b.mul_(w)
    assert v.requires_grad
    out = v * 2
    assert type(v.grad_fn).__name__ == "AsStridedBackward0"
    out.sum().backward()
    assert w.grad.tolist() == [0.0, 2.0, 2.0, 2.0]


def test_a_no_grad_view_used_with_grad_on_reaches_nothing(lib):
    """A view made under no_grad of a tensor requiring grad requires grad, but the op using
    it records an edge to nothing (torch's), so backward leaves every .grad alone."""
    a = lib.ones(3, requires_grad=True)
    b = a * 1
    with lib.no_grad():
        v = b[1:]
    assert v.requires_grad and v.is_leaf
    y = v * 2
    assert y.requires_grad and y.grad_fn.next_functions == ((None, 0), (None, 0))
    y.sum().backward()
    assert a.grad is None


def test_retain_grad_follows_the_view_to_its_new_history(lib):
    """A view's retain_grad() moves to its regenerated node: .grad sums the gradients of the
    uses made after the write only (the old node no longer fills it)."""
    b = lib.ones(2, 3, requires_grad=True) * 1
    v = b[1:]
    v.retain_grad()
    early = v * 3
    b.mul_(2)
    (early.sum() + (v * 5).sum()).backward()
    assert v.grad.tolist() == [[5.0, 5.0, 5.0]]


def test_tensor_hooks_inplace_over_view(lib):
    """torch's test_autograd.py test_tensor_hooks_inplace_over_view: hooks registered on views
    before the write stay on their old nodes and do not fire; a hook registered after the
    view's history is regenerated fires."""
    count = [0]

    def fail(grad: Any) -> None:
        raise AssertionError("a hook on the old history fired")

    def fn2(grad: Any) -> None:
        count[0] += 1
        assert grad.tolist() == [1.0]

    base = lib.tensor([1.0], requires_grad=True).clone()
    view = base[:]
    view2 = base[:]
    view.register_hook(fail)
    view2.register_hook(fail)
    view.mul_(2)
    view2.grad_fn  # noqa: B018 - reading it regenerates view2's history
    view2.register_hook(fn2)
    (view + view2).sum().backward()
    assert count[0] == 1


def test_hooks_on_an_old_use_still_fire(lib):
    """A hook registered on a view before the write fires for the uses recorded before it,
    with the gradient of those uses (T-19)."""
    a = lib.ones(2, 2, requires_grad=True)
    b = a * 1
    v = b[1:]
    seen = []
    v.register_hook(lambda g: seen.append(g.tolist()))
    early = v * 3
    b.mul_(2)
    (early.sum() + (v * 1).sum()).backward()
    assert seen == [[[3.0, 3.0]]]
    assert a.grad.tolist() == [[0.0, 0.0], [5.0, 5.0]]


def _identity(lib: Any, x: Any) -> Any:
    """``x`` through a custom Function returning its input as-is (same class name in both)."""

    class Identity(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    return Identity.apply(x)


def _hooked_identity(lib: Any, x: Any) -> Any:
    module = lib.nn.Identity()
    module.register_full_backward_hook(lambda *args: None)
    return module(x)


# (make the view from x, write something) -> the refused view; x = a * 1 requires grad
REFUSED: dict[str, Callable[[Any, Any], Any]] = {
    "no_grad_indirect": lambda lib, x: (_no_grad(lib, lambda: x[1:]), x.mul_(2))[0],
    "no_grad_view_of_view": lambda lib, x: (_no_grad(lib, lambda: x[1:])[1:], x.mul_(2))[0],
    "unbind": lambda lib, x: (x.unbind()[1], x.mul_(2))[0],
    "split": lambda lib, x: (x.split(1)[2], x[0].mul_(2))[0],
    "chunk": lambda lib, x: (x.chunk(3)[0], x.mul_(2))[0],
    "split_sizes": lambda lib, x: (x.split([1, 2])[1], x.mul_(2))[0],
    "view_of_unbind": lambda lib, x: (x.unbind()[1][1:], x.mul_(2))[0],
    "custom_function": lambda lib, x: (_identity(lib, x), x.mul_(2))[0],
    "module_hook": lambda lib, x: (_hooked_identity(lib, x), x.mul_(2))[0],
}


def _no_grad(lib: Any, make: Callable[[], Any]) -> Any:
    with lib.no_grad():
        return make()


def _refusal(lib: Any, case: str, use: str) -> str:
    x = lib.arange(1.0, 13.0).reshape(3, 4).requires_grad_() * 1
    view = REFUSED[case](lib, x)
    with pytest.raises(RuntimeError) as error:
        if use == "grad_fn":
            view.grad_fn  # noqa: B018 - the read is what raises
        elif use == "op":
            view * 2
        else:
            view.mul_(2)
    return str(error.value)


@pytest.mark.parametrize("use", ["grad_fn", "op", "inplace"])
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_views_torch_refuses_to_regenerate(case: str, use: str) -> None:
    """Reading the history of, using, or writing in place a view made under no_grad, by an op
    returning several views, or by a custom Function, after a write through its base, raises
    torch's RuntimeError with torch's text."""
    assert _refusal(hookgrad, case, use) == _refusal(torch, case, use)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x.unbind()[1],
        lambda x: x.split(1)[2],
        lambda x: x.chunk(3)[1],
        lambda x: x.split([2, 1])[0][1:],
    ],
)
def test_writing_a_multi_output_view_is_refused(make: Callable[[Any], Any]) -> None:
    """An in-place op on an output of unbind/split/chunk (or a view of one) raises torch's
    error naming the output and the op, and leaves the values alone."""
    messages = []
    for lib in (hookgrad, torch):
        x = lib.arange(1.0, 13.0).reshape(3, 4).requires_grad_() * 1
        with pytest.raises(RuntimeError) as error:
            make(x).mul_(2)
        messages.append(str(error.value))
        assert x.tolist() == (lib.arange(1.0, 13.0).reshape(3, 4)).tolist()
    assert messages[0] == messages[1]


def test_views_of_a_detached_tensor_are_its_own(lib):
    """A view of a ``detach()`` output written in place does not touch the original's history
    (the detached tensor is the view's base for autograd)."""
    x = lib.ones(3, requires_grad=True) * 1
    d = x.detach()
    d[1:].mul_(lib.ones(2, requires_grad=True))
    assert type(x.grad_fn).__name__ == "MulBackward0"
    assert d.grad_fn.name() == "torch::autograd::CopySlices"


def test_a_second_hook_after_the_write_differs_as_documented(lib):
    """docs/hooks.md: a hook registered on a stale view that already had one fires for later
    uses in hookgrad (its history is regenerated first); torch files it under the old node."""
    a = lib.ones(2, requires_grad=True)
    b = a * 1
    v = b[1:]
    seen = []
    v.register_hook(lambda g: seen.append("before"))
    b.mul_(2)
    v.register_hook(lambda g: seen.append("after"))
    (v * 3).sum().backward()
    assert seen == (["after"] if lib is hookgrad else [])


def test_repr_of_a_view_torch_refuses_to_regenerate(lib):
    """Printing a view whose history cannot be regenerated shows torch's ``grad_fn=<Invalid>``
    instead of raising; a no_grad view of a tensor requiring grad shows requires_grad=True."""
    b = lib.ones(3, requires_grad=True) * 1
    with lib.no_grad():
        v = b[1:]
    assert repr(v) == "tensor([1., 1.], requires_grad=True)"
    b.mul_(2)
    assert repr(v) == "tensor([2., 2.], grad_fn=<Invalid>)"


def test_unbind_of_a_vector_gives_views(lib):
    """The 0-d pieces of unbind on a 1-d tensor share its memory: a later write shows in them."""
    b = lib.ones(3)
    pieces = b.unbind()
    b.mul_(4)
    assert [p.item() for p in pieces] == [4.0, 4.0, 4.0]


def test_a_write_through_a_view_of_a_detached_output_is_caught(lib):
    """Writing into a view of ``y.detach()`` changes ``y``'s saved output: backward through
    ``y``'s node raises torch's error instead of using the new values."""
    a = lib.ones(3, requires_grad=True)
    y = a.exp()
    y.detach()[1:].mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("through", ["itself", "view"])
def test_a_write_over_an_in_place_ops_saved_output_is_caught(lib, through):
    """``relu_`` keeps its result for backward, as torch's: a later write to the tensor (or to
    the view it was applied to) makes backward raise instead of using the new values."""
    a = lib.ones(2, 3, requires_grad=True)
    x = a * 1
    (x if through == "itself" else x[0]).relu_()
    x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        x.sum().backward()


def test_detach_in_place_of_a_view_is_refused():
    """``detach_()`` on a view raises torch's RuntimeError (text compared); on a ``detach()``
    output it works."""
    messages = []
    for lib in (hookgrad, torch):
        b = lib.ones(3, requires_grad=True) * 1
        with pytest.raises(RuntimeError) as error:
            b[1:].detach_()
        messages.append(str(error.value))
        assert not b.detach().detach_().requires_grad
    assert messages[0] == messages[1]
