"""Differential tests: the same program in hookgrad and torch 2.13, values and gradients compared.

Inputs are float32 (the dtype users train in). Each program's outputs are reduced with fixed
non-uniform weights, so every output element contributes a distinct amount to every gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad
from hookgrad._ops.unary import gelu as hg_gelu

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-5, 1e-6


def _gelu(lib: Any, x: Any, approximate: str = "none") -> Any:
    if lib is torch:
        return torch.nn.functional.gelu(x, approximate=approximate)
    return hg_gelu(x, approximate)


def _weights(shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    return np.cos(np.arange(n) * 1.3 + 0.4).reshape(shape).astype(np.float32)


def _run(lib: Any, fn: Callable[..., Any], arrays: list[np.ndarray]) -> tuple[list, list]:
    inputs = [
        lib.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a
        for a in arrays
    ]
    result = fn(lib, *inputs)
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    loss = None
    for out in outs:
        if out.requires_grad:
            term = (out * lib.tensor(_weights(tuple(out.shape)))).sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    values = [o.detach().numpy() for o in outs]
    grads = [
        None if not isinstance(t, lib.Tensor) or t.grad is None else t.grad.numpy() for t in inputs
    ]
    return values, grads


def _dtype_name(array: np.ndarray) -> str:
    return str(array.dtype)


def assert_same(
    fn: Callable[..., Any], *arrays: np.ndarray, rtol: float = RTOL, atol: float = ATOL
) -> None:
    """Run ``fn(lib, *tensors)`` in both libraries; outputs and input gradients must agree."""
    hv, hg = _run(hookgrad, fn, list(arrays))
    tv, tg = _run(torch, fn, list(arrays))
    assert len(hv) == len(tv)
    for h, t in zip(hv, tv):
        assert h.shape == t.shape
        assert _dtype_name(h) == _dtype_name(t)
        np.testing.assert_allclose(h, t, rtol=rtol, atol=atol)
    for i, (h, t) in enumerate(zip(hg, tg)):
        assert (h is None) == (t is None), f"input {i}: gradient presence differs"
        if h is not None:
            assert h.shape == t.shape and h.dtype == t.dtype
            np.testing.assert_allclose(h, t, rtol=rtol, atol=atol, err_msg=f"grad of input {i}")


def rand(*shape: int, lo: float = -2.0, hi: float = 2.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def positive(*shape: int, seed: int = 0) -> np.ndarray:
    return rand(*shape, lo=0.3, hi=2.5, seed=seed)


# ---------------------------------------------------------------------------- elementwise
ELEMENTWISE: dict[str, tuple[Callable[..., Any], list[np.ndarray]]] = {
    "add": (lambda L, a, b: a + b, [rand(2, 3), rand(3, seed=1)]),
    "add_alpha": (lambda L, a, b: L.add(a, b, alpha=2.5), [rand(2, 3), rand(2, 1, seed=1)]),
    "sub": (lambda L, a, b: a - b, [rand(4, 1, 3), rand(2, 1, seed=1)]),
    "mul": (lambda L, a, b: a * b, [rand(3, 1), rand(1, 4, seed=1)]),
    "div": (lambda L, a, b: a / b, [rand(2, 3), positive(3, seed=1)]),
    "pow_tensor": (lambda L, a, b: a**b, [positive(2, 3), rand(2, 3, seed=1)]),
    "scalar_left_and_right": (
        lambda L, x: (x + 2, 2 + x, x - 2, 2 - x, x * 3, 3 * x, x / 4, 4 / x, x**2, 2**x, x**-1.5),
        [positive(5)],
    ),
    "numpy_scalar_keeps_float32": (lambda L, x: x * np.float64(1.5) + np.float64(2), [rand(3)]),
    "pow_method_and_function": (lambda L, x: (x.pow(3), L.pow(x, 0.5)), [positive(4)]),
    "exp_log_sqrt": (lambda L, x: (x.exp(), x.log(), L.sqrt(x)), [positive(2, 3)]),
    "abs_neg": (lambda L, x: (x.abs(), x.neg(), -x, L.abs(x)), [rand(6)]),
    "trig": (lambda L, x: (x.sin(), L.cos(x)), [rand(2, 3)]),
    "tanh_sigmoid_relu": (lambda L, x: (x.tanh(), x.sigmoid(), x.relu(), L.relu(x)), [rand(3, 4)]),
    "sigmoid_extremes": (
        lambda L, x: x.sigmoid(),
        [np.array([-100.0, -20.0, 0.5, 20.0, 100.0], np.float32)],
    ),
    "gelu": (lambda L, x: _gelu(L, x), [rand(3, 5, lo=-4, hi=4)]),
    "gelu_tanh": (lambda L, x: _gelu(L, x, "tanh"), [rand(3, 5, lo=-4, hi=4)]),
    "clamp_min": (lambda L, x: x.clamp(min=-0.5), [rand(8)]),
    "clamp_max": (lambda L, x: L.clamp(x, max=0.5), [rand(8)]),
    "clamp_both": (lambda L, x: (x.clamp(-0.5, 0.5), x.clip(-1, 1)), [rand(8)]),
    "clamp_tensor_bounds": (
        lambda L, x, lo, hi: L.clamp(x, lo, hi),
        [rand(3, 4), rand(4, lo=-1, hi=-0.1, seed=1), rand(3, 1, lo=0.1, hi=1, seed=2)],
    ),
    "clamp_tensor_min_only": (lambda L, x, lo: x.clamp(min=lo), [rand(3, 4), rand(3, 4, seed=3)]),
    "clamp_crossed_tensor_bounds": (
        lambda L, x, lo, hi: x.clamp(lo, hi),
        [rand(6), np.full(6, 0.5, np.float32), np.full(6, -0.5, np.float32)],
    ),
    "where": (lambda L, x, y: L.where(x > 0, x, y), [rand(2, 3), rand(3, seed=1)]),
    "where_scalar": (lambda L, x: L.where(x > 0, x, 0.0), [rand(2, 3)]),
    "maximum_minimum": (
        lambda L, x, y: (L.maximum(x, y), L.minimum(x, y), x.maximum(y)),
        [rand(2, 3), rand(3, seed=1)],
    ),
    "maximum_ties_split": (
        lambda L, x, y: L.maximum(x, y),
        [np.array([1.0, 2.0, 3.0], np.float32), np.array([1.0, 0.0, 3.0], np.float32)],
    ),
    "softmax": (lambda L, x: (x.softmax(-1), L.softmax(x, 0)), [rand(3, 4, lo=-5, hi=5)]),
    "log_softmax": (
        lambda L, x: (x.log_softmax(1), L.log_softmax(x, -2)),
        [rand(3, 4, lo=-5, hi=5)],
    ),
    "softmax_large_inputs": (
        lambda L, x: x.softmax(-1),
        [np.array([1000.0, 999.0, -1000.0], np.float32)],
    ),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_matches_torch(name: str) -> None:
    """Elementwise ops (operators, methods, functions) agree with torch in value and gradient."""
    fn, arrays = ELEMENTWISE[name]
    assert_same(fn, *arrays)


# ---------------------------------------------------------------------------- matmul
MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (5, 3, 4)),
    ((5, 2, 3), (3, 4)),
    ((3,), (5, 3, 4)),
    ((2, 1, 2, 3), (4, 3, 2)),
]


@pytest.mark.parametrize(("sa", "sb"), MATMUL_SHAPES)
def test_matmul_matches_torch(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    """``@`` and matmul handle 1-D, 2-D, batched and broadcast-batched operands like torch."""
    assert_same(lambda L, a, b: (a @ b, L.matmul(a, b)), rand(*sa), rand(*sb, seed=1))


_A, _B = rand(2, 3, seed=5), rand(3, 4, seed=6)


ONE_SIDED: dict[str, tuple[Callable[..., Any], tuple[int, ...]]] = {
    "mm_right": (lambda L, b: L.tensor(_A) @ b, (3, 4)),
    "mm_left": (lambda L, a: a @ L.tensor(_B), (2, 3)),
    "dot_right": (lambda L, v: L.tensor(_B[:, 0]) @ v, (3,)),
    "mv_left": (lambda L, a: a @ L.tensor(_B[:, 0]), (2, 3)),
    "mul_left": (lambda L, a: a * L.tensor(_A), (2, 3)),
    "mul_right": (lambda L, b: L.tensor(_A) * b, (3,)),
    "div_numerator": (lambda L, a: a / L.tensor(np.abs(_A) + 0.5), (2, 3)),
    "div_denominator": (lambda L, b: L.tensor(_A) / (b.abs() + 0.5), (2, 3)),
}


@pytest.mark.parametrize("name", sorted(ONE_SIDED))
def test_one_operand_needs_grad(name: str) -> None:
    """Binary ops where only one operand requires grad give it torch's gradient."""
    program, shape = ONE_SIDED[name]
    assert_same(program, rand(*shape, seed=9))


def test_mm_and_dot_methods_match_torch() -> None:
    """mm/dot/bmm methods give torch's values and gradients."""
    assert_same(lambda L, a, b: a.mm(b), rand(2, 3), rand(3, 2, seed=1))
    assert_same(lambda L, a, b: a.dot(b), rand(4), rand(4, seed=1))
    assert_same(lambda L, a, b: a.bmm(b), rand(2, 2, 3), rand(2, 3, 2, seed=1))


# ---------------------------------------------------------------------------- reductions
REDUCTIONS: dict[str, tuple[Callable[..., Any], list[np.ndarray]]] = {
    "sum": (
        lambda L, x: (x.sum(), x.sum(0), x.sum(-1, keepdim=True), L.sum(x, (0, 2))),
        [rand(2, 3, 4)],
    ),
    "sum_int_dtype": (lambda L, x: L.tensor([1, 2, 3]).sum() + x.sum(), [rand(2)]),
    "mean": (lambda L, x: (x.mean(), x.mean(1), L.mean(x, (0, 1), keepdim=True)), [rand(2, 3, 4)]),
    "var": (
        lambda L, x: (x.var(), x.var(0), x.var(1, keepdim=True), x.var(unbiased=False)),
        [rand(3, 4)],
    ),
    "var_correction": (
        lambda L, x: (x.var(correction=0), x.var(dim=1, correction=2)),
        [rand(3, 4)],
    ),
    "std": (
        lambda L, x: (x.std(), L.std(x, 0), x.std(1, unbiased=False, keepdim=True)),
        [rand(3, 4)],
    ),
    "std_correction": (lambda L, x: x.std(dim=0, correction=0), [rand(3, 4)]),
    "std_zero_spread": (lambda L, x: x.std(), [np.full(4, 1.5, np.float32)]),
    "max_min_full": (lambda L, x: (x.max(), x.min(), L.max(x), L.min(x)), [rand(3, 4)]),
    "max_min_full_ties": (
        lambda L, x: (x.max(), x.min()),
        [np.array([3.0, 1.0, 3.0, 1.0, 2.0], np.float32)],
    ),
    "max_dim": (lambda L, x: tuple(x.max(1)) + tuple(x.max(0, keepdim=True)), [rand(3, 4)]),
    "min_dim": (lambda L, x: tuple(L.min(x, -1)) + tuple(x.min(dim=0)), [rand(3, 4)]),
    "amax_amin": (
        lambda L, x: (x.amax(), x.amax(1), x.amin((0, 1)), L.amax(x, 0, True)),
        [rand(3, 4)],
    ),
    "amax_ties": (
        lambda L, x: x.amax(1),
        [np.array([[2.0, 2.0, 1.0], [0.0, 5.0, 5.0]], np.float32)],
    ),
    "norm": (lambda L, x: (x.norm(), x.norm(dim=1), L.norm(x, dim=0, keepdim=True)), [rand(3, 4)]),
    "norm_p": (
        lambda L, x: (
            x.norm(p=1),
            x.norm(p=3, dim=1),
            x.norm(p=float("inf")),
            x.norm(p=float("inf"), dim=0),
        ),
        [rand(3, 4)],
    ),
    "norm_inf_ties": (
        lambda L, x: x.norm(p=float("inf")),
        [np.array([2.0, -2.0, 1.0], np.float32)],
    ),
    "norm_zero_vector": (lambda L, x: x.norm(), [np.zeros(3, np.float32)]),
    "prod": (
        lambda L, x: (x.prod(), x.prod(1), L.prod(x, 0, keepdim=True)),
        [rand(3, 4, lo=0.5, hi=1.5)],
    ),
    "prod_with_zeros": (
        lambda L, x: (x.prod(), x.prod(0), x.prod(1)),
        [np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 4.0], [1.5, 2.0, -1.0]], np.float32)],
    ),
    "logsumexp": (
        lambda L, x: (x.logsumexp(1), L.logsumexp(x, (0, 1)), x.logsumexp(0, keepdim=True)),
        [rand(3, 4)],
    ),
    "logsumexp_large": (
        lambda L, x: x.logsumexp(0),
        [np.array([1000.0, 1000.0, -5.0], np.float32)],
    ),
    "zero_dim_with_dim": (
        lambda L, x: (
            x.sum(0),
            x.mean(-1),
            x.amax(0),
            x.logsumexp(0),
            x.max(0)[0],
            x.min(-1)[0],
            x.norm(dim=0),
            x.prod(0),
            x.softmax(0),
            x.log_softmax(-1),
            x.std(0, unbiased=False),
        ),
        [np.array(1.5, np.float32)],
    ),
    "zero_dim_input": (
        lambda L, x: (x.sum(), x.mean(), x.max(), x.prod(), x.norm()),
        [np.array(1.5, np.float32)],
    ),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_match_torch(name: str) -> None:
    """Reductions (full, along dims, keepdim, ties, zeros) agree with torch."""
    fn, arrays = REDUCTIONS[name]
    assert_same(fn, *arrays)


def test_max_with_dim_returns_values_and_indices() -> None:
    """max(dim) returns a (values, indices) pair with int64 indices, like torch's."""
    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], np.float32)
    for lib in (hookgrad, torch):
        values, indices = lib.tensor(x).max(dim=1)
        assert values.tolist() == [5.0, 7.0]
        assert indices.tolist() == [1, 0]
        assert str(indices.dtype).endswith("int64")
        assert lib.tensor(x).min(0).indices.tolist() == [0, 1, 0]


# ---------------------------------------------------------------------------- shape ops
SHAPE: dict[str, tuple[Callable[..., Any], list[np.ndarray]]] = {
    "reshape_view": (
        lambda L, x: (x.reshape(3, 2), x.view(-1), x.reshape((6, 1)), L.reshape(x, (2, 3))),
        [rand(2, 3)],
    ),
    "reshape_non_contiguous": (lambda L, x: x.T.reshape(6), [rand(2, 3)]),
    "flatten": (lambda L, x: (x.flatten(), x.flatten(1), L.flatten(x, 0, 1)), [rand(2, 3, 2)]),
    "squeeze_unsqueeze": (
        lambda L, x: (x.squeeze(), x.squeeze(0), x.squeeze(1), x.unsqueeze(0), L.unsqueeze(x, -1)),
        [rand(1, 3, 1)],
    ),
    "transpose_permute": (
        lambda L, x: (x.transpose(0, 2), x.permute(2, 0, 1), L.permute(x, (1, 0, 2)), x.mT),
        [rand(2, 3, 4)],
    ),
    "t_T": (lambda L, x: (x.t(), x.T), [rand(2, 3)]),
    "expand": (
        lambda L, x: (x.expand(2, 3, 4), x.expand(-1, 4), x.expand_as(L.zeros(3, 4))),
        [rand(3, 1)],
    ),
    "cat": (
        lambda L, a, b: (L.cat([a, b]), L.cat((a, b, a), dim=1)),
        [rand(2, 3), rand(2, 3, seed=1)],
    ),
    "cat_uneven": (lambda L, a, b: L.cat([a, b], -1), [rand(2, 1), rand(2, 4, seed=1)]),
    "stack": (
        lambda L, a, b: (L.stack([a, b]), L.stack([a, b], dim=-1)),
        [rand(2, 3), rand(2, 3, seed=1)],
    ),
    "split": (lambda L, x: x.split(2, dim=1) + L.split(x, [1, 2], 0), [rand(3, 5)]),
    "chunk_unbind": (lambda L, x: x.chunk(3, 1) + x.unbind(0) + L.unbind(x, 1), [rand(2, 5)]),
    "split_piece_unused": (lambda L, x: x.split(2)[1], [rand(5, 2)]),
    "to_dtype": (lambda L, x: (x.to(L.float64) * 2, x.double(), x.float()), [rand(3)]),
    "clone": (lambda L, x: x.clone() * 2, [rand(3)]),
}


@pytest.mark.parametrize("name", sorted(SHAPE))
def test_shape_ops_match_torch(name: str) -> None:
    """View, join and split ops agree with torch in value and gradient."""
    fn, arrays = SHAPE[name]
    assert_same(fn, *arrays)


# ---------------------------------------------------------------------------- indexing
def _setitem_program(L: Any, x: Any, v: Any) -> Any:
    y = x * 2
    y[1] = v
    y[:, 0] = 7.0
    return y


def _setitem_mask_program(L: Any, x: Any, v: Any) -> Any:
    y = x + 0
    y[x > 0] = v
    return y


INDEXING: dict[str, tuple[Callable[..., Any], list[np.ndarray]]] = {
    "basic": (
        lambda L, x: (x[0], x[1:], x[:, 1], x[..., 0], x[None], x[0, None], x[1:, ::2], x[-1, -1]),
        [rand(3, 4)],
    ),
    "advanced_repeated": (lambda L, x: (x[L.tensor([0, 0, 2])], x[[1, 1], [0, 0]]), [rand(3, 4)]),
    "advanced_mixed": (
        lambda L, x: (x[:, [0, 0, 3]], x[0, L.tensor([1, 1])], x[..., [2]]),
        [rand(3, 4)],
    ),
    "boolean_mask": (lambda L, x: (x[x > 0], x[L.tensor([True, False, True])]), [rand(3, 4)]),
    "setitem_non_leaf": (_setitem_program, [rand(3, 4), rand(4, seed=1)]),
    "setitem_mask_scalar_value": (_setitem_mask_program, [rand(3, 4), np.array(0.5, np.float32)]),
    "masked_fill": (
        lambda L, x: (x.masked_fill(x > 0, 0.0), L.masked_fill(x, x < -1, -1.0)),
        [rand(3, 4)],
    ),
    "masked_fill_tensor_value": (
        lambda L, x, v: x.masked_fill(x > 0, v),
        [rand(3, 4), np.array(2.0, np.float32)],
    ),
    "masked_fill_broadcast_mask": (
        lambda L, x: x.masked_fill(L.tensor([True, False, True, False]), 9.0),
        [rand(3, 4)],
    ),
    "gather": (
        lambda L, x: (
            x.gather(1, L.tensor([[0, 0], [3, 1], [2, 2]])),
            L.gather(x, 0, L.tensor([[0, 2, 2, 1]])),
        ),
        [rand(3, 4)],
    ),
}


@pytest.mark.parametrize("name", sorted(INDEXING))
def test_indexing_matches_torch(name: str) -> None:
    """Indexing, setitem, masked_fill and gather agree with torch (scatter-add on repeats)."""
    fn, arrays = INDEXING[name]
    assert_same(fn, *arrays)


def test_comparisons_and_predicates_match_torch() -> None:
    """Comparisons, isnan/isinf/isfinite, all/any and eq give torch's booleans."""
    x = np.array([[1.0, np.nan, -np.inf], [0.0, 2.0, np.inf]], np.float32)
    y = np.array([1.0, 2.0, 0.0], np.float32)
    results = []
    for lib in (hookgrad, torch):
        a, b = lib.tensor(x), lib.tensor(y)
        outs = [
            a == b,
            a != b,
            a < b,
            a <= b,
            a > b,
            a >= 1.0,
            a.eq(b),
            lib.eq(a, 2.0),
            a.isnan(),
            lib.isinf(a),
            a.isfinite(),
            (a > 0).all(),
            (a > 0).any(),
            (a > 0).all(1),
            lib.any(a > 1, 0),
            (a > 0) & (a < 2),
            (a > 0) | a.isnan(),
            ~(a > 0),
        ]
        results.append([o.tolist() for o in outs])
        assert all(str(o.dtype).endswith("bool") for o in outs)
    assert results[0] == results[1]


# ---------------------------------------------------------------------------- hypothesis: broadcasting
@settings(max_examples=20, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4),
    op=st.sampled_from(["add", "sub", "mul", "div", "maximum", "where"]),
    seed=st.integers(0, 2**16),
)
def test_broadcast_binary_ops_match_torch(shapes: Any, op: str, seed: int) -> None:
    """For any broadcastable shape pair (0-d included), binary ops agree with torch."""
    (sa, sb), _ = shapes
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, sa).astype(np.float32)
    b = rng.uniform(0.5, 2, sb).astype(np.float32)
    fns: dict[str, Callable[..., Any]] = {
        "add": lambda L, x, y: x + y,
        "sub": lambda L, x, y: y - x,
        "mul": lambda L, x, y: x * y,
        "div": lambda L, x, y: x / y,
        "maximum": lambda L, x, y: L.maximum(x, y),
        "where": lambda L, x, y: L.where(x > 0, x, y),
    }
    assert_same(fns[op], a, b)


@settings(max_examples=20, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
    data=st.data(),
    op=st.sampled_from(
        ["sum", "mean", "var", "std", "amax", "logsumexp", "softmax", "norm", "prod"]
    ),
)
def test_dim_reductions_match_torch(shape: tuple[int, ...], data: st.DataObject, op: str) -> None:
    """Reductions along any dim, with and without keepdim, agree with torch."""
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    keepdim = data.draw(st.booleans())
    if op in ("var", "std") and shape[dim] < 2:
        dim = None
    x = np.random.default_rng(sum(shape)).uniform(0.5, 1.5, shape).astype(np.float32)
    fns: dict[str, Callable[..., Any]] = {
        "sum": lambda L, t: t.sum(dim, keepdim=keepdim),
        "mean": lambda L, t: t.mean(dim, keepdim=keepdim),
        "var": lambda L, t: t.var(dim, keepdim=keepdim) if dim is not None else t.var(),
        "std": lambda L, t: t.std(dim, keepdim=keepdim) if dim is not None else t.std(),
        "amax": lambda L, t: t.amax(dim, keepdim=keepdim),
        "logsumexp": lambda L, t: t.logsumexp(dim, keepdim=keepdim),
        "softmax": lambda L, t: t.softmax(dim),
        "norm": lambda L, t: t.norm(dim=dim, keepdim=keepdim),
        "prod": lambda L, t: t.prod(dim, keepdim=keepdim),
    }
    assume(not (op in ("var", "std") and dim is None and int(np.prod(shape)) < 2))
    assert_same(fns[op], x)


# ---------------------------------------------------------------------------- masked gradients
MASKING = {
    "relu": lambda L, t: L.relu(t),
    "relu_inplace": lambda L, t: L.nn.functional.relu(t * 1, inplace=True),
    "clamp": lambda L, t: t.clamp(-1, 1),
    "maximum": lambda L, t: L.maximum(t, L.zeros(6)),
    "minimum": lambda L, t: L.minimum(L.zeros(6), t),
}


def _masked_grads(name: str, x: np.ndarray, seed: np.ndarray) -> list[np.ndarray]:
    """The gradient of MASKING[name] at ``x`` for the seed gradient, on hookgrad then torch."""
    grads = []
    for lib in (hookgrad, torch):
        t = lib.from_numpy(x.copy()).requires_grad_()
        MASKING[name](lib, t).backward(lib.from_numpy(seed.copy()))
        grads.append(t.grad.numpy())
    return grads


@pytest.mark.parametrize("name", sorted(MASKING))
def test_masked_gradients_drop_nan_and_inf_as_torch(name: str) -> None:
    """An op that blocks the gradient where a unit is off gives an exact 0 there even for a NaN
    or Inf gradient (torch selects, it does not multiply by a mask); 0 is an off ReLU unit."""
    x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0, 3.0], np.float32)
    seed = np.array([np.nan, np.inf, np.nan, -np.inf, np.nan, 1.0], np.float32)
    ours, theirs = _masked_grads(name, x, seed)
    np.testing.assert_array_equal(ours, theirs)
    assert np.isnan(theirs).any() and (theirs == 0).any()  # the case is a real one


@pytest.mark.parametrize("name", sorted(MASKING))
def test_masked_gradients_at_a_nan_input_as_torch(name: str) -> None:
    """At a NaN input each op passes or blocks the gradient as torch does (relu passes it:
    threshold_backward blocks only where the output is <= 0)."""
    x = np.array([np.nan, 1.0, -1.0, 0.0, 2.0, -3.0], np.float32)
    seed = np.array([5.0, 2.0, 3.0, 4.0, 6.0, 7.0], np.float32)
    np.testing.assert_array_equal(*_masked_grads(name, x, seed))
