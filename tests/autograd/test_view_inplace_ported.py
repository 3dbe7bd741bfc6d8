"""torch's own in-place-on-view tests, ported from pytorch test/test_autograd.py
(TestAutogradDeviceType.test_inplace_on_view_*, test_inplace_multiple_output_view_of_view),
run on both engines through the ``lib`` fixture."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")


def test_inplace_on_view_backprop_view_of_view(lib):
    """A view made before another view of the same base was written sees the write."""
    root = lib.randn(2, 2, requires_grad=True)
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v2 = x.narrow(0, 0, 1)
    v1.mul_(2)
    v2.sum().backward()
    assert root.grad.tolist() == [[2, 2], [0, 0]]


def test_inplace_on_view_then_no_grad(lib):
    """A view's history regenerated under no_grad still backpropagates."""
    a = lib.ones(3, 1, dtype=lib.float64, requires_grad=True)
    b = a * 2
    c = b.view_as(b)
    c[0][0] = 3
    with lib.no_grad():
        c.grad_fn  # noqa: B018 - forces the update with grad disabled
    c.sum().backward()
    assert a.grad.tolist() == [[0.0], [2.0], [2.0]]


def test_inplace_on_view_of_multiple_output_view(lib):
    """A view of an unbind output cannot be written in place."""
    a = lib.rand(10, dtype=lib.float64, requires_grad=True).clone()
    c = a.unbind(0)[0].view_as(a.unbind(0)[0])
    with pytest.raises(RuntimeError):
        c.mul_(2)


def test_inplace_multiple_output_view_of_view(lib):
    """An unbind output of a view cannot be written in place."""
    a = lib.rand(10, dtype=lib.float64, requires_grad=True).clone()
    c = a.view_as(a).unbind(0)
    with pytest.raises(RuntimeError):
        c[0].mul_(2)


def test_inplace_on_view_modify_base(lib):
    """A write to a base that makes it require grad makes earlier views require grad and
    backpropagate (gradcheck)."""
    r = lib.ones(1, dtype=lib.float64, requires_grad=True)

    def fn(r: Any) -> Any:
        x = lib.ones(5, dtype=lib.float64)
        v = x.select(0, 1)
        assert not v.requires_grad and v.grad_fn is None
        x.add_(r)  # v is now dependent on r due to the in-place op on x
        assert v.requires_grad
        return v

    assert lib.autograd.gradcheck(fn, [r])


def test_inplace_on_view_python(lib):
    """A custom Function writing into a view (mark_dirty) rebases the base's history."""
    a = lib.randn(4, 4, dtype=lib.float64, requires_grad=True)
    b = lib.randn(2, 2, dtype=lib.float64, requires_grad=True)

    class PyAdd(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, y: Any) -> Any:
            ctx.mark_dirty(x)
            x.add_(y)
            return x

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return grad, grad

    def func(root: Any, b: Any) -> Any:
        x = root.clone()
        PyAdd.apply(x.narrow(1, 2, 2).narrow(0, 1, 2), b)
        PyAdd.apply(x.narrow(1, 0, 2).narrow(0, 1, 2), b)
        return x

    assert lib.autograd.gradcheck(func, [a, b], raise_exception=True)


def test_inplace_on_view_non_contig(lib):
    """A view of a view of a non-contiguous tensor written in place."""
    root = lib.ones(2, 3, 2).select(2, 1).t().requires_grad_(True)
    x = root.clone()
    v2 = x.narrow(0, 0, 1).narrow(1, 1, 1)
    v2.mul_(2)
    x.sum().backward()
    assert root.grad.tolist() == [[1, 2], [1, 1], [1, 1]]


def test_inplace_on_view_multi_output_safe(lib):
    """split, split_with_sizes and chunk outputs cannot be written in place."""
    for f in [
        lambda t: t.split(1),
        lambda t: t.split_with_sizes((1, 1, 1)),
        lambda t: t.chunk(3),
    ]:
        a = lib.randn(3, 3, requires_grad=True)
        s1, s2, _ = f(a + a)
        with pytest.raises(RuntimeError, match="This view is the output of a function that"):
            s1.mul_(s2)
