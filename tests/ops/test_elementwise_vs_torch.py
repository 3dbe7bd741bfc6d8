"""Differential tests for the elementwise math and composite shape ops the external real
programs needed (``floor``, ``log1p``, ``erf``, ``atan2``, ``logical_and``, ``repeat``,
``roll``, ``outer``, ...): values, dtypes and gradients as torch 2.13's, for the function,
the method and the in-place form, over hypothesis shapes and values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad

from .test_vs_torch import assert_same

torch = pytest.importorskip("torch")

FAST = settings(max_examples=25, deadline=None)

# name -> the interval its input is drawn from (inside the function's domain, away from poles)
UNARY: dict[str, tuple[float, float]] = {
    "floor": (-5, 5), "ceil": (-5, 5), "round": (-5, 5), "trunc": (-5, 5), "fix": (-5, 5),
    "frac": (-5, 5), "log1p": (-0.9, 5), "expm1": (-3, 3), "exp2": (-3, 3),
    "rsqrt": (0.2, 5), "square": (-3, 3), "erf": (-3, 3), "erfc": (-3, 3),
    "erfinv": (-0.95, 0.95), "tan": (-1.3, 1.3), "asin": (-0.95, 0.95),
    "acos": (-0.95, 0.95), "atan": (-5, 5), "sinh": (-3, 3), "cosh": (-3, 3),
    "asinh": (-5, 5), "acosh": (1.1, 5), "atanh": (-0.9, 0.9), "sinc": (-3, 3),
    "arcsin": (-0.95, 0.95), "arccos": (-0.95, 0.95), "arctan": (-5, 5),
    "arcsinh": (-5, 5), "arccosh": (1.1, 5), "arctanh": (-0.9, 0.9), "reciprocal": (0.3, 3),
}  # fmt: skip

NO_INPLACE_GRAD_IN_TORCH = {"asinh", "acosh", "atanh", "arcsinh", "arccosh", "arctanh"}
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


def _array(data: st.DataObject, shape: tuple[int, ...], lo: float, hi: float) -> np.ndarray:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


@FAST
@given(st.sampled_from(sorted(UNARY)), shapes, st.data())
def test_unary_ops_match_torch(name: str, shape: tuple[int, ...], data: st.DataObject) -> None:
    """``torch.X(x)`` and ``x.X()``: torch's values and input gradients."""
    x = _array(data, shape, *UNARY[name])
    assert_same(lambda L, t: (getattr(L, name)(t), getattr(t, name)()), x, rtol=2e-5, atol=2e-6)


@FAST
@given(st.sampled_from(sorted(set(UNARY) - NO_INPLACE_GRAD_IN_TORCH)), st.data())
def test_unary_inplace_forms_match_torch(name: str, data: st.DataObject) -> None:
    """``x.X_()`` on a non-leaf: torch's values and the gradient through the in-place op
    (torch has no derivative for the in-place inverse hyperbolic functions)."""
    x = _array(data, (2, 3), *UNARY[name])
    assert_same(lambda L, t: getattr(t * 1, name + "_")(), x, rtol=2e-5, atol=2e-6)


def test_double_backward_of_the_table_ops_matches_torch() -> None:
    """create_graph through log1p, erf, tan, atan2: torch's second derivatives."""

    def second(lib: Any) -> list[list[float]]:
        x = lib.tensor([0.3, -0.7, 1.1], requires_grad=True)
        y = lib.tensor([0.5, 2.0, -1.5], requires_grad=True)
        out = (x.log1p() * x.erf() + x.tan() + lib.atan2(x, y)).sum()
        (gx,) = lib.autograd.grad(out, x, create_graph=True)
        gxx, gxy = lib.autograd.grad(gx.sum(), [x, y])
        return [gx.tolist(), gxx.tolist(), gxy.tolist()]

    np.testing.assert_allclose(second(hookgrad), second(torch), rtol=2e-5, atol=1e-6)


def test_rounding_of_integers_and_halves_is_torchs() -> None:
    """Integers stay integers (a copy); round is half-to-even and takes ``decimals``."""
    for fn in (
        lambda L: L.floor(L.tensor([1, -2])),
        lambda L: L.round(L.tensor([0.5, 1.5, 2.5, -0.5, -1.5])),
        lambda L: L.round(L.tensor([1.2345, -2.5551, 1234.5]), decimals=2),
        lambda L: L.round(L.tensor([1234.5, 1250.0]), decimals=-2),
        lambda L: L.log1p(L.tensor([0, 1, 3])),
    ):
        ours, theirs = fn(hookgrad), fn(torch)
        assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


BINARY = ["atan2", "arctan2", "logaddexp", "hypot", "fmod"]
pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3)


@FAST
@given(st.sampled_from(BINARY), pairs, st.data())
def test_binary_ops_broadcast_and_match_torch(name: str, shapes: Any, data: st.DataObject) -> None:
    """Broadcast operands: torch's values and both gradients (summed back to each shape)."""
    a = _array(data, shapes.input_shapes[0], -3, 3)
    sign = np.where(_array(data, shapes.input_shapes[1], -1, 1) < 0, -1, 1)
    b = np.asarray(_array(data, shapes.input_shapes[1], 0.5, 3) * sign, dtype=np.float32)
    assert_same(
        lambda L, x, y: (getattr(L, name)(x, y), getattr(x, name)(y)), a, b, rtol=2e-5, atol=2e-6
    )


@FAST
@given(pairs, st.data())
def test_logical_ops_and_isclose_match_torch(shapes: Any, data: st.DataObject) -> None:
    """logical_and/or/xor/not and isclose give torch's bool tensors."""
    a = np.round(_array(data, shapes.input_shapes[0], -1, 1))
    b = np.round(_array(data, shapes.input_shapes[1], -1, 1))
    for lib in (hookgrad, torch):
        x, y = lib.tensor(a), lib.tensor(b)
        got = [
            lib.logical_and(x, y), x.logical_or(y), lib.logical_xor(x, y), lib.logical_not(x),
            lib.isclose(x, y), x.isclose(y + 1e-9),
        ]  # fmt: skip
        if lib is hookgrad:
            ours = [g.numpy() for g in got]
        else:
            for o, t in zip(ours, got, strict=True):
                assert o.dtype == np.bool_
                np.testing.assert_array_equal(o, t.numpy())


COMPOSITE = {
    "repeat": lambda L, x: x.repeat(2, 1, 3),
    "repeat_list": lambda L, x: x.repeat([1, 2]),
    "tile": lambda L, x: (L.tile(x, (2,)), x.tile((3, 1, 2))),
    "roll": lambda L, x: (L.roll(x, 1, 0), x.roll(-2), x.roll((1, -1), (0, 1))),
    "outer": lambda L, x: (L.outer(x[0], x[1]), x[0].ger(x[1])),
    "movedim": lambda L, x: (L.movedim(x.unsqueeze(0), 0, 2), x.moveaxis(-1, 0)),
    "swapaxes": lambda L, x: (L.swapaxes(x, 0, 1), x.swapdims(1, 0)),
    "unflatten": lambda L, x: (x.unflatten(1, (3, 1)), L.unflatten(x, -1, (-1, 1))),
    "masked_select": lambda L, x: (L.masked_select(x, x > 0), x.masked_select(x[0] < 0.5)),
}


@pytest.mark.parametrize("name", sorted(COMPOSITE))
@given(st.data())
@FAST
def test_composite_shape_ops_match_torch(name: str, data: st.DataObject) -> None:
    """repeat, tile, roll, outer, movedim, swapaxes, unflatten and masked_select: torch's
    values and gradients."""
    assert_same(COMPOSITE[name], _array(data, (2, 3), -1, 1))


def test_composite_misuse_is_torchs_error() -> None:
    """Too few repeat dims, shifts and dims of different lengths, and sizes that do not
    multiply up are torch's RuntimeErrors with torch's text."""
    for fn in (
        lambda L: L.ones(2, 3).repeat(2),
        lambda L: L.ones(2, 3).roll((1, 2), 0),
        lambda L: L.ones(2, 6).unflatten(1, (4, 2)),
    ):
        with pytest.raises(RuntimeError) as expected:
            fn(torch)
        with pytest.raises(RuntimeError) as got:
            fn(hookgrad)
        assert str(got.value) == str(expected.value)


@FAST
@given(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3), st.data())
def test_broadcast_functions_match_torch(shapes: Any, data: st.DataObject) -> None:
    """broadcast_tensors (gradients summed back), broadcast_shapes and broadcast_to give
    torch's shapes and values; a tensor already of the shape comes back as itself."""
    arrays = [_array(data, s, -1, 1) for s in shapes.input_shapes]
    assert_same(lambda L, *ts: L.broadcast_tensors(*ts), *arrays)
    assert_same(
        lambda L, t: (L.broadcast_to(t, shapes.result_shape), t.broadcast_to(shapes.result_shape)),
        arrays[0],
    )
    for lib in (hookgrad, torch):
        assert lib.broadcast_shapes(*shapes.input_shapes) == shapes.result_shape
        t = lib.ones(shapes.result_shape)
        assert lib.broadcast_tensors(t, t)[0] is t


def test_broadcast_mismatch_is_torchs_error() -> None:
    """Shapes that do not broadcast: torch's RuntimeError and text."""
    for fn in (
        lambda L: L.broadcast_tensors(L.ones(2), L.ones(3)),
        lambda L: L.broadcast_shapes((2,), (3,)),
        lambda L: L.broadcast_tensors(L.ones(2, 1), L.ones(4, 3)),
    ):
        with pytest.raises(RuntimeError) as expected:
            fn(torch)
        with pytest.raises(RuntimeError) as got:
            fn(hookgrad)
        assert str(got.value) == str(expected.value)


def test_sinc_gradient_near_zero_is_torchs() -> None:
    """sinc's gradient where its two terms nearly cancel (small x) and at 0: torch's formula,
    op for op, so the same rounding (another arrangement was 2e-3 off near 0)."""
    x = np.array([0.0, 1e-20, -2e-4, 1e-3, 0.0123, -0.05, 0.3, 2.5], dtype=np.float32)

    def grads(lib: Any) -> list[float]:
        t = lib.tensor(x, requires_grad=True)
        t.sinc().sum().backward()
        return t.grad.tolist()

    np.testing.assert_allclose(grads(hookgrad), grads(torch), rtol=1e-6, atol=0)
