"""Differential tests for the ops real programs use beyond the core set: triangles, scans,
batched products, einsum, lerp, order statistics, scatter, repeat_interleave and friends.

Each program runs in hookgrad and torch 2.13; values, dtypes, shapes and input gradients must
agree (``assert_same`` from test_vs_torch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad

from .test_vs_torch import assert_same, positive, rand

torch = pytest.importorskip("torch")

_IDX = np.array([[0, 2], [1, 1], [3, 0]])

PROGRAMS: dict[str, tuple[Callable[..., Any], list[np.ndarray]]] = {
    "tril_triu": (
        lambda L, x: (x.tril(), x.triu(1), L.tril(x, -1), L.triu(x, diagonal=-2)),
        [rand(3, 4)],
    ),
    "tril_batched": (lambda L, x: x.tril(), [rand(2, 3, 3)]),
    "causal_mask": (
        lambda L, x: x.masked_fill(L.tril(L.ones(4, 4)) == 0, float("-inf")).softmax(-1),
        [rand(2, 4, 4)],
    ),
    "cumsum_cumprod": (
        lambda L, x: (x.cumsum(0), x.cumsum(-1), L.cumsum(x, 1), x.cumprod(1), L.cumprod(x, 0)),
        [rand(3, 4, lo=0.5, hi=1.5)],
    ),
    "cumsum_dtype": (lambda L, x: x.cumsum(0, dtype=L.float64), [rand(5)]),
    "cumprod_with_zeros": (
        lambda L, x: (x.cumprod(0), x.cumprod(1)),
        [np.array([[1.5, 0.0, 2.0], [0.0, 3.0, 0.0], [2.0, -1.0, 0.5]], np.float32)],
    ),
    "cumsum_int": (lambda L, x: L.tensor([[1, 2], [3, 4]]).cumsum(1) + x.cumsum(0), [rand(2)]),
    "bmm": (lambda L, a, b: (L.bmm(a, b), a.bmm(b)), [rand(2, 3, 4), rand(2, 4, 5, seed=1)]),
    "baddbmm": (
        lambda L, c, a, b: (L.baddbmm(c, a, b), c.baddbmm(a, b, beta=0.5, alpha=2.0)),
        [rand(2, 3, 5), rand(2, 3, 4, seed=1), rand(2, 4, 5, seed=2)],
    ),
    "baddbmm_broadcast_input": (
        lambda L, c, a, b: L.baddbmm(c, a, b, alpha=0.5),
        [rand(5), rand(2, 3, 4, seed=1), rand(2, 4, 5, seed=2)],
    ),
    "mv": (lambda L, a, v: (L.mv(a, v), a.mv(v)), [rand(3, 4), rand(4, seed=1)]),
    "t": (lambda L, x, v: (L.t(x), x.t(), v.t()), [rand(2, 3), rand(3, seed=1)]),
    "einsum_matmul": (
        lambda L, a, b: L.einsum("ij,jk->ik", a, b),
        [rand(2, 3), rand(3, 4, seed=1)],
    ),
    "einsum_batched": (
        lambda L, a, b: L.einsum("bhqd,bhkd->bhqk", a, b),
        [rand(2, 2, 3, 4), rand(2, 2, 5, 4, seed=1)],
    ),
    "einsum_outer_trace_sum": (
        lambda L, a, b: (
            L.einsum("i,j->ij", a, b),
            L.einsum("i,i->", a, a),
            L.einsum("ij->j", L.einsum("i,j", a, b)),
        ),
        [rand(3), rand(4, seed=1)],
    ),
    "einsum_ellipsis_list": (
        lambda L, a, b: L.einsum("...ij,...jk->...ik", [a, b]),
        [rand(2, 3, 4), rand(2, 4, 2, seed=1)],
    ),
    "einsum_ellipsis_broadcast": (
        lambda L, a, b: L.einsum("...ij,...jk->...ik", a, b),
        [rand(2, 1, 3, 4), rand(5, 4, 2, seed=1)],
    ),
    "einsum_three_operands": (
        lambda L, a, b, c: L.einsum("ij,jk,kl->il", a, b, c),
        [rand(2, 3), rand(3, 3, seed=1), rand(3, 2, seed=2)],
    ),
    "einsum_bilinear": (
        lambda L, a, w, b: L.einsum("bn,anm,bm->ba", a, w, b),
        [rand(2, 3), rand(4, 3, 5, seed=1), rand(2, 5, seed=2)],
    ),
    "einsum_diagonal": (lambda L, a: (L.einsum("ii->i", a), L.einsum("ii", a)), [rand(3, 3)]),
    "einsum_transpose_implicit": (lambda L, a: L.einsum("ji", a), [rand(2, 3)]),
    "lerp_number": (
        lambda L, a, b: (L.lerp(a, b, 0.3), a.lerp(b, 0.75)),
        [rand(2, 3), rand(3, seed=1)],
    ),
    "lerp_tensor_weight": (
        lambda L, a, b, w: L.lerp(a, b, w),
        [rand(2, 3), rand(2, 3, seed=1), rand(3, lo=0, hi=1, seed=2)],
    ),
    "addcmul_addcdiv": (
        lambda L, x, a, b: (L.addcmul(x, a, b, value=0.5), x.addcdiv(a, b, value=-2)),
        [rand(2, 3), rand(2, 3, seed=1), positive(3, seed=2)],
    ),
    "log10_log2": (lambda L, x: (x.log10(), L.log2(x), L.log10(x)), [positive(2, 3)]),
    "log_int": (lambda L, x: (L.tensor([1, 10, 100]).log10(), L.tensor([1, 8]).log2()), [rand(1)]),
    "var_mean_std_mean": (
        lambda L, x: (
            *L.var_mean(x),
            *L.var_mean(x, 1),
            *L.var_mean(x, 0, keepdim=True, correction=0),
            *L.std_mean(x, dim=1, unbiased=False),
            *L.std_mean(x, (0, 1)),
        ),
        [rand(3, 4)],
    ),
    "var_mean_one_output_used": (lambda L, x: L.var_mean(x, 0)[1] * 3, [rand(3, 4)]),
    "sort": (
        lambda L, x: (*x.sort(), *L.sort(x, 0, descending=True), *x.sort(dim=1, stable=True)),
        [rand(3, 5)],
    ),
    "sort_ties_stable": (
        lambda L, x: (*x.sort(stable=True), *x.sort(descending=True, stable=True)),
        [np.array([2.0, 1.0, 2.0, 0.0, 1.0, 2.0], np.float32)],
    ),
    "sort_nan_last": (
        lambda L, x: (*x.sort(), *x.sort(descending=True)),
        [np.array([1.0, np.nan, -1.0, 3.0], np.float32)],
    ),
    "argsort": (
        lambda L, x: (x.argsort(), L.argsort(x, 0, descending=True), x.argsort(dim=-1)),
        [rand(3, 5)],
    ),
    "topk": (
        lambda L, x: (*x.topk(2), *L.topk(x, 1, dim=0), *x.topk(3, largest=False)),
        [rand(4, 5)],
    ),
    "median": (
        lambda L, x: (x.median(), *x.median(1), *L.median(x, 0, keepdim=True)),
        [rand(4, 5)],
    ),
    "median_even_is_lower": (lambda L, x: x.median(), [rand(6)]),
    "scatter_src": (
        lambda L, x, s: (
            x.scatter(1, L.tensor(_IDX), s),
            L.scatter(x, 0, L.tensor(_IDX[:2]), s[:2]),
        ),
        [rand(3, 4), rand(3, 2, seed=1)],
    ),
    "scatter_value": (lambda L, x: x.scatter(1, L.tensor(_IDX), 7.5), [rand(3, 4)]),
    "scatter_add_repeats": (
        lambda L, x, s: (
            x.scatter_add(1, L.tensor(_IDX), s),
            L.scatter_add(x, 0, L.tensor(_IDX), s),
        ),
        [rand(4, 4), rand(3, 2, seed=1)],
    ),
    "where_nonzero_argwhere": (
        lambda L, x: (
            *L.where(x > 0),
            x.nonzero(),
            *L.nonzero(x > 1, as_tuple=True),
            L.argwhere(x < 0),
            x.where(x > 0, -1.0),
            L.where(x > 0.5, x, x * 2),
        ),
        [rand(3, 4)],
    ),
    "nonzero_zero_dim": (
        lambda L, x: (L.tensor(3.0).nonzero(), *L.tensor(0.0).nonzero(as_tuple=True), x * 1),
        [rand(2)],
    ),
    "keepdims_alias": (
        lambda L, x: (
            x.sum(0, keepdims=True),
            L.mean(x, 1, keepdims=True),
            x.var(0, keepdims=True),
            L.std(x, 1, keepdims=True, correction=0),
            x.amax(1, keepdims=True),
            L.amin(x, 0, keepdims=True),
            *x.max(1, keepdims=True),
            *L.min(x, 0, keepdims=True),
            x.argmax(1, keepdims=True),
            x.prod(0, keepdims=True),
            L.logsumexp(x, 1, keepdims=True),
            (x > 0).all(1, keepdims=True),
            L.any(x > 0, 0, keepdims=True),
            *x.median(1, keepdims=True),
            *L.var_mean(x, 1, keepdims=True),
        ),
        [rand(3, 4)],
    ),
    "gather_smaller_index": (
        lambda L, x: (x.gather(1, L.tensor([[0, 3]])), L.gather(x, 0, L.tensor([[2], [2]]))),
        [rand(3, 4)],
    ),
    "gather_scatter_roundtrip": (
        lambda L, x: L.zeros(3, 4).scatter_add(1, L.tensor(_IDX), x.gather(1, L.tensor(_IDX))),
        [rand(3, 4)],
    ),
    "flip": (
        lambda L, x: (x.flip(0), x.flip(0, 2), L.flip(x, (1,)), x.flip([-1])),
        [rand(2, 3, 4)],
    ),
    "narrow": (
        lambda L, x: (x.narrow(0, 1, 2), L.narrow(x, 1, -3, 2), x.narrow(-1, 0, 4) * 2),
        [rand(3, 4)],
    ),
    "index_select": (
        lambda L, x: (x.index_select(0, L.tensor([2, 0, 2])), L.index_select(x, 1, L.tensor([3]))),
        [rand(3, 4)],
    ),
    "repeat_interleave": (
        lambda L, x: (
            x.repeat_interleave(2),
            x.repeat_interleave(3, dim=1),
            L.repeat_interleave(x, L.tensor([1, 0, 2]), dim=0),
            x.repeat_interleave(L.tensor(2), dim=-1),
        ),
        [rand(3, 2)],
    ),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_more_ops_match_torch(name: str) -> None:
    """Each op agrees with torch in values, dtypes, shapes and input gradients."""
    fn, arrays = PROGRAMS[name]
    assert_same(fn, *arrays)


def test_repeat_interleave_of_counts_matches_torch() -> None:
    """``repeat_interleave(counts)`` repeats each index by its count, as torch's."""
    ours = hookgrad.repeat_interleave(hookgrad.tensor([1, 0, 3]))
    theirs = torch.repeat_interleave(torch.tensor([1, 0, 3]))
    assert ours.tolist() == theirs.tolist() == [0, 2, 2, 2]
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")


def test_result_tuples_are_named_as_torch() -> None:
    """sort/topk/median return named (values, indices) pairs whose type name is torch's."""
    for lib in (hookgrad, torch):
        x = lib.tensor([[3.0, 1.0, 2.0]])
        for result, name in ((x.sort(), "sort"), (x.topk(2), "topk"), (x.median(1), "median")):
            assert type(result).__name__ == name
            assert result.values.shape == result[0].shape
            assert result.indices.dtype == lib.int64


_INPLACE_STEPS: list[Callable[[Any, Any, Any], Any]] = [
    lambda L, x, a: x.tril_(),
    lambda L, x, a: x.triu_(-1),
    lambda L, x, a: x.lerp_(a, 0.25),
    lambda L, x, a: x.addcmul_(a, a, value=0.5),
    lambda L, x, a: x.addcdiv_(a, a + 1, value=-1.5),
    lambda L, x, a: x.scatter_(1, L.tensor([[0], [2], [1]]), 4.0),
    lambda L, x, a: x.scatter_add_(0, L.tensor([[1, 1, 0]]), a[:1]),
    lambda L, x, a: x.sign_(),
]


def _inplace_steps(lib: Any, x: Any, a: Any) -> list[np.ndarray]:
    """x after each in-place op of the chain (each must return x itself)."""
    seen = []
    for step in _INPLACE_STEPS:
        assert step(lib, x, a) is x
        seen.append(x.numpy().copy())
    return seen


def test_inplace_forms_match_torch() -> None:
    """tril_/triu_/lerp_/addcmul_/addcdiv_/scatter_/scatter_add_/sign_ write in place as torch."""
    x0, a0 = rand(3, 3), positive(3, 3, seed=1)
    ours = _inplace_steps(hookgrad, hookgrad.tensor(x0), hookgrad.tensor(a0))
    theirs = _inplace_steps(torch, torch.tensor(x0), torch.tensor(a0))
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(mine, reference, rtol=1e-6, atol=1e-6)


def test_inplace_form_records_for_autograd() -> None:
    """An in-place op on a non-leaf is recorded: the gradient flows as through torch's."""
    assert_same(
        lambda L, x, a: (x * 1).addcmul_(a, a, value=2).tril_(), rand(3, 3), rand(3, 3, seed=1)
    )


ERRORS: dict[str, Callable[[Any], Any]] = {
    "tril_1d": lambda L: L.ones(3).tril(),
    "narrow_start": lambda L: L.ones(3, 4).narrow(1, 5, 1),
    "narrow_length": lambda L: L.ones(3, 4).narrow(1, 2, 5),
    "flip_repeated": lambda L: L.ones(3, 4).flip(0, 0),
    "bmm_2d": lambda L: L.bmm(L.ones(3, 4), L.ones(3, 4)),
    "bmm_inner": lambda L: L.bmm(L.ones(2, 3, 4), L.ones(2, 3, 4)),
    "mv_shapes": lambda L: L.mv(L.ones(3, 4), L.ones(3)),
    "mv_ranks": lambda L: L.mv(L.ones(3, 4), L.ones(3, 4)),
    "topk_k": lambda L: L.ones(3, 4).topk(5),
    "repeats_size": lambda L: L.ones(3, 4).repeat_interleave(L.tensor([1, 2]), dim=0),
    "scatter_bounds": lambda L: L.ones(3, 4).scatter(1, L.tensor([[5]]), 1.0),
    "scatter_float_index": lambda L: L.ones(3, 4).scatter(1, L.tensor([[0.0]]), 1.0),
    "lerp_dtypes": lambda L: L.lerp(L.ones(2), L.ones(2, dtype=L.float64), 0.5),
    "where_two_arguments": lambda L: L.where(L.ones(2) > 0, L.ones(2)),
    "gather_bounds": lambda L: L.ones(3, 4).gather(1, L.tensor([[0, 9]])),
    "gather_negative": lambda L: L.ones(3, 4).gather(1, L.tensor([[-1]])),
    "gather_index_too_large": lambda L: L.ones(3, 4).gather(1, L.zeros(4, 1, dtype=L.int64)),
    "gather_rank": lambda L: L.ones(3, 4).gather(1, L.tensor([0])),
    "scatter_index_too_large": lambda L: L.ones(3, 4).scatter(1, L.zeros(4, 1, dtype=L.int64), 1.0),
    "scatter_rank": lambda L: L.ones(3, 4).scatter(1, L.tensor([0]), 1.0),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_torch(name: str) -> None:
    """Misuse raises torch's exception type with torch's message."""
    with pytest.raises(Exception) as theirs:
        ERRORS[name](torch)
    with pytest.raises(type(theirs.value)) as ours:
        ERRORS[name](hookgrad)
    assert str(ours.value) == str(theirs.value).splitlines()[0]


@settings(max_examples=25, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
    data=st.data(),
    op=st.sampled_from(
        ["sort", "sort_desc", "argsort", "topk", "median", "cumsum", "cumprod", "flip"]
    ),
)
def test_ops_along_a_dim_match_torch(shape: tuple[int, ...], data: st.DataObject, op: str) -> None:
    """Along any dim of any shape, the order statistics and scans agree with torch."""
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(0, shape[dim]))
    # distinct values: tie order is unspecified for topk and median in torch
    x = np.random.default_rng(sum(shape)).permutation(int(np.prod(shape))).reshape(shape)
    x = (x * 0.37 - 1).astype(np.float32)
    fns: dict[str, Callable[..., Any]] = {
        "sort": lambda L, t: tuple(t.sort(dim)),
        "sort_desc": lambda L, t: tuple(t.sort(dim, descending=True)),
        "argsort": lambda L, t: t.argsort(dim),
        "topk": lambda L, t: tuple(t.topk(k, dim)),
        "median": lambda L, t: tuple(t.median(dim)),
        "cumsum": lambda L, t: t.cumsum(dim),
        "cumprod": lambda L, t: (t * 0.5 + 1).cumprod(dim),
        "flip": lambda L, t: t.flip(dim),
    }
    assert_same(fns[op], x)


@settings(max_examples=20, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=4),
    weight=st.floats(0, 1),
    seed=st.integers(0, 2**16),
)
def test_lerp_and_addcmul_broadcast_as_torch(shapes: Any, weight: float, seed: int) -> None:
    """lerp (number and tensor weight) and addcmul broadcast and differentiate as torch's."""
    (sa, sb, sc), _ = shapes
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-2, 2, sa).astype(np.float32), rng.uniform(-2, 2, sb).astype(np.float32)
    c = rng.uniform(0, 1, sc).astype(np.float32)
    assert_same(lambda L, x, y: L.lerp(x, y, weight), a, b)
    assert_same(lambda L, x, y, w: (L.lerp(x, y, w), L.addcmul(x, y, w, value=0.5)), a, b, c)


@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(1, 3),
    i=st.integers(1, 4),
    j=st.integers(1, 4),
    k=st.integers(1, 4),
    eq=st.sampled_from(["bij,bjk->bik", "bij,bkj->bik", "bij,bjk->bk", "bij,bjk", "bij,bjk->kib"]),
)
def test_einsum_two_operands_match_torch(n: int, i: int, j: int, k: int, eq: str) -> None:
    """Two-operand einsum contractions agree with torch in value and gradient."""
    right = (n, j, k) if "bjk" in eq else (n, k, j)
    assert_same(lambda L, a, b: L.einsum(eq, a, b), rand(n, i, j), rand(*right, seed=1), rtol=1e-4)
