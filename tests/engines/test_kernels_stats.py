"""grad_stats' kernels: the torch adapter's results equal the numpy adapter's on the same data.

``grad_summaries``, ``histograms``, ``snapshot`` and ``diff_norms`` of both engines, on any
float vectors (hypothesis) and on the edge cases: None entries, an empty batch, empty
tensors, NaN/Inf, all zeros, float16/float64, huge and tiny values, non-contiguous tensors.
Counts, extremes and histogram bins agree exactly; sums to float32 tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad
from hookgrad.engines import engine_named

torch = pytest.importorskip("torch")

NUMPY, TORCH = engine_named("hookgrad"), engine_named("torch")
EXACT = ("max_abs", "min", "max", "zero_fraction", "nonfinite", "numel")
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here"),
    ),
]


def both(arrays: Sequence[np.ndarray | None], device: str = "cpu") -> tuple[list[Any], list[Any]]:
    """The arrays as hookgrad tensors and as torch tensors on ``device`` (None kept)."""
    ours = [None if a is None else hookgrad.tensor(a) for a in arrays]
    theirs = [None if a is None else torch.from_numpy(a.copy()).to(device) for a in arrays]
    return ours, theirs


def assert_summaries_agree(
    got: Sequence[Mapping[str, Any] | None], want: Sequence[Mapping[str, Any] | None]
) -> None:
    """Same keys in the same order; extremes and counts exactly; norm, mean and std to float32
    tolerance (for entries that cancel, relative to the largest entry times their number)."""
    assert len(got) == len(want)
    for mine, reference in zip(got, want, strict=True):
        if reference is None:
            assert mine is None
            continue
        assert mine is not None and list(mine) == list(reference)
        assert {k: mine[k] for k in EXACT} == {k: reference[k] for k in EXACT}
        spread = 4e-7 * (reference["max_abs"] or 0.0) * reference["numel"]
        for key in ("norm", "mean", "std"):
            if reference[key] is None:
                assert mine[key] is None, key
            else:
                tolerance = max(spread, 1e-300) if key != "norm" else 1e-300
                assert mine[key] == pytest.approx(reference[key], rel=2e-6, abs=tolerance), key


# ---------------------------------------------------------------------- grad_summaries
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from([0.0, -0.0, 1e30, -1e30, 1e-30, 3e-39]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(hnp.arrays(np.float32, st.integers(0, 40), elements=FLOATS), max_size=6))
def test_float32_batches_agree(arrays: list[np.ndarray]) -> None:
    """Any batch of float32 vectors (NaN, Inf, zeros, huge, subnormal, empty): equal summaries."""
    ours, theirs = both(arrays)
    assert_summaries_agree(TORCH.grad_summaries(theirs), NUMPY.grad_summaries(ours))


def edge_cases() -> list[np.ndarray]:
    """Gradients at the edges, in a batch big enough for the numpy side's batched path."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal((6, 5)).astype(np.float32)
    return [
        base,
        np.zeros((3, 2), np.float32),  # all zeros
        np.array([np.nan, np.inf, -np.inf], np.float32),  # nothing finite
        np.zeros((0, 4), np.float32),  # empty
        np.array([300.0, -2.0, 0.0, 0.5], np.float16),  # float16 squares overflow in float16
        np.array([1e200, -3e250, 2.0]),  # float64 squares overflow
        np.array([1e-200, -3e-210, 0.0]),  # float64 squares underflow
        np.array([2.0**1023, 1.0]),  # at the largest binade
        np.full(7, 0.1, np.float32),  # the variance cancels
        np.array([1e38, 3e38, -3e38], np.float32),  # huge float32
        rng.standard_normal(5000).astype(np.float32) + 3.0,  # past the numpy batch size
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_edge_cases_agree_and_none_stays_none(device: str) -> None:
    """Edge cases (see edge_cases) and None entries: equal summaries, None where None was."""
    arrays: list[np.ndarray | None] = [None, *edge_cases(), None]
    ours, theirs = both(arrays, device)
    got = TORCH.grad_summaries(theirs)
    assert_summaries_agree(got, NUMPY.grad_summaries(ours))
    assert got[0] is None and got[-1] is None
    assert got[3] == {  # nothing finite: norm 0.0, no moments, every entry counted
        "norm": 0.0,
        "mean": None,
        "std": None,
        "max_abs": None,
        "min": None,
        "max": None,
        "zero_fraction": 0.0,
        "nonfinite": 3,
        "numel": 3,
    }
    assert got[6]["norm"] == pytest.approx(3e250) and got[7]["norm"] == pytest.approx(1e-200)
    assert TORCH.grad_summaries([]) == NUMPY.grad_summaries([]) == []


def test_non_contiguous_tensors_agree() -> None:
    """Transposed and strided views: summaries, histograms and update norms as of their values."""
    values = np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5
    views = [values.T, values[:, ::2], values[::3]]
    ours, _ = both(views)
    theirs = [
        torch.from_numpy(values).T,
        torch.from_numpy(values)[:, ::2],
        torch.from_numpy(values)[::3],
    ]
    assert not theirs[0].is_contiguous() and not theirs[1].is_contiguous()
    summaries = NUMPY.grad_summaries(ours)
    assert_summaries_agree(TORCH.grad_summaries(theirs), summaries)
    ranges = [(s["min"], s["max"]) for s in summaries]  # type: ignore[index]
    assert TORCH.histograms(theirs, 3, ranges) == NUMPY.histograms(ours, 3, ranges)
    shifted = [v + np.float32(0.25) for v in views]
    want = NUMPY.diff_norms(both(shifted)[0], views)
    got = TORCH.diff_norms(both(shifted)[1], theirs)
    assert got == [pytest.approx(pair, rel=2e-6) for pair in want]  # type: ignore[arg-type]


def test_batches_cut_by_size_and_dtype_give_the_numbers_of_single_tensors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tensors of mixed dtypes (int64 past 2**24, float16, float64) and sizes, reduced in
    batches of one dtype and size cut every 10 entries: the summaries each gets alone, exactly."""
    from hookgrad.engines.torch import _kernels

    tensors = [
        torch.tensor([2**40 + 1, -3, 0]),
        torch.randn(4, 3),
        torch.tensor([300.0, 0.5], dtype=torch.float16),
        torch.tensor([1e200, -1.0], dtype=torch.float64),
        torch.randn(7),
        torch.zeros(0),
        torch.randn(2, 2),
        torch.tensor([0.0, math.nan, 1.0, -2.0]),
        torch.randn(4),
    ]
    alone = [TORCH.summaries([t])[0] for t in tensors]
    monkeypatch.setattr(_kernels, "_BATCH_ENTRIES", 10)
    assert _kernels._batches(tensors) == [[0], [1], [2], [3], [4], [5], [6, 7], [8]]
    assert TORCH.summaries(tensors) == alone
    assert alone[0]["max"] == 2**40 + 1


def test_each_kernel_moves_its_batch_to_the_host_once(torch_host_syncs: list[str]) -> None:
    """Ten tensors: grad_summaries, histograms and diff_norms each sync once, snapshot never."""
    tensors = [torch.randn(3, i + 1) for i in range(10)]
    summaries = TORCH.grad_summaries(tensors)
    assert torch_host_syncs == ["tolist"]
    ranges = [(s["min"], s["max"]) for s in summaries]  # type: ignore[index]
    TORCH.histograms(tensors, 8, ranges)
    assert torch_host_syncs == ["tolist"] * 2
    kept = TORCH.snapshot(tensors)
    assert torch_host_syncs == ["tolist"] * 2
    TORCH.diff_norms([t + 1 for t in tensors], kept)
    assert torch_host_syncs == ["tolist"] * 3


# ---------------------------------------------------------------------- histograms
def ranges_of(summaries: Sequence[Mapping[str, Any] | None]) -> list[tuple[float, float] | None]:
    """Each summary's finite (min, max), as grad_stats passes them; None when there is none."""
    return [None if s is None or s["min"] is None else (s["min"], s["max"]) for s in summaries]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(hnp.arrays(np.float32, st.integers(0, 40), elements=FLOATS), max_size=4),
    st.integers(1, 12),
)
def test_float32_histograms_equal_numpys(arrays: list[np.ndarray], bins: int) -> None:
    """Any float32 vectors and bin count: the same counts and edges, to the bit."""
    ours, theirs = both(arrays)
    ranges = ranges_of(NUMPY.grad_summaries(ours))
    assert TORCH.histograms(theirs, bins, ranges) == NUMPY.histograms(ours, bins, ranges)


@pytest.mark.parametrize("device", DEVICES)
def test_histogram_edge_cases_equal_numpys(device: str) -> None:
    """Constant, float16, float64, non-finite, overflowing-range and None entries: numpy's
    counts and edges exactly; None where numpy cannot bin or nothing is finite."""
    arrays: list[np.ndarray | None] = [
        None,
        *edge_cases(),
        np.full((2, 3), 0.25, np.float32),  # lo == hi: numpy widens the range by 0.5
        np.array([-3e38, 3e38], np.float32),  # hi - lo overflows float32
    ]
    ours, theirs = both(arrays, device)
    ranges = ranges_of(NUMPY.grad_summaries(ours))
    want = NUMPY.histograms(ours, 5, ranges)
    assert TORCH.histograms(theirs, 5, ranges) == want
    assert want[0] is None and want[3] is None and want[-1] is None
    finite = arrays[1][np.isfinite(arrays[1])]  # type: ignore[index]
    assert want[1] == {
        "counts": np.histogram(finite, 5)[0].tolist(),
        "edges": np.histogram(finite, 5)[1].tolist(),
    }


# ---------------------------------------------------------------------- snapshot, diff_norms
@pytest.mark.parametrize("device", DEVICES)
def test_snapshots_stay_on_the_device_and_keep_the_old_values(device: str) -> None:
    """A snapshot is a copy on the tensor's device: changing the tensor in place leaves it."""
    weight = torch.nn.Parameter(torch.ones(2, 3, device=device))
    (kept,) = TORCH.snapshot([weight])
    with torch.no_grad():
        weight.add_(1.0)
    assert kept.device == weight.device and not kept.requires_grad
    assert torch.equal(kept, torch.ones(2, 3, device=device))
    assert TORCH.snapshot([None]) == NUMPY.snapshot([None]) == [None]


@pytest.mark.parametrize("device", DEVICES)
def test_diff_norms_agree(device: str) -> None:
    """(||a - b||, ||b||) of both engines: moved weights, NaN written into one, float16 and
    float64 weights, huge float32 weights, a changed dtype, None pairs, a batch of many."""
    rng = np.random.default_rng(1)
    before: list[np.ndarray | None] = [
        rng.standard_normal((3, i + 1)).astype(np.float32) for i in range(9)
    ]
    before += [
        np.array([300.0, 1.0], np.float16),
        np.array([1e200, 1.0]),
        np.full(3, 1e30, np.float32),
        np.ones((2, 2), np.float32),
        None,
    ]
    after = [None if b is None else b + np.asarray(0.5, b.dtype) for b in before]
    after[1][0, 0] = np.nan  # type: ignore[index]
    after[12] = after[12].astype(np.float64)  # type: ignore[union-attr]
    after.append(np.ones(2, np.float32))
    before.append(None)
    ours, theirs = both(after, device)
    _, kept = both(before, device)
    got = TORCH.diff_norms(theirs, kept)
    want = NUMPY.diff_norms(ours, before)
    assert got[-1] is None and got[-2] is None and want[-1] is None
    assert got == [None if w is None else pytest.approx(w, rel=2e-6, nan_ok=True) for w in want]
    assert math.isnan(got[1][0])  # type: ignore[index]
    assert TORCH.diff_norms([], []) == NUMPY.diff_norms([], []) == []


@pytest.mark.parametrize("engine", [NUMPY, TORCH], ids=["hookgrad", "torch"])
def test_restore_writes_a_snapshot_back_into_the_same_tensors(engine: Any) -> None:
    """restore_ puts the snapshot's values back in place: same tensor objects, the values of
    the snapshot, version counters moved, no autograd history."""
    lib = hookgrad if engine is NUMPY else torch
    weights = [lib.tensor([1.0, 2.0], requires_grad=True), lib.tensor([[3.0]], requires_grad=True)]
    kept = engine.snapshot(weights)
    with lib.no_grad():
        for w in weights:
            w.mul_(10.0)
    versions = [w._version for w in weights]
    engine.restore_(weights, kept)
    assert [w.tolist() for w in weights] == [[1.0, 2.0], [[3.0]]]
    assert all(w._version > v for w, v in zip(weights, versions, strict=True))
    assert all(w.grad_fn is None and w.requires_grad for w in weights)
