"""torch.autograd.Variable, the legacy wrapper, behaves as torch 2.13 keeps it."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")


def _variable(lib: Any) -> Any:
    return lib.autograd.Variable


def test_variable_returns_a_detached_leaf_sharing_memory(lib: Any) -> None:
    """Variable(t) is a new plain tensor sharing t's memory; requires_grad= makes it a leaf
    that requires grad, leaving t as it was."""
    t = lib.ones(2)
    v = _variable(lib)(t)
    assert v is not t and type(v) is lib.Tensor and not v.requires_grad
    t.add_(1.0)
    assert v.tolist() == [2.0, 2.0]
    w = _variable(lib)(t, requires_grad=True)
    assert w.requires_grad and w.is_leaf and not t.requires_grad
    y = (w * 3).sum()
    y.backward()
    assert w.grad.tolist() == [3.0, 3.0]


def test_variable_of_a_result_is_cut_from_the_graph(lib: Any) -> None:
    """Variable(non_leaf) has no grad_fn and does not require grad."""
    x = lib.ones(2, requires_grad=True)
    v = _variable(lib)(x * 2)
    assert v.grad_fn is None and not v.requires_grad and v.is_leaf


def test_every_tensor_is_a_variable(lib: Any) -> None:
    """isinstance(t, Variable) holds for every tensor and Parameter, and for nothing else."""
    Variable = _variable(lib)
    assert isinstance(lib.ones(1), Variable)
    assert isinstance(lib.nn.Parameter(lib.ones(1)), Variable)
    assert not isinstance(3, Variable) and not isinstance([1.0], Variable)
    assert Variable().tolist() == []


def test_variable_errors_and_volatile_warning(lib: Any) -> None:
    """Non-tensor data and integer tensors that should require grad fail as in torch;
    volatile=True warns that it has no effect."""
    Variable = _variable(lib)
    with pytest.raises(TypeError, match=r"^Variable data has to be a tensor, but got int$"):
        Variable(3)
    with pytest.raises(RuntimeError, match=r"^Only Tensors of floating point and complex dtype"):
        Variable(lib.arange(2), requires_grad=True)
    with pytest.warns(UserWarning, match="volatile was removed and now has no effect"):
        Variable(lib.ones(1), volatile=True)
