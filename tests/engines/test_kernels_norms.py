"""The per-step gradient summary: the grad_norms/total_norm_of kernels of both engines and
the shared cache of hookgrad.engines.grad_norms (identity + version counter, weak refs)."""

from __future__ import annotations

import gc
import math
import warnings
import weakref
from typing import Any

import numpy as np
import pytest
from hypothesis import given

import hookgrad
from hookgrad.engines import Engine, _grad_norms, grad_norms

from .conftest import both_engines, gradient_batches

torch = pytest.importorskip("torch")

BOTH = both_engines(torch)
(NUMPY, _), (TORCH, _) = BOTH
BATCHES = gradient_batches(1e30, -1e30)


def expected(a: np.ndarray) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sqrt(np.sum(a.astype(np.float64) ** 2)))


def close(got: float | None, want: float) -> bool:
    assert got is not None
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) == math.isnan(got) or math.isinf(want)  # inf + nan entries
    if math.isinf(want) or math.isinf(got):  # float32 squares overflow before float64's
        return math.isinf(got) or got > 1e18
    # float32 squares fade under its smallest normal (1.2e-38): a norm under its square root
    # is lost in float32, on torch (foreach_norm) as on hookgrad
    return math.isclose(got, want, rel_tol=1e-5, abs_tol=math.sqrt(np.finfo(np.float32).tiny))


# ---------------------------------------------------------------------- kernels
@given(BATCHES)
def test_grad_norms_agree_with_float64_norms(batch: list[np.ndarray | None]) -> None:
    """Both engines give each tensor's 2-norm (None for None) to float32 tolerance, nan/inf
    where an entry is NaN/Inf, without a floating-point warning when squares overflow."""
    for engine, make in BOTH:
        tensors = [None if a is None else make(a) for a in batch]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            norms = engine.grad_norms(tensors)
        assert len(norms) == len(batch)
        for a, norm in zip(batch, norms):
            if a is None:
                assert norm is None
            else:
                assert close(norm, expected(a)), (engine, a, norm)


def test_grad_norms_edge_cases_agree() -> None:
    """Empty batch, empty tensor, float16 beyond 256 (normed in float32), non-contiguous."""
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    for engine, make in BOTH:
        assert engine.grad_norms([]) == []
        assert engine.grad_norms([None]) == [None]
        half = make(np.full(4, 300.0, dtype=np.float16))
        strided = make(base).t() if engine is TORCH else make(base).T
        norms = engine.grad_norms([make(np.zeros(0, np.float32)), half, strided])
        assert norms[0] == 0.0
        assert norms[1] == 600.0
        assert math.isclose(norms[2], float(np.linalg.norm(base)), rel_tol=1e-6)


def test_float32_batch_overflowing_or_nonfinite_raises_no_warning() -> None:
    """The all-float32 fast path: squares that overflow give inf, NaN gives nan, and numpy's
    default error state warns of neither (the path runs outside np.errstate)."""
    batch = [np.full(4, 1e30, np.float32), np.array([np.nan, 1.0], np.float32)]
    batch.append(np.array([np.inf, -np.inf], np.float32))
    with warnings.catch_warnings(), np.errstate(all="warn"):
        warnings.simplefilter("error")
        norms = NUMPY.grad_norms([hookgrad.tensor(a) for a in batch])
    assert math.isinf(norms[0]) and math.isnan(norms[1]) and math.isinf(norms[2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_total_norm_of_is_get_total_norm_bit_for_bit(dtype: type) -> None:
    """From grad_norms' values, total_norm_of rebuilds each engine's get_total_norm exactly."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape).astype(dtype) * 3 for shape in [(7, 5), (5,), (1,), (33,)]]
    for engine, make in BOTH:
        tensors = [make(a) for a in arrays]
        norms = engine.grad_norms(tensors)
        want = float(engine.api.nn.utils.get_total_norm(tensors, 2.0))
        assert engine.total_norm_of(tensors, norms) == want


def test_total_norm_of_declines_what_it_cannot_rebuild() -> None:
    """None for float16 tensors (both engines) and for mixed dtypes on torch; 0.0 for none."""
    for engine, make in BOTH:
        half = [make(np.ones(3, np.float16))]
        assert engine.total_norm_of(half, engine.grad_norms(half)) is None
        assert engine.total_norm_of([], []) == 0.0
    mixed = [torch.ones(2), torch.ones(2, dtype=torch.float64)]
    assert TORCH.total_norm_of(mixed, TORCH.grad_norms(mixed)) is None


def test_torch_grad_norms_make_one_host_transfer(torch_host_syncs: list[str]) -> None:
    """One tolist for a batch of one dtype, one per device for mixed dtypes; no item()."""
    transfers = torch_host_syncs
    TORCH.grad_norms([torch.ones(3), None, torch.ones(4, 4)])
    assert transfers == ["tolist"]
    transfers.clear()
    TORCH.grad_norms([torch.ones(3), torch.ones(2, dtype=torch.float64), torch.ones(1)])
    assert transfers == ["tolist"]


# ---------------------------------------------------------------------- the shared cache
@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many tensors each engine.grad_norms call normed (both engines counted)."""
    counted: list[int] = []
    for engine in (NUMPY, TORCH):
        real = engine.grad_norms  # bound: a method or a function the class binds

        def counting(self: Any, tensors: Any, _real: Any = real) -> Any:
            counted.append(len(tensors))
            return _real(tensors)

        monkeypatch.setattr(type(engine), "grad_norms", counting)
    return counted


@pytest.mark.parametrize("make", [hookgrad.tensor, torch.tensor], ids=["hookgrad", "torch"])
def test_second_ask_is_served_from_the_cache(make: Any, calls: list[int]) -> None:
    """A second caller of the same step gets the same values with no kernel call; only the
    tensors not seen yet are normed."""
    a, b = make([3.0, 4.0]), make([6.0, 8.0])
    assert grad_norms([a, b]) == [5.0, 10.0]
    assert grad_norms([b, None, a]) == [10.0, None, 5.0]
    c = make([1.0])
    assert grad_norms([a, c]) == [5.0, 1.0]
    assert calls == [2, 1]


@pytest.mark.parametrize("make", [hookgrad.tensor, torch.tensor], ids=["hookgrad", "torch"])
def test_in_place_changes_and_replacements_are_normed_again(make: Any) -> None:
    """mul_ (a clip), masked_fill_ (nan_guard's zeroing), a new .grad: never a stale norm."""
    p = make([0.0, 0.0], requires_grad=True)
    p.grad = make([3.0, float("nan")])
    assert math.isnan(grad_norms([p.grad])[0])
    p.grad.masked_fill_(p.grad.isnan(), 4.0)
    assert grad_norms([p.grad]) == [5.0]
    p.grad.mul_(2.0)
    assert grad_norms([p.grad]) == [10.0]
    p.grad = make([1.0, 0.0])
    assert grad_norms([p.grad]) == [1.0]


@pytest.mark.parametrize("engine", [NUMPY, TORCH], ids=["hookgrad", "torch"])
def test_unscale_forgets_what_it_wrote_without_a_version_bump(engine: Engine) -> None:
    """unscale_ keeps the version counter (as torch's kernel does) but not the cached norm."""
    g = engine.api.tensor([6.0, 8.0])
    assert grad_norms([g]) == [10.0]
    version = g._version
    engine.unscale_([g], 0.5)
    assert g._version == version
    assert grad_norms([g]) == [5.0]


@pytest.mark.parametrize("engine", [NUMPY, TORCH], ids=["hookgrad", "torch"])
def test_a_clip_carries_finite_norms_over_and_drops_the_others(
    engine: Engine, calls: list[int]
) -> None:
    """clip_with_norm_ scales the cached norms with the gradients (no second pass, the
    clipped norms to float32 tolerance); a non-finite one (a huge entry's square overflowed,
    the scaled entries may not) is normed anew."""
    make = hookgrad.tensor if engine is NUMPY else torch.tensor
    small, huge = make([3.0, 4.0]), make([3e30, 4e30])
    assert grad_norms([small, huge]) == [5.0, math.inf]
    coefficient = engine.clip_with_norm_([small, huge], 1e-28, math.inf)
    assert coefficient == 0.0  # max_norm / inf
    assert grad_norms([small]) == [0.0] and calls == [2]  # carried: 5 * 0
    assert grad_norms([huge]) == [0.0] and calls == [2, 1]  # dropped: normed again
    engine.clip_with_norm_([small], 1.0, 5.0)  # nothing to scale: coefficient capped at 1
    fresh = make([3.0, 4.0])
    assert grad_norms([fresh]) == [5.0]
    coefficient = engine.clip_with_norm_([fresh], 1.0, 5.0)
    assert grad_norms([fresh]) == [pytest.approx(5.0 * coefficient, rel=1e-6)]
    assert calls == [2, 1, 1]


@pytest.mark.parametrize("make", [hookgrad.tensor, torch.tensor], ids=["hookgrad", "torch"])
def test_a_new_tensor_at_a_dead_ones_id_is_normed_anew(make: Any) -> None:
    """A gradient born where an earlier one died (the same id, version 0 alike) gets its own
    norm, and the cache keeps no gradient alive."""
    old = make([7.0, 0.0])
    assert grad_norms([old]) == [7.0]
    assert grad_norms([old, make([1.0])]) == [7.0, 1.0]  # another batch: old's norm kept alone
    entry = _grad_norms._CACHE[id(old)]
    alive = weakref.ref(old)
    del old
    gc.collect()
    assert alive() is None  # the cache did not keep it
    new = make([1.0, 0.0])
    _grad_norms._CACHE[id(new)] = entry  # as if ``new`` had taken the dead one's memory
    assert new._version == entry[1]
    assert grad_norms([new]) == [1.0]
    other = make([2.0])
    grad_norms([other, new])
    _grad_norms.forget([new])  # lets the batch go: other's entry stays
    _grad_norms._CACHE[id(new)] = _grad_norms._CACHE[id(other)]  # a live other tensor's entry
    assert grad_norms([new]) == [1.0]


def test_accumulating_backward_is_seen_on_both_engines() -> None:
    """A second backward accumulating into .grad (no zero_grad) moves the norm."""
    for api in (hookgrad, torch):
        w = api.ones(2, requires_grad=True)
        (w * 3.0).sum().backward()
        assert grad_norms([w.grad]) == [pytest.approx(math.sqrt(18.0))]
        (w * 3.0).sum().backward()
        assert grad_norms([w.grad]) == [pytest.approx(math.sqrt(72.0))]


def test_cache_stays_bounded_over_many_steps() -> None:
    """Dead tensors' entries are swept: many steps of new gradients leave a small cache."""
    for step in range(3000):
        grad_norms([hookgrad.ones(2) * step, torch.ones(2) * step])
    assert len(_grad_norms._CACHE) <= 2 * _grad_norms._MIN_LIMIT


def test_not_a_tensor_is_a_type_error() -> None:
    """Something no engine owns fails naming its type."""
    with pytest.raises(TypeError, match="grad_norms\\(\\) takes tensors, got list"):
        grad_norms([[1.0]])


@pytest.mark.parametrize("make", [hookgrad.tensor, torch.tensor], ids=["hookgrad", "torch"])
def test_the_last_batch_is_answered_whole_until_one_of_it_changes_or_dies(
    make: Any, calls: list[int]
) -> None:
    """The same tensors asked again (as every plugin of a step asks) are answered at once; an
    in-place change renorms only that tensor; a tensor dying drops the kept batch."""
    a, b = make([3.0, 4.0]), make([6.0, 8.0])
    assert grad_norms([a, b]) == [5.0, 10.0] == grad_norms([a, b])
    assert calls == [2]
    b.mul_(2.0)
    assert grad_norms([a, b]) == [5.0, 20.0] and calls == [2, 1]
    alive = weakref.ref(b)
    del b
    gc.collect()
    assert alive() is None and _grad_norms._last is None
    assert grad_norms([a]) == [5.0] and calls == [2, 1]  # still known one by one


def test_an_older_batch_dying_late_leaves_the_last_one_alone(calls: list[int]) -> None:
    """A batch kept alive elsewhere (a traceback's frame) whose tensors die later does not
    drop the batch asked for since, which is still answered whole."""
    old = [torch.tensor([3.0, 4.0])]
    grad_norms(old)
    kept_elsewhere = _grad_norms._last
    current = [torch.tensor([6.0, 8.0])]
    assert grad_norms(current) == [10.0] and calls == [1, 1]
    del old[:]  # the older batch's tensor dies now
    gc.collect()
    assert kept_elsewhere is not None and _grad_norms._last is not None
    assert grad_norms(current) == [10.0] and calls == [1, 1]
