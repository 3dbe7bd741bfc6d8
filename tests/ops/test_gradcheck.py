"""Numerical gradient checks: every differentiable op against central differences in float64.

Shapes come from hypothesis (0-d included, at most 3 dims of at most 3), values are drawn away
from the points where an op is not differentiable (kinks of abs/relu/clamp, ties of max).
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
from hookgrad._ops.unary import gelu
from hookgrad.autograd import gradcheck

FAST = settings(max_examples=15, deadline=None)

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)
nonscalar_shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3)
pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)


def values(shape: tuple[int, ...], lo: float = -2.0, hi: float = 2.0) -> st.SearchStrategy[Any]:
    elements = st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False)
    return hnp.arrays(np.float64, shape, elements=elements)


def away(a: np.ndarray, *points: float, margin: float = 0.1) -> np.ndarray:
    """Push values within ``margin`` of a kink to ``margin`` past it (gradcheck's eps is 1e-6)."""
    a = np.array(a, dtype=np.float64)
    for p in points:
        near = np.abs(a - p) < margin
        a[near] = p + margin * np.where(a[near] >= p, 1.0, -1.0)
    return a


@st.composite
def distinct(draw: st.DrawFn, shape_strategy: st.SearchStrategy[Any] = shapes) -> np.ndarray:
    """Values 0.3 apart in a random order: no ties, so max/min/maximum are differentiable."""
    shape = draw(shape_strategy)
    n = int(np.prod(shape))
    order = draw(st.permutations(list(range(n))))
    return (np.array(order, dtype=np.float64) * 0.3 - 0.4 * n / 2).reshape(shape)


@st.composite
def with_dim(draw: st.DrawFn, shape_strategy: st.SearchStrategy[Any] = nonscalar_shapes) -> Any:
    """An array, one of its dims (negative half the time) and a keepdim flag."""
    shape = draw(shape_strategy)
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    return draw(values(shape)), dim, draw(st.booleans())


def leaf(a: np.ndarray) -> hookgrad.Tensor:
    return hookgrad.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def check(fn: Callable[..., Any], *arrays: np.ndarray) -> None:
    assert gradcheck(fn, [leaf(a) for a in arrays])


BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "add_alpha": lambda a, b: hookgrad.add(a, b, alpha=-1.5),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@FAST
@given(data=st.data())
def test_binary_ops_broadcast(name: str, data: st.DataObject) -> None:
    """+ - * / ** and add(alpha=) match finite differences for every broadcastable shape pair."""
    (sa, sb), _ = data.draw(pairs)
    a = data.draw(values(sa, 0.5, 2.0) if name == "pow" else values(sa))
    b = data.draw(values(sb))
    if name == "div":
        b = away(b, 0.0, margin=0.5)
    check(BINARY[name], a, b)


SCALAR: dict[str, Callable[[Any], Any]] = {
    "t+s": lambda x: x + 1.5,
    "s+t": lambda x: 1.5 + x,
    "t-s": lambda x: x - 1.5,
    "s-t": lambda x: 1.5 - x,
    "t*s": lambda x: x * -2.5,
    "s*t": lambda x: -2.5 * x,
    "t/s": lambda x: x / 4.0,
    "s/t": lambda x: 3.0 / x,
    "t**2": lambda x: x**2,
    "t**3.5": lambda x: x**3.5,
    "t**-1": lambda x: x**-1,
    "t**0": lambda x: x**0,
    "s**t": lambda x: 2.5**x,
    "pow_method": lambda x: x.pow(3),
    "neg": lambda x: -x,
}


@pytest.mark.parametrize("name", sorted(SCALAR))
@FAST
@given(data=st.data())
def test_scalar_operand_ops(name: str, data: st.DataObject) -> None:
    """Tensor-with-Python-number arithmetic, the number on either side, differentiates right."""
    x = data.draw(shapes.flatmap(lambda s: values(s, 0.5, 2.0)))
    check(SCALAR[name], x)


UNARY: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray]]] = {
    "exp": (lambda x: x.exp(), lambda a: a),
    "log": (lambda x: x.log(), lambda a: np.abs(a) + 0.2),
    "sqrt": (lambda x: x.sqrt(), lambda a: np.abs(a) + 0.2),
    "abs": (lambda x: x.abs(), lambda a: away(a, 0.0)),
    "neg": (lambda x: x.neg(), lambda a: a),
    "sin": (lambda x: x.sin(), lambda a: a),
    "cos": (lambda x: x.cos(), lambda a: a),
    "tanh": (lambda x: x.tanh(), lambda a: a),
    "sigmoid": (lambda x: x.sigmoid(), lambda a: a),
    "relu": (lambda x: x.relu(), lambda a: away(a, 0.0)),
    "gelu": (lambda x: gelu(x), lambda a: a),
    "gelu_tanh": (lambda x: gelu(x, approximate="tanh"), lambda a: a),
    "clamp_min": (lambda x: x.clamp(min=-0.5), lambda a: away(a, -0.5)),
    "clamp_max": (lambda x: x.clamp(max=0.5), lambda a: away(a, 0.5)),
    "clamp_both": (lambda x: hookgrad.clamp(x, -0.5, 0.5), lambda a: away(a, -0.5, 0.5)),
    "softmax": (lambda x: x.softmax(-1), lambda a: a),
    "log_softmax": (lambda x: hookgrad.log_softmax(x, 0), lambda a: a),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@FAST
@given(x=shapes.flatmap(values))
def test_elementwise_ops(name: str, x: np.ndarray) -> None:
    """Each elementwise function (and softmax) matches finite differences away from its kinks."""
    fn, prepare = UNARY[name]
    check(fn, prepare(x))


@FAST
@given(data=st.data(), which=st.sampled_from(["min", "max", "both"]))
def test_clamp_tensor_bounds_get_gradients(data: st.DataObject, which: str) -> None:
    """clamp with Tensor bounds passes gradient to the input inside and to the active bound."""
    (sx, slo, shi), _ = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=2, max_side=3)
    )
    x = data.draw(values(sx))
    lo = data.draw(values(slo, -1.0, -0.2))
    hi = data.draw(values(shi, 0.2, 1.0))
    # keep x clear of every bound it is compared against
    x = np.broadcast_to(x, np.broadcast_shapes(sx, slo, shi)).copy()
    lo_b, hi_b = np.broadcast_to(lo, x.shape), np.broadcast_to(hi, x.shape)
    x = np.where(np.abs(x - lo_b) < 0.1, lo_b - 0.1, x)
    x = np.where(np.abs(x - hi_b) < 0.1, hi_b + 0.1, x)
    if which == "min":
        check(lambda t, lo_t: t.clamp(min=lo_t), x, lo)
    elif which == "max":
        check(lambda t, hi_t: t.clamp(max=hi_t), x, hi)
    else:
        check(lambda t, lo_t, hi_t: hookgrad.clamp(t, lo_t, hi_t), x, lo, hi)


@FAST
@given(data=st.data())
def test_where_maximum_minimum_broadcast(data: st.DataObject) -> None:
    """where/maximum/minimum route the gradient to the chosen operand, undoing broadcasting."""
    (sa, sb), _ = data.draw(pairs)
    a = data.draw(distinct(st.just(sa)))
    b = data.draw(distinct(st.just(sb))) + 0.15  # never equal to a value of a
    cond = a > 0
    check(lambda x, y: hookgrad.where(hookgrad.tensor(cond), x, y), a, b)
    check(lambda x, y: hookgrad.maximum(x, y), a, b)
    check(lambda x, y: y.minimum(x), a, b)


@st.composite
def matmul_operands(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Operands for every matmul form: 1-D on either side, 2-D, batched with broadcast batches."""
    n, k, m = (draw(st.integers(1, 3)) for _ in range(3))
    (ba, bb), _ = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
    a_shape = (k,) if draw(st.booleans()) and not ba else (*ba, n, k)
    b_shape = (k,) if draw(st.booleans()) and not bb else (*bb, k, m)
    return draw(values(a_shape)), draw(values(b_shape))


@FAST
@given(ops=matmul_operands())
def test_matmul_all_forms(ops: tuple[np.ndarray, np.ndarray]) -> None:
    """a @ b (dot, mv, vm, mm, batched with broadcasting) gives both operands exact gradients."""
    check(lambda a, b: a @ b, *ops)


REDUCTIONS: dict[str, Callable[[Any, int, bool], Any]] = {
    "sum": lambda x, d, k: x.sum(d, keepdim=k),
    "sum_tuple": lambda x, d, k: x.sum((0, d), keepdim=k) if d % x.ndim else x.sum(d, k),
    "mean": lambda x, d, k: hookgrad.mean(x, d, keepdim=k),
    "var": lambda x, d, k: x.var(d, keepdim=k),
    "var_biased": lambda x, d, k: x.var(d, unbiased=False, keepdim=k),
    "std": lambda x, d, k: x.std(d, keepdim=k),
    "std_correction0": lambda x, d, k: hookgrad.std(x, d, keepdim=k, correction=0),
    "prod": lambda x, d, k: x.prod(d, keepdim=k),
    "logsumexp": lambda x, d, k: x.logsumexp(d, keepdim=k),
    "norm2": lambda x, d, k: x.norm(dim=d, keepdim=k),
    "norm3": lambda x, d, k: x.norm(p=3, dim=d, keepdim=k),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@FAST
@given(case=with_dim())
def test_reductions_along_dim(name: str, case: tuple[np.ndarray, int, bool]) -> None:
    """Each reduction with a dim (negative too) and keepdim matches finite differences."""
    x, dim, keepdim = case
    if name in ("var", "std"):
        assume(x.shape[dim] > 1)  # Bessel's correction needs two elements
    if name.startswith(("var", "std")):
        x = x + np.linspace(0, 1, x.size).reshape(x.shape)  # std is not smooth at zero spread
        assume(bool(np.all(np.ptp(x, axis=dim) > 1e-3)))  # the shift can cancel the spread
    if name.startswith("norm"):
        x = away(x, 0.0)  # the norm is not smooth at the zero vector
    check(lambda t: REDUCTIONS[name](t, dim, keepdim), x)


FULL_REDUCTIONS: dict[str, Callable[[Any], Any]] = {
    "sum": lambda x: x.sum(),
    "mean": lambda x: x.mean(),
    "prod": lambda x: x.prod(),
    "norm": lambda x: x.norm(),
    "norm1": lambda x: x.norm(p=1),
    "norm3": lambda x: hookgrad.norm(x, 3),
    "logsumexp_all": lambda x: x.logsumexp(tuple(range(x.ndim))),
}


@pytest.mark.parametrize("name", sorted(FULL_REDUCTIONS))
@FAST
@given(x=shapes.flatmap(values))
def test_full_reductions(name: str, x: np.ndarray) -> None:
    """Reductions over all elements (0-d inputs included) match finite differences."""
    check(FULL_REDUCTIONS[name], away(x, 0.0))


@FAST
@given(x=shapes.flatmap(values).map(lambda a: away(a, 0.0, margin=0.3)))
def test_prod_with_a_zero(x: np.ndarray) -> None:
    """prod stays exact when an element is 0: that element gets the product of the others."""
    x = x.copy()
    x.reshape(-1)[0] = 0.0
    check(lambda t: t.prod(), x)
    if x.ndim:
        check(lambda t: t.prod(0), x)


EXTREMES: dict[str, Callable[[Any], Any]] = {
    "max": lambda x: x.max(),
    "min": lambda x: hookgrad.min(x),
    "amax": lambda x: x.amax(-1),
    "amin_keep": lambda x: x.amin(0, keepdim=True),
    "max_dim": lambda x: x.max(-1)[0],
    "min_dim_keep": lambda x: x.min(0, keepdim=True).values,
    "norm_inf": lambda x: x.norm(p=float("inf")),
    "norm_inf_dim": lambda x: x.norm(p=float("inf"), dim=0),
}


@pytest.mark.parametrize("name", sorted(EXTREMES))
@FAST
@given(x=distinct(nonscalar_shapes))
def test_extreme_value_reductions(name: str, x: np.ndarray) -> None:
    """max/min/amax/amin/inf-norm send the gradient to the (unique) extreme element."""
    check(EXTREMES[name], x + 0.07)  # +0.07: no element is 0 and no two have equal |x|


SHAPE_OPS: dict[str, Callable[[Any], Any]] = {
    "reshape": lambda x: x.reshape(-1, 1),
    "view": lambda x: x.view(x.numel()),
    "flatten": lambda x: hookgrad.flatten(x),
    "flatten_T": lambda x: x.T.flatten(),
    "squeeze": lambda x: x.unsqueeze(0).squeeze(),
    "unsqueeze": lambda x: x.unsqueeze(-1),
    "transpose": lambda x: x.transpose(0, -1),
    "permute": lambda x: x.permute(*reversed(range(x.ndim))),
    "T": lambda x: x.T,
    "mT": lambda x: x.unsqueeze(0).mT,
    "expand": lambda x: x.unsqueeze(0).expand(2, *x.shape),
    "expand_size1": lambda x: x.sum(-1, keepdim=True).expand(*x.shape[:-1], 3),
    "cat": lambda x: hookgrad.cat([x, x * 2], dim=-1),
    "stack": lambda x: hookgrad.stack([x, -x], dim=1),
    "split": lambda x: x.split(2, dim=-1),
    "split_sizes": lambda x: hookgrad.split(x, [1, x.shape[0] - 1] if x.shape[0] > 1 else [1]),
    "chunk": lambda x: x.chunk(2, 0),
    "unbind": lambda x: x.unbind(-1),
    "unbind_one_used": lambda x: x.unbind(0)[0],
    "clone": lambda x: x.clone(),
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
@FAST
@given(x=nonscalar_shapes.flatmap(values))
def test_shape_ops(name: str, x: np.ndarray) -> None:
    """Views, joins and splits move gradients back to the right elements (unused pieces get 0)."""
    check(SHAPE_OPS[name], x)


INDEXING: dict[str, Callable[[Any], Any]] = {
    "int": lambda x: x[0],
    "negative_int": lambda x: x[-1],
    "slice": lambda x: x[x.shape[0] // 2 :],
    "step_slice": lambda x: x[::2],
    "ellipsis_int": lambda x: x[..., 0],
    "none": lambda x: x[None, :, None],
    "repeated_indices": lambda x: x[hookgrad.tensor([0, 0, -1, 0])],
    "index_list": lambda x: x[[0, 0]],
    "mixed": lambda x: x[..., [0, 0]],
    "scalar_element": lambda x: x[(0,) * x.ndim],
}


@pytest.mark.parametrize("name", sorted(INDEXING))
@FAST
@given(x=nonscalar_shapes.flatmap(values))
def test_indexing(name: str, x: np.ndarray) -> None:
    """Basic, advanced (repeated indices add up) and boolean indexing route gradients back."""
    check(INDEXING[name], away(x, 0.0))


@FAST
@given(x=nonscalar_shapes.flatmap(values))
def test_boolean_mask_indexing(x: np.ndarray) -> None:
    """x[mask] gathers the True positions; only they receive gradient."""
    mask = x > 0
    mask.reshape(-1)[0] = True  # never empty
    check(lambda t: t[hookgrad.tensor(mask)], x)


@FAST
@given(x=nonscalar_shapes.flatmap(values), data=st.data())
def test_setitem_on_non_leaf_reaches_tensor_and_value(x: np.ndarray, data: st.DataObject) -> None:
    """``y[idx] = v`` on a non-leaf: overwritten entries get no gradient, ``v`` gets theirs."""
    v = data.draw(values(x.shape[1:]))

    def fn(t: Any, value: Any) -> Any:
        y = t * 1.5
        y[0] = value * 2
        return y

    check(fn, x, v)


@FAST
@given(x=nonscalar_shapes.flatmap(values))
def test_setitem_broadcast_value_and_mask(x: np.ndarray) -> None:
    """A scalar-shaped value broadcast over a mask collects the gradient of every slot it fills."""

    def fn(t: Any, value: Any) -> Any:
        y = t * 2  # not exp(): writing into a saved output must fail, see test_errors
        y[t > 0] = value
        return y

    check(fn, away(x, 0.0), np.array(0.7))


@FAST
@given(x=nonscalar_shapes.flatmap(values))
def test_masked_fill_and_gather(x: np.ndarray) -> None:
    """masked_fill blocks the filled entries; gather scatter-adds into repeated positions."""
    mask = hookgrad.tensor(x > 0)
    check(lambda t: t.masked_fill(mask, 3.0), x)
    check(lambda t, v: hookgrad.masked_fill(t, mask, v), x, np.array(0.25))
    index = hookgrad.tensor(np.zeros((*x.shape[:-1], 3), dtype=np.int64))
    check(lambda t: t.gather(-1, index), x)


def test_dtype_cast_roundtrip_gradient() -> None:
    """to(float32) and back passes the gradient through with the input's dtype."""
    x = leaf(np.array([0.5, -1.25, 2.0]))
    y = x.to(hookgrad.float32).double() * 3
    y.sum().backward()
    assert x.grad.dtype == hookgrad.float64
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


def test_gradcheck_accepts_an_empty_output() -> None:
    """An op whose output has no elements has an empty Jacobian, which trivially agrees."""
    assert gradcheck(lambda t: t[1:], [leaf(np.array([1.0]))])
