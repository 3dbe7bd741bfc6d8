"""grad_clip's kernels: the torch adapter is torch's own clipping, the numpy adapter agrees.

On torch, ``total_norms`` + ``clip_with_norm_`` leave gradients bit for bit as
``torch.nn.utils.clip_grad_norm_`` does and ``clamp`` as ``clip_grad_value_``; on the same
values, the numpy adapter gives the same norms, coefficients and gradients to float32
tolerance.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import hookgrad
from hookgrad.engines import engine_named

torch = pytest.importorskip("torch")

NUMPY = engine_named("hookgrad")
TORCH = engine_named("torch")
NORM_TYPES = [2.0, 1.0, math.inf, 0.5, 3.0]
TORCH_DTYPES = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64}

FINITE = st.floats(-1e3, 1e3, width=32)
ANY_FLOAT = st.one_of(FINITE, st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 1e30]))
GRADS = st.lists(arrays(np.float32, st.integers(0, 6), elements=FINITE), min_size=1, max_size=4)


def pair(values: list[np.ndarray | None]) -> tuple[list[Any], list[Any]]:
    """The same values as hookgrad and as torch tensors (None kept)."""
    h = [None if v is None else hookgrad.tensor(v.copy()) for v in values]
    t = [None if v is None else torch.tensor(v.copy()) for v in values]
    return h, t


def values_of(tensors: list[Any]) -> list[np.ndarray | None]:
    return [None if t is None else np.asarray(t.detach().numpy()) for t in tensors]


def assert_same_values(h: list[Any], t: list[Any], rtol: float = 1e-6) -> None:
    for a, b in zip(values_of(h), values_of(t)):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-30)


# ---------------------------------------------------------------------- total_norms
@settings(max_examples=40, deadline=None)
@given(GRADS, st.sampled_from(NORM_TYPES))
def test_total_norms_agree_and_equal_torchs_get_total_norm(grads, norm_type):
    """Each engine's norm of every order equals get_total_norm's (torch: exactly); the max
    norm of an empty tensor is an error on both, as in torch."""
    h, t = pair(grads)
    if norm_type == math.inf and any(g.size == 0 for g in grads):
        for engine, tensors in ((TORCH, t), (NUMPY, h)):
            with pytest.raises(RuntimeError, match="cannot compute the inf"):
                engine.total_norms([tensors], (norm_type,))
        return
    [mine] = TORCH.total_norms([t], (norm_type, 2.0))
    assert mine == (
        torch.nn.utils.get_total_norm(t, norm_type).item(),
        torch.nn.utils.get_total_norm(t, 2.0).item(),
    )
    [theirs] = NUMPY.total_norms([h], (norm_type, 2.0))
    assert theirs == pytest.approx(mine, rel=2e-6, abs=1e-30)


def test_total_norms_of_groups_skip_none_and_empty_groups_are_zero():
    """Per group, in one call: None entries skipped; a group of none is 0.0."""
    a, b = np.array([3.0, 4.0], np.float32), np.array([[1.0, -2.0], [2.0, 0.0]], np.float32)
    for engine, (h, t) in ((NUMPY, pair([a, None, b])), (TORCH, pair([a, None, b]))):
        tensors = h if engine is NUMPY else t
        norms = engine.total_norms([tensors, [None], [], tensors[2:]], (2.0, math.inf))
        assert norms == [(pytest.approx(math.sqrt(34)), 4.0), (0.0, 0.0), (0.0, 0.0), (3.0, 2.0)]
    assert TORCH.total_norms([], (2.0,)) == NUMPY.total_norms([], (2.0,)) == []


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_total_norms_in_other_dtypes(dtype):
    """float16 and float64 gradients: the norm in their dtype, as torch computes it."""
    grads = [np.array([0.5, -3.0, 2.25], dtype), np.array([[7.0], [1.5]], dtype)]
    h, _ = pair(grads)
    t = [torch.tensor(g) for g in grads]
    expected = [torch.nn.utils.get_total_norm(t, p).item() for p in (2.0, math.inf)]
    assert TORCH.total_norms([t], (2.0, math.inf)) == [tuple(expected)]
    assert NUMPY.total_norms([h], (2.0, math.inf))[0] == pytest.approx(expected, rel=1e-3)


def test_nan_and_inf_entries_make_the_norms_nonfinite_alike():
    """A NaN entry gives nan, an inf entry inf (nan where torch's pow makes it so), alike."""
    for bad in (math.nan, math.inf):
        grads = [np.array([1.0, bad], np.float32), np.ones(3, np.float32)]
        h, t = pair(grads)
        mine, theirs = TORCH.total_norms([t], NORM_TYPES), NUMPY.total_norms([h], NORM_TYPES)
        expected = tuple(torch.nn.utils.get_total_norm(t, p).item() for p in NORM_TYPES)
        np.testing.assert_array_equal(mine[0], expected)
        np.testing.assert_array_equal(theirs[0], expected)


@pytest.mark.parametrize("engine_name", ["hookgrad", "torch"])
@pytest.mark.parametrize("norm_type", [2.0, math.inf])
def test_error_if_nonfinite_raises_torchs_error(engine_name, norm_type):
    """A nan first-order norm of any group raises torch's RuntimeError, text and all."""
    grads = [np.array([1.0, math.nan], np.float32)]
    h, t = pair(grads)
    with pytest.raises(RuntimeError) as expected:
        torch.nn.utils.get_total_norm(t, norm_type, error_if_nonfinite=True)
    engine = engine_named(engine_name)
    tensors = h if engine_name == "hookgrad" else t
    fine = [hookgrad.ones(2) if engine_name == "hookgrad" else torch.ones(2)]
    with pytest.raises(RuntimeError) as got:
        engine.total_norms([fine, tensors], (norm_type, 2.0), error_if_nonfinite=True)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("engine_name", ["hookgrad", "torch"])
def test_error_if_nonfinite_checks_the_first_order_only(engine_name):
    """1e30 entries: the float32 2-norm overflows to inf, the max norm does not: no error."""
    h, t = pair([np.full(4, 1e30, np.float32)])
    engine = engine_named(engine_name)
    tensors = h if engine_name == "hookgrad" else t
    with np.errstate(over="ignore"):
        [(max_norm, two)] = engine.total_norms([tensors], (math.inf, 2.0), True)
    assert (max_norm, two) == (pytest.approx(1e30), math.inf)
    with pytest.raises(RuntimeError, match=r"total norm of order 2\.0"):
        engine.total_norms([tensors], (2.0, math.inf), True)


# ---------------------------------------------------------------------- clip_with_norm_
def _torch_clipped(values: list[np.ndarray], max_norm: float, dtype: Any) -> list[Any]:
    grads = [torch.tensor(v).to(dtype) for v in values]
    params = [torch.zeros_like(g, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    return [p.grad for p in params]


@settings(max_examples=60, deadline=None)
@given(
    GRADS,
    st.floats(1e-3, 1e3),
    st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]),
)
def test_total_norms_then_clip_with_norm_is_clip_grad_norm_bit_for_bit(grads, max_norm, dtype):
    """Any grads, max_norm and dtype: the gradients torch.equal clip_grad_norm_'s, and the
    coefficient is the one torch computes from the norm."""
    expected = _torch_clipped(grads, max_norm, dtype)
    t = [torch.tensor(v).to(dtype) for v in grads]
    [(total,)] = TORCH.total_norms([t], (2.0,))
    coefficient = TORCH.clip_with_norm_(t, max_norm, total)
    assert all(torch.equal(a, b) for a, b in zip(t, expected))
    as_torch = torch.clamp(max_norm / (torch.tensor(total, dtype=dtype) + 1e-6), max=1.0)
    assert coefficient == as_torch.item()


@settings(max_examples=40, deadline=None)
@given(GRADS, st.floats(1e-3, 1e3))
def test_clip_with_norm_agrees_across_engines(grads, max_norm):
    """The same coefficient and gradients on both engines (float32)."""
    h, t = pair(grads)
    [(total,)] = NUMPY.total_norms([h], (2.0,))
    mine = TORCH.clip_with_norm_(t, max_norm, total)
    theirs = NUMPY.clip_with_norm_(h, max_norm, total)
    assert mine == pytest.approx(theirs, rel=1e-6)
    assert_same_values(h, t)


@pytest.mark.parametrize("total", [math.nan, math.inf, 0.0])
def test_clip_with_a_nonfinite_or_zero_norm_does_what_torch_does(total):
    """nan total: nan grads; inf total: zero grads (inf entries nan); zero total: unchanged."""
    values = [np.array([1.0, -2.0, math.inf], np.float32)]
    h, t = pair(values)
    expected = torch.tensor(values[0])
    torch.nn.utils.clip_grads_with_norm_([_with_grad(expected)], 1.0, torch.tensor(total))
    for engine, tensors in ((TORCH, t), (NUMPY, h)):
        with np.errstate(invalid="ignore"):
            engine.clip_with_norm_([*tensors, None], 1.0, total)
        np.testing.assert_array_equal(values_of(tensors)[0], expected.numpy())


def _with_grad(grad: Any) -> Any:
    """A parameter whose .grad is ``grad`` itself (clip_grads_with_norm_ works on params)."""
    p = torch.zeros_like(grad, requires_grad=True)
    p.grad = grad
    return p


@pytest.mark.parametrize("engine_name", ["hookgrad", "torch"])
def test_a_coefficient_of_one_leaves_versions_alone(engine_name):
    """Under the limit nothing is multiplied: values and version counters stay."""
    lib = hookgrad if engine_name == "hookgrad" else torch
    grad = lib.tensor([0.3, 0.4])
    before = grad._version
    assert engine_named(engine_name).clip_with_norm_([grad], 1.0, 0.5) == 1.0
    assert grad._version == before
    assert engine_named(engine_name).clip_with_norm_([grad], 0.1, 0.5) < 1.0
    assert grad._version > before
    assert engine_named(engine_name).clip_with_norm_([], 1.0, 0.0) == 1.0


# ---------------------------------------------------------------------- clamp
@settings(max_examples=40, deadline=None)
@given(
    st.lists(arrays(np.float32, st.integers(0, 6), elements=ANY_FLOAT), min_size=1, max_size=3),
    st.floats(0.1, 10.0),
)
def test_clamp_in_place_is_clip_grad_value_and_agrees(grads, limit):
    """In place: grads equal clip_grad_value_'s; both engines report the same norms/finding."""
    h, t = pair(grads)
    expected = [torch.tensor(g) for g in grads]
    torch.nn.utils.clip_grad_value_([_with_grad(g) for g in expected], limit)
    mine = TORCH.clamp([*t, None], limit, in_place=True)
    theirs = NUMPY.clamp([*h, None], limit, in_place=True)
    assert all(torch.equal(a, b) or _same_nan(a, b) for a, b in zip(t, expected))
    assert_same_values(h, t)
    outside = any(bool(np.any(np.abs(g[~np.isnan(g)]) > limit)) for g in grads)
    assert (mine.tensors is not None) == (theirs.tensors is not None) == outside
    np.testing.assert_allclose(
        [mine.pre_norm, mine.post_norm], [theirs.pre_norm, theirs.post_norm], rtol=2e-6
    )
    if outside:
        assert mine.tensors[-1] is None and mine.tensors[0] is t[0]


def _same_nan(a: Any, b: Any) -> bool:
    return bool(torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)))


@pytest.mark.parametrize("engine_name", ["hookgrad", "torch"])
def test_clamp_out_of_place_keeps_inputs_and_nans(engine_name):
    """New tensors clamped (NaN stays NaN, None stays None); the inputs are untouched."""
    lib = hookgrad if engine_name == "hookgrad" else torch
    big = lib.tensor([[math.nan, 3.0, -0.5]])
    clamped = engine_named(engine_name).clamp((None, big), 1.0, in_place=False)
    assert clamped.tensors is not None and clamped.tensors[0] is None
    np.testing.assert_array_equal(clamped.tensors[1].numpy(), [[math.nan, 1.0, -0.5]])
    np.testing.assert_array_equal(big.numpy(), [[math.nan, 3.0, -0.5]])
    assert math.isnan(clamped.pre_norm) and math.isnan(clamped.post_norm)
    within = engine_named(engine_name).clamp(
        (lib.tensor([0.5, math.nan, -1.0]),), 1.0, in_place=False
    )
    assert within.tensors is None
    empty = engine_named(engine_name).clamp((None,), 1.0, in_place=True)
    assert empty == (None, 0.0, 0.0)


def test_clamp_of_non_contiguous_tensors_agrees():
    """A transposed view is clamped in place through the view on both engines."""
    values = np.arange(-6.0, 6.0, dtype=np.float32).reshape(3, 4)
    h, t = hookgrad.tensor(values.copy()), torch.tensor(values.copy())
    hv, tv = h.t(), t.t()
    NUMPY.clamp([hv], 2.5, in_place=True)
    TORCH.clamp([tv], 2.5, in_place=True)
    np.testing.assert_array_equal(h.numpy(), np.clip(values, -2.5, 2.5))
    np.testing.assert_array_equal(t.numpy(), np.clip(values, -2.5, 2.5))


# ---------------------------------------------------------------------- agc_clip_
SHAPES = [(4, 3), (4,), (2, 2, 2), (), (0, 3)]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from([0.01, 0.1, 1.0]))
def test_agc_agrees_across_engines(seed, clipping):
    """Rows, slices, vectors, scalars and empty tensors: the same grads and norms."""
    rng = np.random.default_rng(seed)
    weights = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [(rng.standard_normal(s) * rng.choice([0.001, 0.1])).astype(np.float32) for s in SHAPES]
    hw, tw = pair(weights)
    hg, tg = pair([*grads, None])
    mine = TORCH.agc_clip_([*tw, tw[0]], tg, clipping, 1e-3)
    theirs = NUMPY.agc_clip_([*hw, hw[0]], hg, clipping, 1e-3)
    assert mine[2] == theirs[2]
    assert mine[:2] == pytest.approx(theirs[:2], rel=1e-5)
    assert_same_values(hg, tg, rtol=1e-5)


@pytest.mark.parametrize("engine_name", ["hookgrad", "torch"])
def test_agc_eps_floors_the_weight_norm_and_no_grads_is_nothing(engine_name):
    """A zero weight allows a gradient norm of clipping * eps; no gradient: (0, 0, False)."""
    lib = hookgrad if engine_name == "hookgrad" else torch
    engine = engine_named(engine_name)
    grad = lib.tensor([3.0, 4.0])
    pre, post, clipped = engine.agc_clip_([lib.zeros(2)], [grad], 0.1, 0.01)
    assert (pre, clipped) == (5.0, True) and post == pytest.approx(1e-3, rel=1e-6)
    np.testing.assert_allclose(grad.numpy(), [6e-4, 8e-4], rtol=1e-6)
    assert engine.agc_clip_([lib.zeros(2)], [None], 0.1, 0.01) == (0.0, 0.0, False)


# ---------------------------------------------------------------------- devices
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here"),
    ),
]
CUDA_ONLY = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


def _device_grads(device: str) -> list[Any]:
    torch.manual_seed(0)
    return [torch.randn(64, 32, device=device) * 3, torch.randn(32, device=device), None]


@pytest.mark.parametrize("device", DEVICES)
def test_kernels_on_a_device_equal_clip_grad_norm_and_the_cpu(device):
    """On the device: clip_grad_norm_'s gradients; norms, clamp and AGC as on the CPU."""
    grads, reference = _device_grads(device), _device_grads(device)
    [(total, two)] = TORCH.total_norms([grads], (math.inf, 2.0))
    TORCH.clip_with_norm_(grads, 1.0, total)
    torch.nn.utils.clip_grad_norm_([_with_grad(g) for g in reference[:2]], 1.0, math.inf)
    for mine, theirs in zip(grads[:2], reference[:2]):
        torch.testing.assert_close(mine, theirs, rtol=1e-6, atol=0.0)
    on_cpu = [None if g is None else g.cpu() for g in _device_grads(device)]
    assert two == pytest.approx(TORCH.total_norms([on_cpu], (2.0,))[0][0], rel=1e-6)
    clamped = TORCH.clamp(_device_grads(device), 0.5, in_place=False)
    assert clamped[1:] == pytest.approx(TORCH.clamp(on_cpu, 0.5, in_place=False)[1:], rel=1e-6)
    weights = [torch.ones_like(g) for g in on_cpu[:2]]
    assert TORCH.agc_clip_(
        [w.to(device) for w in weights], _device_grads(device), 0.01, 1e-3
    ) == pytest.approx(TORCH.agc_clip_(weights, on_cpu, 0.01, 1e-3), rel=1e-5)


@CUDA_ONLY
def test_each_kernel_syncs_at_most_once_on_cuda():
    """torch's sync debug mode sees one host sync per kernel call, none for clip_with_norm_."""
    grads = _device_grads("cuda")
    weights = [torch.ones_like(g) for g in grads[:2]]
    calls = {
        "total_norms": lambda: TORCH.total_norms([grads, grads[:1]], (2.0, math.inf)),
        "clip_with_norm_": lambda: TORCH.clip_with_norm_(grads, 1.0, 5.0),
        "clamp": lambda: TORCH.clamp(grads, 0.5, in_place=True),
        "agc_clip_": lambda: TORCH.agc_clip_(weights, grads, 0.01, 1e-3),
    }
    expected = {"total_norms": 1, "clip_with_norm_": 0, "clamp": 1, "agc_clip_": 1}
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        for name, call in calls.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                call()
            syncs = [w for w in caught if "synchroniz" in str(w.message)]
            assert len(syncs) == expected[name], name
    finally:
        torch.cuda.set_sync_debug_mode("default")
