"""Tensor creation (dtype inference, factories, seeding), conversion to Python, and repr.

Tests taking ``lib`` run on hookgrad and, when installed, on torch 2.13 with the same literals.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hookgrad


def dtype_name(t: Any) -> str:
    """'float32' for both torch.float32 and numpy's float32 dtype."""
    return str(t.dtype).rsplit(".", 1)[-1]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([1.0, 2.0], "float32"),
        (1.5, "float32"),
        ([1, 2], "int64"),
        (3, "int64"),
        ([True, False], "bool"),
        (True, "bool"),
        ([1, 2.5], "float32"),
        ([[1, 2], [3, 4]], "int64"),
        ([], "float32"),
        (np.array([1.0, 2.0]), "float64"),
        (np.array([1, 2], dtype=np.int32), "int32"),
        (np.float64(1.5), "float64"),
        (np.array(2.0, dtype=np.float32), "float32"),
    ],
)
def test_tensor_dtype_inference(lib: Any, data: Any, expected: str) -> None:
    """Python floats give float32, ints int64, bools bool; numpy data keeps its dtype."""
    assert dtype_name(lib.tensor(data)) == expected


def test_tensor_explicit_dtype_and_copy(lib: Any) -> None:
    """dtype= converts, and tensor() copies numpy input rather than sharing it."""
    source = np.array([1.0, 2.0])
    t = lib.tensor(source, dtype=lib.float32)
    assert dtype_name(t) == "float32"
    u = lib.tensor(source)
    source[0] = 99.0
    assert u.tolist() == [1.0, 2.0]
    assert dtype_name(lib.tensor([1, 2], dtype=lib.float64)) == "float64"


def test_factories_shapes_and_dtypes(lib: Any) -> None:
    """zeros/ones/full/empty/arange/linspace/eye give torch's shapes, dtypes and values."""
    assert lib.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert tuple(lib.ones((2, 1)).shape) == (2, 1)
    assert tuple(lib.zeros([3]).shape) == (3,)
    assert dtype_name(lib.zeros(2, dtype=lib.int64)) == "int64"
    assert lib.full((2,), 7).tolist() == [7, 7] and dtype_name(lib.full((2,), 7)) == "int64"
    assert dtype_name(lib.full((2,), 0.5)) == "float32"
    assert dtype_name(lib.full((1,), True)) == "bool"
    assert tuple(lib.empty(4, 2).shape) == (4, 2) and dtype_name(lib.empty(1)) == "float32"
    assert lib.arange(4).tolist() == [0, 1, 2, 3] and dtype_name(lib.arange(4)) == "int64"
    assert lib.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert dtype_name(lib.arange(3.0)) == "float32"
    assert lib.arange(5, device="cpu").tolist() == [0, 1, 2, 3, 4]
    assert lib.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert lib.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert lib.eye(2, 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert lib.zeros(()).tolist() == 0.0


def test_like_factories(lib: Any) -> None:
    """*_like copy shape and dtype unless told otherwise, and can require grad."""
    base = lib.ones(2, 3, dtype=lib.float64)
    assert dtype_name(lib.zeros_like(base)) == "float64"
    assert lib.ones_like(base).tolist() == [[1.0] * 3] * 2
    assert lib.full_like(base, 4).tolist() == [[4.0] * 3] * 2
    assert tuple(lib.empty_like(base).shape) == (2, 3)
    assert dtype_name(lib.zeros_like(base, dtype=lib.int64)) == "int64"
    assert lib.zeros_like(base, requires_grad=True).requires_grad
    r = lib.rand_like(base)
    assert dtype_name(r) == "float64" and float(r.min()) >= 0.0 and float(r.max()) < 1.0
    assert tuple(lib.randn_like(base).shape) == (2, 3)


def test_random_factories_ranges_and_dtypes(lib: Any) -> None:
    """rand is in [0, 1), randn float32, randint int64 within [low, high)."""
    r = lib.rand(200)
    assert dtype_name(r) == "float32" and float(r.min()) >= 0.0 and float(r.max()) < 1.0
    n = lib.randn(2, 3, requires_grad=True)
    assert tuple(n.shape) == (2, 3) and n.requires_grad and n.is_leaf
    i = lib.randint(3, 7, (500,))
    assert dtype_name(i) == "int64" and set(i.tolist()) == {3, 4, 5, 6}
    assert set(lib.randint(2, (100,)).tolist()) == {0, 1}
    assert dtype_name(lib.rand(2, dtype=lib.float64)) == "float64"


def test_manual_seed_reproduces_random_draws(lib: Any) -> None:
    """The same seed gives the same rand/randn/randint values; another seed gives others."""
    lib.manual_seed(123)
    first = (lib.rand(3).tolist(), lib.randn(3).tolist(), lib.randint(0, 100, (3,)).tolist())
    lib.manual_seed(123)
    again = (lib.rand(3).tolist(), lib.randn(3).tolist(), lib.randint(0, 100, (3,)).tolist())
    lib.manual_seed(124)
    other = (lib.rand(3).tolist(), lib.randn(3).tolist(), lib.randint(0, 100, (3,)).tolist())
    assert first == again
    assert first != other


def test_generator_argument_is_independent(lib: Any) -> None:
    """A Generator passed as generator= reproduces its draws after reseeding."""
    g = lib.Generator()
    g.manual_seed(5)
    a = lib.rand(4, generator=g).tolist()
    g.manual_seed(5)
    assert lib.rand(4, generator=g).tolist() == a


def test_item_and_tolist_return_python_numbers(lib: Any) -> None:
    """item()/tolist() give Python float/int/bool, never numpy scalars."""
    assert type(lib.tensor(2.5).item()) is float
    assert type(lib.tensor([3]).item()) is int
    assert type(lib.tensor(True).item()) is bool
    nested = lib.tensor([[1.5, 2.0]]).tolist()
    assert nested == [[1.5, 2.0]] and type(nested[0][0]) is float
    assert type(lib.tensor([1, 2]).tolist()[1]) is int
    assert type(lib.tensor(1.0).tolist()) is float
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    assert type((x * 2).sum().item()) is float
    assert float(lib.tensor([4.0])) == 4.0 and int(lib.tensor(7)) == 7


def _repr(lib: Any, t: Any) -> str:
    return repr(t)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (
            lambda L: L.tensor([1.0, 2.0], requires_grad=True),
            "tensor([1., 2.], requires_grad=True)",
        ),
        (
            lambda L: L.tensor([1.0, 2.0], requires_grad=True) * 2,
            "tensor([2., 4.], grad_fn=<MulBackward0>)",
        ),
        (
            lambda L: L.tensor([1.0, 2.0], requires_grad=True).sum(),
            "tensor(3., grad_fn=<SumBackward0>)",
        ),
        (lambda L: L.tensor([1.5, 10.0]), "tensor([ 1.5000, 10.0000])"),
        (lambda L: L.tensor([-1.5, 2.25]), "tensor([-1.5000,  2.2500])"),
        (lambda L: L.tensor(2.5), "tensor(2.5000)"),
        (lambda L: L.tensor(3), "tensor(3)"),
        (lambda L: L.tensor([1, 2, -3]), "tensor([ 1,  2, -3])"),
        (lambda L: L.tensor([True, False]), "tensor([ True, False])"),
        (lambda L: L.tensor([0.001, 10.0]), "tensor([1.0000e-03, 1.0000e+01])"),
        (lambda L: L.tensor([1.0, 2000.0]), "tensor([1.0000e+00, 2.0000e+03])"),
        (lambda L: L.tensor([1.0, float("nan"), float("inf")]), "tensor([1., nan, inf])"),
        (lambda L: L.tensor([-float("inf"), 1.5]), "tensor([  -inf, 1.5000])"),
        (
            lambda L: L.tensor([[1.5, -2.0], [3.0, 4.0]]),
            "tensor([[ 1.5000, -2.0000],\n        [ 3.0000,  4.0000]])",
        ),
        (
            lambda L: L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True),
            "tensor([1., 2.], dtype=torch.float64, requires_grad=True)",
        ),
        (lambda L: L.tensor([1, 2], dtype=L.int32), "tensor([1, 2], dtype=torch.int32)"),
        (lambda L: L.tensor([]), "tensor([])"),
        (lambda L: L.zeros(0, dtype=L.int64), "tensor([], dtype=torch.int64)"),
        (lambda L: L.zeros(2, 0), "tensor([], size=(2, 0))"),
        (
            lambda L: L.arange(30.0),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n        28., 29.])",
        ),
    ],
)
def test_repr_matches_torch(lib: Any, make: Any, expected: str) -> None:
    """repr prints torch's number format, alignment, dtype (as ``torch.int32``, the text a
    user pastes back under ``import hookgrad as torch``) and grad suffixes."""
    assert _repr(lib, make(lib)) == expected


def test_repr_summarizes_large_tensors(lib: Any) -> None:
    """Over 1000 elements, repr shows the first and last three with a padded ellipsis."""
    assert _repr(lib, lib.arange(2000.0)).startswith(
        "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,"
    )


def test_method_and_function_forms_agree() -> None:
    """``x.op(...)`` and ``hookgrad.op(x, ...)`` are the same kernel: same values, same node."""
    x = hookgrad.tensor([[-1.5, 0.5, 2.0], [0.25, -0.75, 3.0]], requires_grad=True)
    pairs = [
        (x.clamp(-1, 1), hookgrad.clamp(x, -1, 1)),
        (x.clamp(min=0), hookgrad.clip(x, min=0)),
        (x.exp(), hookgrad.exp(x)),
        (x.sum(1), hookgrad.sum(x, 1)),
        (x.max(), hookgrad.max(x)),
        (x.softmax(0), hookgrad.softmax(x, 0)),
        (x.transpose(0, 1), hookgrad.transpose(x, 0, 1)),
        (x.reshape(3, 2), hookgrad.reshape(x, (3, 2))),
        (x.masked_fill(x > 0, 0.0), hookgrad.masked_fill(x, x > 0, 0.0)),
        (x.abs(), abs(x)),
        (x.matmul(x.T), hookgrad.mm(x, x.T)),
    ]
    for method, function in pairs:
        assert method.tolist() == function.tolist()
        assert method.grad_fn.name() == function.grad_fn.name()


def test_int_tensor_arithmetic_dtypes(lib: Any) -> None:
    """Mixed dtypes follow torch: int/int divides to float32, int with float32 stays float32."""
    i, f = lib.tensor([1, 2]), lib.tensor([0.5, 1.5])
    assert dtype_name(i / lib.tensor([2, 2])) == "float32"
    assert dtype_name(i * f) == "float32"
    assert dtype_name(i + 1) == "int64"
    assert dtype_name(i * 1.5) == "float32"
    assert dtype_name(f + lib.tensor(1.0, dtype=lib.float64)) == "float32"
    assert dtype_name(i + lib.tensor(1.5, dtype=lib.float64)) == "float64"
    assert dtype_name(f * np.float64(2.0)) == "float32"
    assert dtype_name(lib.tensor([True]) + lib.tensor(1)) == "int64"
    assert dtype_name(lib.tensor([1, 2]).sum()) == "int64"
    assert dtype_name(lib.tensor([True, True]).sum()) == "int64"
    assert dtype_name(i.clamp(0.5)) == "float32"


def test_scalar_indexing_returns_a_view(lib: Any) -> None:
    """x[0, 0] is a 0-d view: writing to it changes x (numpy would hand back a copy)."""
    x = lib.zeros(2, 2)
    element = x[0, 0]
    element.add_(5)
    assert x.tolist() == [[5.0, 0.0], [0.0, 0.0]]


def test_setitem_on_plain_tensor_writes_in_place(lib: Any) -> None:
    """``x[idx] = v`` on a tensor outside autograd writes into x and its views."""
    x = lib.zeros(3, 2)
    row = x[1]
    x[1] = lib.tensor([1.0, 2.0])
    x[x > 1.5] = 9.0
    assert row.tolist() == [1.0, 9.0]
    assert x.tolist() == [[0.0, 0.0], [1.0, 9.0], [0.0, 0.0]]


def test_reshape_copy_is_not_a_view(lib: Any) -> None:
    """reshape of a non-contiguous tensor copies, so writing to the result leaves x alone."""
    x = lib.arange(6.0).reshape(2, 3)
    flat = x.T.reshape(6)
    flat[0] = 100.0
    assert x[0, 0].item() == 0.0
    same = x.reshape(3, 2)
    same[0, 0] = 100.0
    assert x[0, 0].item() == 100.0


def test_comparisons_record_no_graph(lib: Any) -> None:
    """Comparisons and predicates of a tensor requiring grad are plain bool tensors."""
    x = lib.tensor([1.0, float("nan"), 3.0], requires_grad=True)
    for out in (x == 1.0, x.eq(x), x > 2, x <= x, x != 3.0, x.isnan(), x.isinf(), lib.isfinite(x)):
        assert dtype_name(out) == "bool"
        assert not out.requires_grad and out.grad_fn is None
    assert (x > 0).any().item() is True and (x > 0).all().item() is False


def test_max_along_dim_breaks_ties_at_first_index(lib: Any) -> None:
    """max/min(dim) on ties report the first index, and only that element gets gradient."""
    x = lib.tensor([[2.0, 5.0, 5.0, 1.0], [3.0, 3.0, 0.0, 3.0]], requires_grad=True)
    values, indices = x.max(1)
    assert indices.tolist() == [1, 0]
    assert x.min(1).indices.tolist() == [3, 2]
    values.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]


@pytest.mark.parametrize(
    ("make", "spec"),
    [
        (lambda lib: lib.tensor(1.23456), ".4f"),
        (lambda lib: lib.tensor([1.0, 2.5]).sum(), "8.2e"),
        (lambda lib: lib.tensor(7, dtype=lib.int64), "03d"),
        (lambda lib: lib.tensor(1.5), ""),
        (lambda lib: lib.tensor([1.5]), ""),
        (lambda lib: lib.tensor([1.5]), ".2f"),
        (lambda lib: lib.nn.Parameter(lib.tensor(2.0)), ".2f"),
        (lambda lib: lib.zeros(2, 2), ""),
    ],
)
def test_format_follows_torch(make: Any, spec: str) -> None:
    """format() and f-strings: a 0-dim tensor as its value; others (and Parameter) as objects,
    str for an empty spec, else torch's TypeError."""
    torch = pytest.importorskip("torch")

    def formatted(lib: Any) -> str:
        try:
            return format(make(lib), spec)
        except TypeError as error:
            return f"TypeError: {error}"

    assert formatted(hookgrad) == formatted(torch)


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.tensor(1.5) * 1.0,
        lambda lib: lib.tensor([1.0, 2.0]).sum() * 2,
        lambda lib: lib.tensor(3.0).exp(),
        lambda lib: lib.tensor([[1.0, 2.0]]).mean(),
    ],
)
def test_in_place_ops_write_into_0_dim_results_of_ops(make: Any) -> None:
    """A 0-dim tensor an op returned takes in-place ops (mul_, add_, sub_), as in torch."""
    torch = pytest.importorskip("torch")
    values = []
    for lib in (hookgrad, torch):
        t = make(lib)
        t.mul_(2.0).add_(lib.tensor(0.5)).sub_(1.0)
        values.append(float(t))
    assert values[0] == pytest.approx(values[1], rel=1e-6)


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
@pytest.mark.parametrize(("left", "right"), [((3,), (2,)), ((3,), (2, 3)), ((2, 1), (3,))])
def test_in_place_ops_refuse_shapes_with_torchs_error(
    op: str, left: tuple[int, ...], right: tuple[int, ...]
) -> None:
    """An operand that does not broadcast into the tensor: torch's RuntimeError and message,
    and the tensor left as it was."""
    torch = pytest.importorskip("torch")
    seen = []
    for lib in (hookgrad, torch):
        x = lib.ones(*left)
        with pytest.raises(RuntimeError) as caught:
            getattr(x, op)(lib.ones(*right))
        seen.append((str(caught.value), x.tolist()))
    assert seen[0] == seen[1]
