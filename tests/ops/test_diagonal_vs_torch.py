"""``diagonal`` against torch 2.13: values, gradients, double backward, view semantics
(shared memory and version counter, writes through it) and error texts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad

from ..engine.test_double_backward_vs_torch import _check as assert_second_order_same
from .test_vs_torch import assert_same, rand

torch = pytest.importorskip("torch")


@st.composite
def _diagonal_calls(draw: st.DrawFn) -> tuple[np.ndarray, int, int, int]:
    """An N-d float32 array (N >= 2), an offset (past the size too) and two distinct dims,
    each given as a positive or a negative index."""
    shape = draw(hnp.array_shapes(min_dims=2, max_dims=4, min_side=0, max_side=4))
    ndim = len(shape)
    axis1, axis2 = draw(st.permutations(range(ndim)))[:2]
    dim1 = axis1 - draw(st.sampled_from([0, ndim]))
    dim2 = axis2 - draw(st.sampled_from([0, ndim]))
    offset = draw(st.integers(-5, 5))
    values = draw(hnp.arrays(np.float32, shape, elements=st.floats(-3, 3, width=32)))
    return values, offset, dim1, dim2


@settings(max_examples=60, deadline=None)
@given(call=_diagonal_calls())
def test_diagonal_matches_torch(call: tuple[np.ndarray, int, int, int]) -> None:
    """torch.diagonal and Tensor.diagonal give torch's values, shapes and input gradients for
    any offset (an empty result past the size) and any pair of dims, negative ones too."""
    x, offset, dim1, dim2 = call

    def program(L: Any, t: Any) -> Any:
        weights = L.arange(1, t.diagonal(offset, dim1, dim2).numel() + 1, dtype=L.float32)
        method = t.diagonal(offset, dim1, dim2)
        function = L.diagonal(t * 2, offset=offset, dim1=dim1, dim2=dim2)
        return method * weights.reshape(method.shape), function

    assert_same(program, x)


def test_diagonal_defaults_and_integer_input(lib: Any) -> None:
    """The default is the main diagonal over dims 0 and 1; dtype is kept."""
    x = lib.arange(12).reshape(3, 4)
    assert x.diagonal().tolist() == [0, 5, 10]
    assert lib.diagonal(x, 1).tolist() == [1, 6, 11]
    assert x.diagonal(-1).dtype == lib.int64
    assert lib.diagonal(x.reshape(1, 3, 4), 0, -1, 1).tolist() == [[0, 5, 10]]


def test_diagonal_is_a_view_sharing_memory_and_version(lib: Any) -> None:
    """The diagonal is a view of its base: writes through it reach the base and bump the one
    version counter both share; writes to the base show through it."""
    base = lib.zeros(3, 3)
    d = base.diagonal()
    assert d._base is base
    d.add_(1)
    assert base.tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    assert base._version == d._version == 1
    base[1, 1] = 7.0
    assert d.tolist() == [1, 7, 1] and d._version == 2
    base.diagonal(1).fill_(5.0)
    assert base.tolist() == [[1, 5, 0], [0, 7, 5], [0, 0, 1]]


def test_diagonal_records_diagonal_backward(lib: Any) -> None:
    """The node is DiagonalBackward0 into the input's history; the gradient fills the
    diagonal of zeros."""
    x = lib.ones(2, 3, requires_grad=True)
    d = (x * 1).diagonal(1)
    assert d.grad_fn.name() == "DiagonalBackward0"
    d.backward(lib.tensor([2.0, 3.0]))
    assert x.grad.tolist() == [[0, 2, 0], [0, 0, 3]]


def test_autograd_after_a_write_through_the_diagonal_matches_torch() -> None:
    """Scaling a non-leaf's diagonal in place gives the base torch's CopySlices history and
    the leaf torch's gradient; the diagonal itself reads AsStridedBackward0 afterwards."""

    def program(L: Any, a: Any) -> Any:
        x = a * a
        d = x.diagonal()
        d.mul_(3)
        assert type(x.grad_fn).__name__ == "CopySlices"
        assert type(x.diagonal(-1).grad_fn).__name__ == "DiagonalBackward0"
        return x, d

    assert_same(program, rand(3, 4))


def test_diagonal_double_backward_matches_torch() -> None:
    """create_graph=True through diagonal gives torch's first and second gradients."""
    assert_second_order_same(lambda L, a: (a * a).diagonal(1, -1, 0) * a[0, :3], rand(4, 3))


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.diagonal(L.zeros(2, 3), 0, -1, 1),
        lambda L: L.zeros(2, 3, 4).diagonal(0, 0, 3),
        lambda L: L.zeros(2, 3, 4).diagonal(0, -4, 1),
        lambda L: L.diagonal(L.zeros(3)),
        lambda L: L.diagonal(L.tensor(1.0)),
        lambda L: L.tensor(1.0).diagonal(0, 0, -1),
    ],
)
def test_diagonal_errors_match_torch(fails_like_torch: Any, call: Any) -> None:
    """Identical dims, dims out of range and inputs below 2-D fail with torch's error."""
    fails_like_torch(call)


def test_diagonal_of_a_read_only_array_stays_read_only() -> None:
    """A diagonal of a read-only array (an event payload's) cannot be written either."""
    from hookgrad._ops.diagonal import diagonal_of

    frozen = np.zeros((2, 2))
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        diagonal_of(frozen, 0, 0, 1)[...] = 1
    assert hookgrad.zeros(2, 2).diagonal()._data.flags.writeable


@settings(max_examples=40, deadline=None)
@given(
    x=hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=4),
        elements=st.floats(-3, 3, width=32),
    ),
    offset=st.integers(-5, 5),
)
def test_diag_matches_torch(x: np.ndarray, offset: int) -> None:
    """torch.diag and Tensor.diag: a vector becomes a square matrix with it on the
    ``offset``-th diagonal, a matrix gives that diagonal; values and gradients are torch's."""

    def program(L: Any, t: Any) -> Any:
        out = L.diag(t, offset)
        weights = L.arange(1, out.numel() + 1, dtype=L.float32).reshape(out.shape)
        return out * weights, t.diag(diagonal=offset), L.diag(input=t)

    assert_same(program, x)


@st.composite
def _diag_embed_calls(draw: st.DrawFn) -> tuple[np.ndarray, int, int, int]:
    """An array of 1 to 3 dims, an offset and two distinct dims of the result (one more)."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3))
    ndim = len(shape) + 1
    axis1, axis2 = draw(st.permutations(range(ndim)))[:2]
    dim1 = axis1 - draw(st.sampled_from([0, ndim]))
    dim2 = axis2 - draw(st.sampled_from([0, ndim]))
    values = draw(hnp.arrays(np.float32, shape, elements=st.floats(-3, 3, width=32)))
    return values, draw(st.integers(-3, 3)), dim1, dim2


@settings(max_examples=40, deadline=None)
@given(call=_diag_embed_calls())
def test_diag_embed_matches_torch(call: tuple[np.ndarray, int, int, int]) -> None:
    """torch.diag_embed and Tensor.diag_embed: the last dim written on a diagonal of zeros
    one dim larger, any offset and dims; values and gradients are torch's."""
    x, offset, dim1, dim2 = call

    def program(L: Any, t: Any) -> Any:
        out = L.diag_embed(t, offset, dim1, dim2)
        weights = L.arange(1, out.numel() + 1, dtype=L.float32).reshape(out.shape)
        return out * weights, t.diag_embed(offset=offset, dim1=dim1, dim2=dim2), t.diag_embed()

    assert_same(program, x)


def test_diag_nodes_and_copies(lib: Any) -> None:
    """diag of a vector records DiagEmbedBackward0, of a matrix DiagonalBackward0_copy: both
    results are copies, not views; integers keep their dtype."""
    v = lib.tensor([1.0, 2.0], requires_grad=True)
    m = lib.diag(v, -1)
    assert m.grad_fn.name() == "DiagEmbedBackward0" and m._base is None
    assert m.tolist() == [[0, 0, 0], [1, 0, 0], [0, 2, 0]]
    x = lib.ones(2, 3, requires_grad=True)
    d = (x * 1).diag(1)
    assert d.grad_fn.name() == "DiagonalBackward0_copy" and d._base is None
    base = lib.zeros(2, 2)
    base.diag().fill_(1.0)
    assert base.tolist() == [[0, 0], [0, 0]]
    assert lib.diag(lib.tensor([1, 2])).dtype == lib.int64
    assert lib.diag_embed(lib.tensor([[1, 2]])).tolist() == [[[1, 0], [0, 2]]]


def test_diag_writes_into_out(lib: Any) -> None:
    """torch.diag takes ``out=`` as torch's does."""
    out = lib.empty(2, 2)
    assert lib.diag(lib.tensor([3.0, 4.0]), out=out) is out
    assert out.tolist() == [[3, 0], [0, 4]]


@pytest.mark.parametrize(
    "program",
    [
        lambda L, a: L.diag((a * a)[0], 1)[1:, :4] * a,
        lambda L, a: L.diag(a * a, -1) * a[1:, 0],
        lambda L, a: (a * a).diag_embed(1, 0, 2) * a[0, 0],
    ],
)
def test_diag_double_backward_matches_torch(program: Any) -> None:
    """create_graph=True through diag and diag_embed gives torch's first and second
    gradients."""
    assert_second_order_same(program, rand(4, 4))


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.diag(L.zeros(2, 2, 2)),
        lambda L: L.tensor(1.0).diag(),
        lambda L: L.diag_embed(L.zeros(2, 3), 0, 0, 0),
        lambda L: L.diag_embed(L.zeros(2, 3), 0, 1, 3),
        lambda L: L.diag_embed(L.zeros(2, 3), 0, -1, 2),
        lambda L: L.tensor(1.0).diag_embed(),
    ],
)
def test_diag_errors_match_torch(fails_like_torch: Any, call: Any) -> None:
    """diag of other than 1-D or 2-D input and diag_embed with identical or out-of-range dims
    fail with torch's error."""
    fails_like_torch(call)


@settings(max_examples=30, deadline=None)
@given(
    x=hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=5),
        elements=st.floats(-3, 3, width=32),
    )
)
def test_trace_matches_torch(x: np.ndarray) -> None:
    """torch.trace and Tensor.trace sum the main diagonal of any matrix (empty too), with
    torch's gradient."""
    assert_same(lambda L, t: (L.trace(t) * 3, t.trace(), L.trace(input=t * t)), x)


def test_trace_node_and_dtypes(lib: Any) -> None:
    """trace records TraceBackward0; integer matrices give int64, float16 stays float16."""
    x = lib.ones(2, 3, requires_grad=True)
    t = lib.trace(x * 2)
    assert t.grad_fn.name() == "TraceBackward0" and t.item() == 4.0
    t.backward()
    assert x.grad.tolist() == [[2, 0, 0], [0, 2, 0]]
    assert lib.tensor([[1, 2], [3, 4]], dtype=lib.int32).trace().dtype == lib.int64
    assert lib.ones(2, 2, dtype=lib.uint8).trace().dtype == lib.int64
    assert lib.ones(3, 3, dtype=lib.float16).trace().dtype == lib.float16


def test_trace_double_backward_matches_torch() -> None:
    """create_graph=True through trace gives torch's first and second gradients."""
    assert_second_order_same(lambda L, a: L.trace(a * a) * a, rand(3, 4))


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.trace(L.zeros(2, 2, 2)),
        lambda L: L.zeros(3).trace(),
        lambda L: L.trace(L.tensor(1.0)),
        lambda L: L.trace(L.ones(2, 2, dtype=L.bool)),
    ],
)
def test_trace_errors_match_torch(fails_like_torch: Any, call: Any) -> None:
    """trace of anything but a matrix, or of a bool one, fails with torch's error."""
    fails_like_torch(call)
