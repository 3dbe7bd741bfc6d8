"""The finiteness and loss-scaling kernels (nan_guard, grad_scale): both engines agree.

Each kernel runs on hookgrad tensors (numpy engine) and on torch tensors holding the same
values (torch engine); results, in-place effects and version-counter bumps must be the same,
and unscaled values equal bit for bit (torch's CPU kernel is the reference).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hookgrad

from .conftest import both_engines, gradient_batches

torch = pytest.importorskip("torch")

BOTH = both_engines(torch)
(NUMPY, _), (TORCH, _) = BOTH
BATCHES = gradient_batches(1e30, -1e30, 3.0e38)


def as_tensors(make: Callable[[np.ndarray], Any], batch: list[np.ndarray | None]) -> list[Any]:
    return [None if a is None else make(a) for a in batch]


def expected_first(batch: list[np.ndarray | None]) -> int | None:
    return next(
        (i for i, a in enumerate(batch) if a is not None and not np.isfinite(a).all()), None
    )


def values(t: Any) -> np.ndarray:
    return np.array(t.detach().numpy() if hasattr(t, "detach") else t)


# ---------------------------------------------------------------------- first_nonfinite
@given(BATCHES)
def test_first_nonfinite_agrees_with_isfinite(batch: list[np.ndarray | None]) -> None:
    """Both engines name the first tensor holding NaN/Inf; huge finite entries are finite."""
    for engine, make in BOTH:
        assert engine.first_nonfinite(as_tensors(make, batch)) == expected_first(batch), engine


LONG_BATCHES = (
    st.lists(BATCHES, min_size=2, max_size=5)
    .map(lambda batches: [a for batch in batches for a in batch])
    .filter(lambda batch: len(batch) >= 8)
)


@given(LONG_BATCHES)
def test_long_batches_screened_together_agree_with_isfinite(
    batch: list[np.ndarray | None],
) -> None:
    """A long batch (a backward's gradients, screened together on numpy first): the same first
    non-finite tensor on both engines; huge finite entries, whose joint sum of squares
    overflows, are still finite."""
    for engine, make in BOTH:
        assert engine.first_nonfinite(as_tensors(make, batch)) == expected_first(batch), engine


@pytest.mark.parametrize(
    ("sizes", "dtypes"),
    [
        ((64,) * 40, ("float32",)),  # one joint screen
        ((1 << 14,) * 40, ("float32", "float64")),  # several chunks, mixed dtypes
        ((1 << 15, 64, 3) * 4, ("float32", "float16", "int64")),  # arrays screened alone
    ],
)
def test_a_bad_entry_anywhere_in_a_long_batch_is_found(
    sizes: tuple[int, ...], dtypes: tuple[str, ...]
) -> None:
    """NaN or Inf in any one array of a long batch, whatever its size, dtype and place (and
    each array given twice, side by side, as a backward's gradients are): that array's first
    index on both engines; none when all are finite."""
    arrays = [np.ones(n, dtype=dtypes[i % len(dtypes)]) for i, n in enumerate(sizes)]
    floating = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    for bad in [None, floating[0], floating[len(floating) // 2], floating[-1]]:
        batch = [a.copy() for a in arrays]
        if bad is not None:
            batch[bad][-1] = np.inf if bad % 2 else np.nan
        expected = None if bad is None else 2 * bad
        for engine, make in BOTH:
            tensors = [make(a) for a in batch]
            if engine is NUMPY:  # the same array under two tensors
                tensors = [hookgrad.from_numpy(a) for a in batch]
            twice = [t for t in tensors for _ in (0, 1)]
            assert engine.first_nonfinite(twice) == expected, (engine, bad)


def test_numpy_joins_a_long_batch_about_a_mib_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy: 40 finite float32 arrays of 64 KiB are screened in 3 joint screens (each one dot
    product over at most about 1 MiB), not 40; a broadcast array is screened alone."""
    from hookgrad.engines.numpy import _kernels

    joined: list[int] = []  # bytes per joint screen
    alone: list[np.ndarray] = []
    real_joint, real_alone = _kernels._joint_finite, _kernels.all_finite
    monkeypatch.setattr(
        _kernels,
        "_joint_finite",
        lambda b: joined.append(sum(a.nbytes for a in b)) or real_joint(b),
    )
    monkeypatch.setattr(_kernels, "all_finite", lambda a: alone.append(a) or real_alone(a))
    batch = [hookgrad.from_numpy(np.ones(1 << 14, dtype=np.float32)) for _ in range(40)]
    broadcast = hookgrad.from_numpy(np.broadcast_to(np.float32(1.0), (4, 4)))
    assert NUMPY.first_nonfinite([*batch, broadcast]) is None
    assert joined == [1 << 20, 1 << 20, 1 << 19]
    assert [a.shape for a in alone] == [(4, 4)]


@pytest.mark.parametrize("bad", [None, 0, 5, 9])
def test_transposed_views_in_a_long_batch(bad: int | None) -> None:
    """Non-contiguous tensors (transposed views) among contiguous ones in a long batch: the
    one holding a NaN is found, at its index, on both engines."""
    arrays = [np.arange(12, dtype=np.float32).reshape(3, 4) + i for i in range(10)]
    if bad is not None:
        arrays[bad][1, 2] = np.nan
    for engine, make in BOTH:
        batch = [make(a).t() if i % 2 else make(a) for i, a in enumerate(arrays)]
        assert engine.first_nonfinite(batch) == bad, engine


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_one_bad_entry_of_any_float_dtype_and_layout(dtype: str, bad: float) -> None:
    """One NaN or Inf in float16/32/64, contiguous or transposed, is found by both."""
    array = np.ones((8, 16), dtype=dtype)
    array[5, 7] = bad
    for engine, make in BOTH:
        tensor = make(array)
        assert engine.first_nonfinite([make(np.ones(3, dtype=dtype)), tensor]) == 1
        assert engine.first_nonfinite([tensor.t()]) == 0  # non-contiguous


def test_huge_finite_values_are_finite_and_raise_no_warning() -> None:
    """Entries whose squares overflow (1e30 float32, 1e200 float64, 60000 float16) are finite,
    without a floating-point warning even under numpy's default error state."""
    huge = [
        np.full((4, 4), 1e30, dtype=np.float32),
        np.full(4, 1e200, dtype=np.float64),
        np.full(4, 60000.0, dtype=np.float16),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for engine, make in BOTH:
            assert engine.first_nonfinite([make(a) for a in huge]) is None


def test_overflowing_norms_are_confirmed_entry_by_entry() -> None:
    """Tensors whose screen overflows (huge entries) are finite unless an entry is not: the
    first truly non-finite one is named, past huge finite ones."""
    huge = np.full(8, 3e38, dtype=np.float32)
    huge_with_inf = huge.copy()
    huge_with_inf[3] = np.inf
    bad = np.array([np.nan], dtype=np.float64)
    for engine, make in BOTH:
        assert engine.first_nonfinite([make(huge), make(huge), make(bad)]) == 2
        assert engine.first_nonfinite([make(huge), make(huge_with_inf), make(bad)]) == 1


def test_non_tensors_integers_empty_batches_and_skip() -> None:
    """None, non-tensor values, integer/bool tensors and ``skip`` are passed over."""
    bad = np.array([1.0, np.nan], dtype=np.float32)
    for engine, make in BOTH:
        ints = make(np.array([1, 2]))
        assert engine.first_nonfinite([]) is None
        assert engine.first_nonfinite([None, 3, "x", ints, make(np.array([True]))]) is None
        assert engine.first_nonfinite([None, 3, make(bad)]) == 2
        skipped = make(bad)
        assert engine.first_nonfinite([skipped, None], skip=skipped) is None
        assert engine.first_nonfinite([skipped, make(bad)], skip=skipped) == 1


def test_numpy_skip_covers_every_tensor_sharing_the_array() -> None:
    """numpy: two tensors over one array are one check (the chain of grad_input/grad_output)."""
    array = np.array([np.inf], dtype=np.float32)
    first, second = hookgrad.from_numpy(array), hookgrad.from_numpy(array)
    assert NUMPY.first_nonfinite([second], skip=first) is None


def test_a_tensor_met_again_is_screened_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backward's gradients hold each one twice (one module's grad_input is the next one's
    grad_output): a repeated torch tensor, or numpy array under another tensor, is screened
    once; a bad entry is still found at its first position."""
    from hookgrad.engines.numpy import _kernels as numpy_kernels
    from hookgrad.engines.torch import _kernels as torch_kernels

    screened: list[int] = []
    real_all_finite, real_norms_finite = numpy_kernels.all_finite, torch_kernels._norms_finite
    monkeypatch.setattr(
        numpy_kernels, "all_finite", lambda a: screened.append(1) or real_all_finite(a)
    )
    monkeypatch.setattr(
        torch_kernels,
        "_norms_finite",
        lambda group: screened.extend([1] * len(group)) or real_norms_finite(group),
    )
    arrays = [np.full(3, v, dtype=np.float32) for v in (1.0, 2.0, 3.0)]
    batches = {
        NUMPY: lambda: [hookgrad.from_numpy(arrays[i]) for i in (0, 1, 1, 2, 2, 0)],
        TORCH: lambda: [t for t in map(torch.from_numpy, arrays) for _ in (0, 1)],
    }
    for engine, batch in batches.items():
        screened.clear()
        assert engine.first_nonfinite(batch()) is None
        assert len(screened) == 3, engine
    arrays[1][2] = np.inf
    for engine, batch in batches.items():
        assert engine.first_nonfinite(batch()) == (1 if engine is NUMPY else 2), engine


# ---------------------------------------------------------------------- nonfinite_counts
@given(BATCHES)
def test_nonfinite_counts_agree(batch: list[np.ndarray | None]) -> None:
    """(nan, inf) per tensor, (0, 0) for None, equal on both engines and to numpy's count."""
    expected = [
        (0, 0) if a is None else (int(np.isnan(a).sum()), int(np.isinf(a).sum())) for a in batch
    ]
    for engine, make in BOTH:
        assert engine.nonfinite_counts(as_tensors(make, batch)) == expected, engine


def test_nonfinite_counts_of_integer_and_half_tensors() -> None:
    """Integer tensors count (0, 0); float16 NaN and Inf are counted."""
    half = np.array([np.nan, np.inf, -np.inf, 1.0], dtype=np.float16)
    for engine, make in BOTH:
        assert engine.nonfinite_counts([make(np.arange(3)), make(half)]) == [(0, 0), (1, 2)]


# ---------------------------------------------------------------------- zero_nonfinite_
@given(BATCHES)
def test_zero_nonfinite_agrees(batch: list[np.ndarray | None]) -> None:
    """Both engines zero exactly the NaN/Inf entries in place and report how many."""
    expected = [None if a is None else np.where(np.isfinite(a), a, 0) for a in batch]
    count = sum(int((~np.isfinite(a)).sum()) for a in batch if a is not None)
    for engine, make in BOTH:
        tensors = as_tensors(make, batch)
        assert engine.zero_nonfinite_(tensors) == count
        for t, want in zip(tensors, expected):
            if t is not None:
                np.testing.assert_array_equal(values(t), want)


def test_zero_nonfinite_writes_only_the_tensors_holding_bad_entries() -> None:
    """A tensor with a bad entry is written by masked_fill_ (its version grows by one); a
    finite one is not touched (its version stays), on both engines."""
    for engine, make in BOTH:
        bad = make(np.array([1.0, np.nan, np.inf], dtype=np.float32))
        good = make(np.array([1.0, 2.0], dtype=np.float32))
        assert engine.zero_nonfinite_([bad, None, good]) == 2
        assert (bad._version, good._version) == (1, 0)
        np.testing.assert_array_equal(values(bad), [1.0, 0.0, 0.0])


# ---------------------------------------------------------------------- unscale_
@given(
    BATCHES,
    st.floats(min_value=1e-38, max_value=1e38, allow_subnormal=False).map(
        lambda x: float(np.float32(x))
    ),
)
def test_unscale_equals_torch_bit_for_bit(batch: list[np.ndarray | None], inv: float) -> None:
    """found_inf (checked before scaling) and every product agree bit for bit."""
    results = []
    for engine, make in BOTH:
        tensors = as_tensors(make, batch)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            found = engine.unscale_(tensors, inv)
        results.append((found, [None if t is None else values(t) for t in tensors]))
    (found_numpy, numpy_values), (found_torch, torch_values) = results
    assert found_numpy == found_torch == (expected_first(batch) is not None)
    for got, want in zip(numpy_values, torch_values):
        if want is not None:
            assert got.dtype == want.dtype
            assert got.tobytes() == want.tobytes()


def test_unscale_rounds_inv_scale_to_float32_and_checks_before_scaling() -> None:
    """inv_scale 1/3 is used as float32 (also on float64 tensors, as torch's kernel does); a
    finite 3e38 times 4 overflows to inf but is not an overflow: the check came first."""
    third = np.float64(np.float32(1 / 3))
    for engine, make in BOTH:
        grad = make(np.array([3.0, 1.0], dtype=np.float64))
        big = make(np.array([3e38], dtype=np.float32))
        with np.errstate(over="ignore"):
            assert engine.unscale_([grad, None], 1 / 3) is False
            assert engine.unscale_([big], 4.0) is False
        np.testing.assert_array_equal(values(grad), [3.0 * third, third])
        assert values(big)[0] == np.inf


def test_unscale_keeps_the_version_counter_and_skips_none() -> None:
    """Every tensor is multiplied in place with its version unchanged, as torch's kernel
    leaves it; None entries are skipped."""
    for engine, make in BOTH:
        grad = make(np.array([2.0, 4.0], dtype=np.float32))
        assert engine.unscale_([None, grad], 0.5) is False
        assert grad._version == 0
        np.testing.assert_array_equal(values(grad), [1.0, 2.0])
        assert engine.unscale_([], 0.5) is False


# ---------------------------------------------------------------------- facts
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int64", "bool"])
def test_dtype_names_agree(dtype: str) -> None:
    """Both engines name a dtype as numpy does, without an engine prefix."""
    for engine, make in BOTH:
        assert engine.dtype_name(make(np.zeros(2, dtype=dtype))) == dtype


def test_only_torch_has_a_loss_scaler_and_only_inside_its_step() -> None:
    """numpy: no loss scaler ever; torch: GradScaler named from inside its step only."""
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([param], lr=0.1)
    seen: list[str | None] = []
    handle = optimizer.register_step_pre_hook(lambda *_: seen.append(TORCH.running_loss_scaler()))
    scaler = torch.amp.GradScaler("cpu")
    try:
        scaler.scale((param * 2).sum()).backward()
        scaler.step(optimizer)
        optimizer.step()
    finally:
        handle.remove()
    assert seen == ["torch.amp.GradScaler", None]
    assert NUMPY.running_loss_scaler() is None


def test_torch_kernels_bring_results_to_the_host_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """On one device each torch kernel makes one host transfer (tolist or item) for the whole
    batch, however many tensors and dtypes; first_nonfinite a second one only to confirm a
    flagged tensor."""
    transfers: list[str] = []
    for name in ("tolist", "item", "cpu", "numpy"):
        real = getattr(torch.Tensor, name)
        monkeypatch.setattr(
            torch.Tensor,
            name,
            lambda self, *a, _real=real, _name=name, **k: (
                transfers.append(_name) or _real(self, *a, **k)
            ),
        )

    def batch() -> list[Any]:
        return [torch.ones(3), None, torch.ones(2, dtype=torch.float64), torch.ones(4, 4)]

    calls = {
        "first_nonfinite": lambda: TORCH.first_nonfinite(batch()),
        "nonfinite_counts": lambda: TORCH.nonfinite_counts(batch()),
        "zero_nonfinite_": lambda: TORCH.zero_nonfinite_(batch()),
        "unscale_": lambda: TORCH.unscale_(batch(), 0.5),
    }
    for name, call in calls.items():
        transfers.clear()
        call()
        assert len(transfers) == 1, (name, transfers)
    transfers.clear()
    flagged = batch()
    flagged[3][1, 1] = float("nan")
    assert TORCH.first_nonfinite(flagged) == 3
    assert len(transfers) == 2
