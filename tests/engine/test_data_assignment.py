"""``Tensor.data`` read and assigned as in torch 2.13: what autograd sees afterwards.

Every test runs on hookgrad and on torch (the ``lib`` fixture) with the same literal
expectations.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


def test_assigned_data_is_shared_not_copied(lib):
    """After ``x.data = y`` an in-place write to ``y`` shows in ``x``; x keeps its own version."""
    x = lib.ones(3, requires_grad=True)
    y = lib.zeros(2)
    x.data = y
    y.add_(1)
    assert (x.tolist(), tuple(x.shape), x._version, y._version) == ([1.0, 1.0], (2,), 0, 1)
    assert x.requires_grad and x.is_leaf and x.grad_fn is None


def test_assignment_may_change_dtype(lib):
    """A floating tensor may take data of another floating dtype; gradients follow it."""
    x = lib.ones(3, requires_grad=True)
    x.data = lib.ones(3, dtype=lib.float64)
    (x * 2).sum().backward()
    assert x.dtype == lib.float64 and x.grad.dtype == lib.float64
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_integer_data_refused_while_requiring_grad(lib):
    """Integer data for a tensor that requires grad raises torch's RuntimeError; without
    requires_grad it is accepted."""
    x = lib.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="data set to a tensor that requires gradients must"):
        x.data = lib.zeros(2, dtype=lib.int64)
    plain = lib.ones(3)
    plain.data = lib.zeros(2, dtype=lib.int64)
    assert plain.dtype == lib.int64


@pytest.mark.parametrize(
    ("value", "name"), [([1.0, 2.0], "list"), (np.zeros(2), "numpy.ndarray"), (3.0, "float")]
)
def test_non_tensor_data_is_a_type_error(lib, value, name):
    """Assigning anything but a tensor raises torch's TypeError naming the type."""
    x = lib.ones(3)
    with pytest.raises(TypeError, match=f"Variable data has to be a tensor, but got {name}$"):
        x.data = value


def test_grad_accumulates_into_the_old_grad(lib):
    """``.grad`` survives the assignment and the next backward adds to it."""
    x = lib.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    x.data = lib.full((3,), 4.0)
    (x * x).sum().backward()
    assert x.grad.tolist() == [10.0, 10.0, 10.0]


def test_accumulating_a_grad_of_another_shape_raises(lib):
    """After a shape change the old ``.grad`` no longer matches: the next backward raises."""
    x = lib.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    x.data = lib.ones(2)
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size"):
        (x * 2).sum().backward()


def test_data_has_its_own_version_counter(lib):
    """``x.data`` shares the array but not the version counter: writing through it in place
    is invisible to the saved-tensor check (unlike ``detach()``), and backward reads the new
    values."""
    x = lib.ones(3, requires_grad=True)
    y = x.exp()
    d = y.data
    d.mul_(2)
    assert (y._version, d._version, d.requires_grad, d._base) == (0, 1, False, None)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), [2 * np.e] * 3, rtol=1e-6)


def test_detach_shares_the_version_counter(lib):
    """The contrast: an in-place write through ``detach()`` makes backward refuse."""
    x = lib.ones(3, requires_grad=True)
    y = x.exp()
    y.detach().mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_non_leaf_keeps_its_history(lib):
    """A non-leaf whose data is replaced keeps its grad_fn; gradients still flow through it."""
    x = lib.ones(3, requires_grad=True)
    h = x * 2
    h.data = lib.full((3,), 7.0)
    assert h.tolist() == [7.0, 7.0, 7.0] and type(h.grad_fn).__name__ == "MulBackward0"
    h.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


@settings(max_examples=25, deadline=None)
@given(
    old=st.integers(1, 4),
    new=st.integers(1, 4),
    scale=st.floats(-3, 3, allow_nan=False).filter(lambda v: abs(v) > 0.1),
)
def test_training_on_reassigned_data_as_torch(old, new, scale):
    """Differential: the gradient of a loss taken after ``w.data = ...`` (any new shape) equals
    torch's, and the parameter stays a leaf that requires grad."""
    import hookgrad

    torch = pytest.importorskip("torch")
    results = []
    for lib in (hookgrad, torch):
        w = lib.ones(old, requires_grad=True)
        w.data = lib.arange(new, dtype=lib.float32) * scale
        (w * w).sum().backward()
        results.append((w.grad.tolist(), w.is_leaf, w.requires_grad, tuple(w.shape)))
    assert results[0][1:] == results[1][1:]
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
