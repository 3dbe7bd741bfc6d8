"""``detach()`` against torch 2.13: no view for autograd (``_base`` None, ``_is_view()``
False), yet it shares memory and the version counter with the tensor it came from."""

from __future__ import annotations

from typing import Any

import pytest


def test_detach_is_no_view(lib: Any) -> None:
    """detach() of a leaf, a non-leaf and a view has no base and is no view; views are."""
    x = lib.ones(2, 3, requires_grad=True)
    v = x[1]
    assert v._base is x and v._is_view()
    for t in (x, x * 2, v):
        d = t.detach()
        assert d._base is None and not d._is_view() and not d.requires_grad
    assert x._base is None and not x._is_view()


def test_detach_shares_memory_and_version(lib: Any) -> None:
    """A write through detach() (or a view of it) reaches the source and bumps the one
    version counter both share; a view of a detached tensor has it as its base."""
    x = lib.zeros(2, 3, requires_grad=True)
    d = x.detach()
    d.add_(1)
    assert x.tolist() == [[1, 1, 1], [1, 1, 1]] and x._version == d._version == 1
    row = d[0]
    assert row._base is d and row._is_view()
    row.mul_(3)
    assert x[0].tolist() == [3, 3, 3] and x._version == 2
    v = x[1].detach()
    v.zero_()
    assert x[1].tolist() == [0, 0, 0] and x._version == 3


@pytest.mark.parametrize(
    "write",
    [
        lambda y: y.detach().detach().add_(1),
        lambda y: y[1:].detach().mul_(2),
        lambda y: y.detach()[1:].detach()[0].fill_(0),
    ],
)
def test_a_write_through_any_detached_alias_invalidates_a_saved_output(
    lib: Any, write: Any
) -> None:
    """Writing through a detach of a detach, of a view, or a view of one still changes the
    output ``exp`` saved: backward raises torch's error instead of using the new values."""
    y = lib.ones(3, requires_grad=True).exp()
    write(y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
