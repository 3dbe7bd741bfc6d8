"""F.layer_norm / nn.LayerNorm on bfloat16 and float16 input against torch 2.13's CPU kernel:
computed in float32 and rounded once, parameters of the input's dtype or float32 ("mixed
dtype"), the saved statistics and the parameter gradients in the parameters' dtype."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")

import hookgrad  # noqa: E402

FAST = settings(max_examples=25, deadline=None)
_ULP = {"bfloat16": 2.0**-7, "float16": 2.0**-10}  # spacing of the values in [1, 2)


def _name(dtype: Any) -> str:
    return str(dtype).rsplit(".", 1)[-1]


def _run(lib: Any, arrays: dict[str, np.ndarray | None], dtype: str, pdtype: str) -> list[Any]:
    """Forward and backward of one layer norm: ``[out, x.grad, w.grad, b.grad]`` (those that
    exist), the float32 output gradient rounded to ``dtype`` as torch's autograd would."""
    x = lib.tensor(arrays["x"]).to(getattr(lib, dtype)).requires_grad_()
    params = [
        None
        if arrays[k] is None
        else lib.tensor(arrays[k]).to(getattr(lib, pdtype)).requires_grad_()
        for k in ("w", "b")
    ]
    out = lib.nn.functional.layer_norm(x, arrays["x"].shape[-1:], *params)
    out.backward(lib.tensor(arrays["g"]).to(getattr(lib, dtype)))
    return [out, x.grad] + [p.grad for p in params if p is not None]


def _assert_torch_bits(got: Any, expected: Any, dtype: str, what: str) -> None:
    """Same dtype; each element torch's bits or one unit in the last place of ``dtype`` away
    (torch sums its float32 moments in another order), and nearly all bits equal."""
    assert _name(got.dtype) == _name(expected.dtype), what
    mine, theirs = got.detach().float().numpy(), expected.detach().float().numpy()
    spacing = _ULP[dtype] * np.exp2(np.floor(np.log2(np.maximum(np.abs(theirs), 1e-30))))
    # values that cancel to near zero carry float32 noise of the tensor's scale, not their own
    noise = 2e-6 * float(np.abs(theirs).max())
    assert np.all(np.abs(mine - theirs) <= spacing + noise), what
    assert np.count_nonzero(mine != theirs) <= 1 + 0.05 * mine.size, what


def _assert_torch_gradient(got: Any, expected: Any, dtype: str, what: str) -> None:
    """Same dtype; within one unit in the last place of the gradient's largest element. (The
    backward uses the saved mean rounded to the parameters' dtype: where torch's float32 mean
    and hookgrad's round to neighbouring values, a row's gradient moves by that unit.)"""
    assert _name(got.dtype) == _name(expected.dtype), what
    mine, theirs = got.detach().float().numpy(), expected.detach().float().numpy()
    largest = float(np.abs(theirs).max())
    np.testing.assert_allclose(mine, theirs, rtol=0, atol=_ULP[dtype] * largest, err_msg=what)


@st.composite
def layer_norm_cases(draw: st.DrawFn) -> tuple[dict[str, np.ndarray | None], str, str]:
    rows = draw(st.lists(st.integers(1, 5), min_size=0, max_size=2))
    k = draw(st.integers(3, 70))  # with 2 values a row normalizes to +-1: its dx is all noise
    seed = draw(st.integers(0, 2**16))
    dtype = draw(st.sampled_from(["bfloat16", "float16"]))
    params = draw(st.sampled_from(["same", "float32", "weight only", "none"]))
    rng = np.random.default_rng(seed)
    shape = (*rows, k)
    x = rng.standard_normal(shape) * rng.uniform(0.1, 5) + rng.uniform(-2, 2)
    arrays: dict[str, np.ndarray | None] = {
        "x": x.astype(np.float32),
        "g": rng.standard_normal(shape).astype(np.float32),
        "w": None if params == "none" else rng.standard_normal(k).astype(np.float32),
        "b": rng.standard_normal(k).astype(np.float32) if params in ("same", "float32") else None,
    }
    return arrays, dtype, "float32" if params == "float32" else dtype


@FAST
@given(layer_norm_cases())
def test_layer_norm_in_reduced_precision_gives_torch_bits(case: Any) -> None:
    """bfloat16/float16 layer norm, with parameters of the input's dtype, float32 or none:
    torch's output bits but for rare last-bit differences, and torch's input/weight/bias
    gradients within a unit in the last place, in torch's dtypes."""
    arrays, dtype, pdtype = case
    got, expected = _run(hookgrad, arrays, dtype, pdtype), _run(torch, arrays, dtype, pdtype)
    _assert_torch_bits(got[0], expected[0], dtype, "output")
    for i, (g, e) in enumerate(zip(got[1:], expected[1:])):
        _assert_torch_gradient(g, e, dtype, f"gradient {i}")


def test_parameter_gradients_sum_rows_per_thread_as_torch() -> None:
    """With many rows the weight and bias gradients carry torch's per-thread bfloat16 partial
    sums: equal to torch's bits when both use the same thread count, not to an exact sum."""
    rng = np.random.default_rng(0)
    arrays: dict[str, np.ndarray | None] = {
        "x": rng.standard_normal((256, 24)).astype(np.float32),
        "g": rng.standard_normal((256, 24)).astype(np.float32),
        "w": rng.standard_normal(24).astype(np.float32),
        "b": rng.standard_normal(24).astype(np.float32),
    }
    assert hookgrad.get_num_threads() >= 1
    threads = torch.get_num_threads()
    hookgrad.set_num_threads(threads)
    got, expected = (
        _run(hookgrad, arrays, "bfloat16", "float32"),
        _run(torch, arrays, "bfloat16", "float32"),
    )
    for g, e in zip(got[2:], expected[2:]):
        assert g.dtype == hookgrad.float32
        np.testing.assert_array_equal(g.numpy(), e.numpy())
    exact = (arrays["g"].astype(np.float64)).sum(axis=0)
    assert not np.array_equal(got[3].numpy(), exact.astype(np.float32))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("pdtype", ["same", "float32"])
def test_saved_statistics_take_the_parameters_dtype(dtype: str, pdtype: str) -> None:
    """The mean and rstd kept for backward are of the parameters' dtype (torch's
    native_layer_norm results 1 and 2): the input's, or float32 for float32 parameters."""
    pd = dtype if pdtype == "same" else pdtype
    x = hookgrad.randn(3, 8).to(getattr(hookgrad, dtype)).requires_grad_()
    node = hookgrad.nn.functional.layer_norm(
        x, (8,), hookgrad.ones(8).to(getattr(hookgrad, pd))
    ).grad_fn
    t_out = torch.native_layer_norm(
        torch.randn(3, 8).to(getattr(torch, dtype)),
        (8,),
        torch.ones(8).to(getattr(torch, pd)),
        None,
        1e-5,
    )
    assert _name(t_out[1].dtype) == _name(t_out[2].dtype) == pd
    assert _name(node._saved_mean.dtype) == _name(node._saved_rstd.dtype) == pd


_DTYPE_MIXES = [
    ("bfloat16", "bfloat16", "float32"),
    ("bfloat16", "float32", "bfloat16"),
    ("bfloat16", "float16", None),
    ("float32", "bfloat16", None),
    ("float32", None, "bfloat16"),
    ("float32", "float64", None),
    ("float64", "float32", None),
    ("float64", "float64", "float32"),
    ("float16", "float16", "bfloat16"),
]


@pytest.mark.parametrize(("xd", "wd", "bd"), _DTYPE_MIXES)
def test_refused_dtype_mixes_fail_as_torch(
    fails_like_torch: Any, xd: str, wd: Any, bd: Any
) -> None:
    """Parameters neither of the input's dtype nor all float32 under a reduced input are
    refused with torch's RuntimeError and text."""

    def action(lib: Any) -> object:
        w = None if wd is None else lib.ones(4, dtype=getattr(lib, wd))
        b = None if bd is None else lib.zeros(4, dtype=getattr(lib, bd))
        return lib.nn.functional.layer_norm(lib.ones(2, 4, dtype=getattr(lib, xd)), (4,), w, b)

    fails_like_torch(action)


def test_bfloat16_layer_norm_module_matches_torch() -> None:
    """nn.LayerNorm(...).to(bfloat16) on bfloat16 input: torch's output and gradients."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6, 16)).astype(np.float32)
    results = []
    for lib in (hookgrad, torch):
        module = lib.nn.LayerNorm(16).to(lib.bfloat16)
        with lib.no_grad():
            module.weight.copy_(lib.tensor(np.linspace(0.5, 1.5, 16, dtype=np.float32)))
        xt = lib.tensor(x).to(lib.bfloat16).requires_grad_()
        out = module(xt)
        (out.float() ** 2).sum().backward()
        results.append([out, xt.grad, module.weight.grad, module.bias.grad])
    _assert_torch_bits(results[0][0], results[1][0], "bfloat16", "output")
    for i, (g, e) in enumerate(zip(results[0][1:], results[1][1:])):
        _assert_torch_gradient(g, e, "bfloat16", f"gradient {i}")


@pytest.mark.parametrize("value", [0, -2, 1.5, "2", True])
def test_set_num_threads_refuses_what_torch_refuses(fails_like_torch: Any, value: Any) -> None:
    """set_num_threads takes a positive int only, with torch's RuntimeError texts."""
    fails_like_torch(lambda lib: lib.set_num_threads(value))


def test_set_num_threads_is_read_back() -> None:
    """get_num_threads returns what set_num_threads set."""
    before = hookgrad.get_num_threads()
    hookgrad.set_num_threads(3)
    try:
        assert hookgrad.get_num_threads() == 3
    finally:
        hookgrad.set_num_threads(before)


def test_module_bfloat16_casts_floating_tensors_as_torch() -> None:
    """Module.bfloat16() and Module.to(bfloat16) cast floating parameters and buffers to
    bfloat16 and leave integer buffers, as torch's."""
    for cast in (lambda m: m.bfloat16(), lambda m: m.to(hookgrad.bfloat16)):
        module = cast(hookgrad.nn.BatchNorm1d(3))
        t_module = torch.nn.BatchNorm1d(3).bfloat16()
        got = {k: _name(v.dtype) for k, v in module.state_dict().items()}
        assert got == {k: _name(v.dtype) for k, v in t_module.state_dict().items()}
        assert got["weight"] == "bfloat16" and got["num_batches_tracked"] == "int64"
