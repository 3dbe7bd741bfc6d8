"""nn.Parameter: a leaf Tensor subclass sharing memory with its data, costing ops nothing."""

from __future__ import annotations

import copy
import pickle

import pytest

import hookgrad
import hookgrad.nn as nn


def test_parameter_is_a_leaf_tensor_requiring_grad():
    """Parameter(t) is a Tensor, a leaf, and requires grad by default."""
    p = nn.Parameter(hookgrad.tensor([1.0, 2.0]))
    assert isinstance(p, hookgrad.Tensor) and p.is_leaf and p.requires_grad
    assert not nn.Parameter(hookgrad.ones(1), requires_grad=False).requires_grad


def test_parameter_shares_memory_and_version_with_data():
    """Parameter(t) aliases t's array and version counter (torch's _make_subclass)."""
    t = hookgrad.tensor([1.0, 2.0])
    p = nn.Parameter(t)
    t.add_(1.0)
    assert p.tolist() == [2.0, 3.0] and p._version == t._version == 1


def test_parameter_of_non_leaf_is_a_leaf():
    """Wrapping a computed tensor gives a leaf without grad_fn."""
    x = hookgrad.ones(2, requires_grad=True)
    p = nn.Parameter(x * 2)
    assert p.grad_fn is None and p.tolist() == [2.0, 2.0]


def test_empty_parameter_and_repr():
    """Parameter() is an empty float tensor; repr prefixes 'Parameter containing:'."""
    assert repr(nn.Parameter()) == "Parameter containing:\ntensor([], requires_grad=True)"
    assert repr(nn.Parameter(hookgrad.tensor([1.0, 2.5]))) == (
        "Parameter containing:\ntensor([1.0000, 2.5000], requires_grad=True)"
    )


def test_op_results_are_plain_tensors():
    """Arithmetic on a Parameter returns a plain Tensor with a grad_fn."""
    p = nn.Parameter(hookgrad.ones(2))
    out = p * 3
    assert type(out) is hookgrad.Tensor and out.grad_fn is not None
    assert type(p.detach()) is hookgrad.Tensor


def test_integer_parameter_cannot_require_grad():
    """An integer Parameter with requires_grad raises RuntimeError as in torch."""
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        nn.Parameter(hookgrad.tensor([1, 2]))


def test_non_tensor_data_raises_type_error():
    """Parameter data must be a Tensor."""
    with pytest.raises(TypeError, match="must be Tensor, not list"):
        nn.Parameter([1.0])


def test_parameter_gradient_accumulates():
    """Backward accumulates into a Parameter's .grad like any leaf."""
    p = nn.Parameter(hookgrad.tensor([1.0, -2.0]))
    (p * p).sum().backward()
    (p * p).sum().backward()
    assert p.grad.tolist() == [4.0, -8.0]


def test_parameter_pickles_and_deepcopies_as_parameter():
    """Pickle and deepcopy give Parameters with the same values and requires_grad flag."""
    p = nn.Parameter(hookgrad.tensor([1.5, 2.5]), requires_grad=False)
    for clone in (pickle.loads(pickle.dumps(p)), copy.deepcopy(p)):
        assert type(clone) is nn.Parameter and clone.tolist() == [1.5, 2.5]
        assert not clone.requires_grad and clone._data is not p._data


def test_parameter_hash_is_identity():
    """Parameters are hashable by identity (usable as dict keys, as optimizers do)."""
    a, b = nn.Parameter(hookgrad.ones(1)), nn.Parameter(hookgrad.ones(1))
    assert len({a: 1, b: 2}) == 2
