"""float16 and bfloat16 as torch has them: conversions, finfo/iinfo, the result dtypes of
arithmetic (type promotion), gradients through casts; and the autocasts that change nothing
(CPU autocast itself: tests/ops/test_autocast_vs_torch.py)."""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookgrad

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")

_NAMES = ["float16", "bfloat16", "float32", "float64", "int64", "int32", "uint8", "bool"]
_SHAPES = [(2,), ()]


def _make(lib: Any, name: str, shape: tuple[int, ...]) -> Any:
    return lib.ones(shape).to(getattr(lib, name))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_result_dtypes_of_tensor_pairs_match_torch(op: str) -> None:
    """Every pair of these dtypes, as tensors with dims or 0-dim, promotes as in torch
    (bfloat16 with float16 is float32; a 0-dim operand never widens its category)."""
    for a, b, sa, sb in itertools.product(_NAMES, _NAMES, _SHAPES, _SHAPES):
        if op == "sub" and "bool" in (a, b):
            continue  # torch refuses bool subtraction
        theirs = getattr(torch, op)(_make(torch, a, sa), _make(torch, b, sb)).dtype
        ours = getattr(hookgrad, op)(_make(hookgrad, a, sa), _make(hookgrad, b, sb)).dtype
        assert ours.name == str(theirs).removeprefix("torch."), (a, b, sa, sb)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(_NAMES), scalar=st.sampled_from([2.5, 3, True, 0.0, -1.5]))
def test_result_dtypes_with_python_numbers_match_torch(name: str, scalar: Any) -> None:
    """tensor * number keeps a float tensor's dtype (float16/bfloat16 too) as in torch."""
    theirs = (_make(torch, name, (2,)) * scalar).dtype
    ours = (_make(hookgrad, name, (2,)) * scalar).dtype
    assert ours.name == str(theirs).removeprefix("torch.")


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(-1e4, 1e4, width=32), min_size=1, max_size=20))
def test_half_and_bfloat16_round_as_torch(values: list[float]) -> None:
    """.half() and .bfloat16() round float32 values to torch's bits, and .float() is exact."""
    ours, theirs = hookgrad.tensor(values), torch.tensor(values)
    np.testing.assert_array_equal(ours.half().float().numpy(), theirs.half().float().numpy())
    np.testing.assert_array_equal(
        ours.bfloat16().float().numpy(), theirs.bfloat16().float().numpy()
    )
    assert ours.to(hookgrad.bfloat16).dtype == hookgrad.bfloat16
    assert ours.bfloat16().is_floating_point() and ours.half().is_floating_point()


def test_narrowing_casts_overflow_silently_as_in_torch() -> None:
    """Casting values out of range (to float16, float32 or int64) gives torch's inf or wrapped
    values and no numpy RuntimeWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for lib in (hookgrad, torch):
            assert lib.tensor([1e6, -1e6]).half().tolist() == [float("inf"), -float("inf")]
            big = lib.tensor([1e39], dtype=lib.float64)
            assert big.float().tolist() == [float("inf")]
            assert lib.tensor([float("nan")]).long().dtype == lib.int64


def test_elementwise_bfloat16_matches_torch_to_bf16_precision() -> None:
    """Elementwise ops on bfloat16 give bfloat16 results within bf16 rounding of torch's."""
    x = np.linspace(-2, 2, 11, dtype=np.float32)
    ours, theirs = hookgrad.tensor(x).bfloat16(), torch.tensor(x).bfloat16()
    for fn in (lambda t: t * 3 + 1, lambda t: t.exp(), lambda t: t.tanh(), lambda t: t.mean()):
        a, b = fn(ours), fn(theirs)
        assert a.dtype == hookgrad.bfloat16 and b.dtype == torch.bfloat16
        np.testing.assert_allclose(a.float().numpy(), b.float().numpy(), rtol=1e-2, atol=1e-2)


def test_bfloat16_linear_and_matmul_match_torch() -> None:
    """linear and matmul of bfloat16 operands return bfloat16 (torch rounds the float32
    accumulation back) with torch's values, and the weight's gradient is bfloat16 too."""
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    w = np.linspace(-2, 1, 20, dtype=np.float32).reshape(5, 4)
    b = np.linspace(0, 1, 5, dtype=np.float32)
    results = []
    for lib in (hookgrad, torch):
        xs, ws, bs = (lib.tensor(a).bfloat16() for a in (x, w, b))
        ws.requires_grad_()
        y = lib.nn.functional.linear(xs, ws, bs)
        z = xs @ ws.t()
        (y.float().sum() + (z.float() * 0.5).sum()).backward()
        assert y.dtype == lib.bfloat16 and z.dtype == lib.bfloat16
        assert ws.grad.dtype == lib.bfloat16
        results.append([t.detach().float().numpy() for t in (y, z, ws.grad)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-2, atol=1e-2)


def test_gradient_through_a_bfloat16_cast_is_float32() -> None:
    """A float32 leaf cast to bfloat16 gets its gradient in float32, with torch's values."""
    x = np.array([0.3, -1.7, 2.2], dtype=np.float32)
    grads = []
    for lib in (hookgrad, torch):
        leaf = lib.tensor(x, requires_grad=True)
        y = leaf.to(lib.bfloat16)
        (y * y).sum().backward()
        assert str(leaf.grad.dtype).removeprefix("torch.") == "float32"
        grads.append(leaf.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_low_precision_leaves_get_gradients_in_their_dtype(name: str) -> None:
    """A bfloat16/float16 leaf can require grad and gets torch's gradient in its own dtype."""
    grads = []
    for lib in (hookgrad, torch):
        leaf = lib.tensor([0.5, -1.25, 2.0]).to(getattr(lib, name)).requires_grad_()
        (leaf * leaf * 2.5 + leaf.exp()).mean().backward()
        assert str(leaf.grad.dtype).removeprefix("torch.") == name
        grads.append(leaf.grad.float().numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-2)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(name: str) -> None:
    """finfo's fields and repr are torch's for each floating dtype; finfo() is float32's."""
    ours, theirs = hookgrad.finfo(getattr(hookgrad, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert repr(ours) == repr(theirs)
    assert repr(hookgrad.finfo()) == repr(torch.finfo())


@pytest.mark.parametrize("name", ["int64", "int32", "int16", "int8", "uint8"])
def test_iinfo_matches_torch(name: str) -> None:
    """iinfo's fields and repr are torch's for each integer dtype."""
    ours, theirs = hookgrad.iinfo(getattr(hookgrad, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.max, ours.min, ours.dtype) == (
        theirs.bits,
        theirs.max,
        theirs.min,
        theirs.dtype,
    )
    assert repr(ours) == repr(theirs)


def test_finfo_of_an_integer_dtype_fails_as_in_torch(fails_like_torch: Any) -> None:
    """finfo(int64) and iinfo(bool) raise torch's TypeError."""
    fails_like_torch(lambda L: L.finfo(L.int64))
    fails_like_torch(lambda L: L.iinfo(L.bool))


def test_disabled_autocast_runs_the_float32_program(lib: Any) -> None:
    """autocast(..., enabled=False), as context and decorator, changes nothing."""
    x = lib.ones(2, 2)

    @lib.autocast("cpu", enabled=False)
    def double(t: Any) -> Any:
        return t @ t

    with lib.amp.autocast("cpu", dtype=lib.bfloat16, enabled=False):
        assert (x @ x).dtype == lib.float32
    assert double(x).tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_cuda_autocast_disables_itself_with_torchs_warning(lib: Any) -> None:
    """A CUDA autocast on a machine without CUDA warns and computes in float32."""
    with pytest.warns(UserWarning, match="CUDA is not available or torch_xla is imported"):
        ctx = lib.autocast(device_type="cuda", dtype=lib.float16)
    with ctx:
        assert (lib.ones(2, 2) @ lib.ones(2, 2)).dtype == lib.float32


def test_unsupported_cpu_dtype_disables_autocast_with_torchs_warning(lib: Any) -> None:
    """CPU autocast to float64 warns that the dtype is unsupported and disables itself."""
    with pytest.warns(UserWarning, match="CPU Autocast only supports dtypes of torch.bfloat16"):
        ctx = lib.autocast("cpu", dtype=lib.float64)
    with ctx:
        assert (lib.ones(2) * 2).dtype == lib.float32


def test_autocast_device_type_must_be_a_string(fails_like_torch: Any) -> None:
    """autocast(3) raises torch's ValueError naming the type it got."""
    fails_like_torch(lambda L: L.autocast(3))
