"""``Tensor.output_nr`` against torch 2.13: which output of its ``grad_fn`` a tensor is."""

from __future__ import annotations

from typing import Any

import pytest


def test_output_nr_of_multi_output_ops(lib: Any) -> None:
    """Pieces of unbind/split/chunk and the second result of var_mean count up from 0;
    a non-differentiable second output (max's indices) and single outputs are 0."""
    x = lib.arange(12.0).reshape(4, 3).requires_grad_()
    assert [t.output_nr for t in x.unbind()] == [0, 1, 2, 3]
    assert [t.output_nr for t in x.split(2)] == [0, 1]
    assert [t.output_nr for t in lib.chunk(x, 2, 1)] == [0, 1]
    assert [t.output_nr for t in lib.var_mean(x, 0)] == [0, 1]
    assert [t.output_nr for t in x.max(1)] == [0, 0]
    assert [t.output_nr for t in x.sort()] == [0, 0]
    assert (x * 2).output_nr == 0 and x.diagonal().output_nr == 0


def test_output_nr_of_leaves_and_untracked_pieces(lib: Any) -> None:
    """Leaves, detached tensors and pieces made with nothing to record are output 0; the
    attribute is read-only."""
    x = lib.ones(3, 2, requires_grad=True)
    assert x.output_nr == 0 and x.unbind()[2].detach().output_nr == 0
    with pytest.raises(AttributeError):
        x.output_nr = 1
    with lib.no_grad():
        assert [t.output_nr for t in x.unbind()] == [0, 0, 0]
    assert [t.output_nr for t in lib.ones(2).unbind()] == [0, 0]


def test_output_nr_of_a_custom_function(lib: Any) -> None:
    """The outputs of a custom Function are numbered in the order forward returns them."""

    class Two(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            return a * 2, a * 3

        @staticmethod
        def backward(ctx: Any, ga: Any, gb: Any) -> Any:
            return ga * 2 + gb * 3

    first, second = Two.apply(lib.ones(2, requires_grad=True))
    assert (first.output_nr, second.output_nr) == (0, 1)
