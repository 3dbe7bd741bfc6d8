"""Differential tests: backward formulas that select with a mask keep torch's values when the
incoming gradient (or the input) is NaN or inf.

torch writes ``where(mask, grad, 0)`` (or scatters into zeros) for relu, clamp, max/min
selection, where, masked_fill, indexing and the like, so a blocked element gets an exact 0 even
for a NaN gradient; ``grad * mask`` would give NaN. Where torch itself multiplies (amax/amin,
dropout) NaN must stay NaN. Each case runs the same program on both engines with a hook on the
output that replaces its gradient by one holding NaN and inf.
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

torch = pytest.importorskip("torch")

SHAPE = (3, 4)
Program = Callable[[Any, Any], Any]


def _l1(lib: Any, t: Any) -> Any:
    return lib.nn.functional.l1_loss(t, lib.zeros(SHAPE), reduction="none")


PROGRAMS: dict[str, Program] = {
    "relu": lambda L, t: L.relu(t),
    "relu_": lambda L, t: L.nn.functional.relu(t * 1, inplace=True),
    "leaky_relu": lambda L, t: L.nn.functional.leaky_relu(t, 0.1),
    "clamp": lambda L, t: t.clamp(-1.0, 1.0),
    "clamp_min": lambda L, t: t.clamp(min=0.0),
    "clamp_max": lambda L, t: t.clamp(max=0.5),
    "clamp_tensor": lambda L, t: L.clamp(t, L.zeros(4) - 1, L.ones(4)),
    "clip": lambda L, t: t.clip(-0.5, 2.0),
    "abs": lambda L, t: t.abs(),
    "l1_loss": _l1,
    "max": lambda L, t: t.max(),
    "min": lambda L, t: t.min(),
    "median": lambda L, t: t.median(),
    "max_dim": lambda L, t: t.max(dim=1)[0],
    "min_dim": lambda L, t: t.min(dim=0)[0],
    "median_dim": lambda L, t: t.median(dim=1)[0],
    "amax": lambda L, t: t.amax(dim=1),
    "amin": lambda L, t: t.amin(dim=0),
    "maximum": lambda L, t: L.maximum(t, L.zeros(SHAPE)),
    "minimum": lambda L, t: L.minimum(L.zeros(4), t),
    "where": lambda L, t: L.where(t > 0, t, L.zeros(SHAPE)),
    "masked_fill": lambda L, t: t.masked_fill(t > 0.5, 0.0),
    "norm_1": lambda L, t: t.norm(p=1, dim=1),
    "norm_inf": lambda L, t: t.norm(p=float("inf"), dim=1),
    "zero_pow": lambda L, t: 0.0**t,
    "pow_0": lambda L, t: t**0,
    "sort": lambda L, t: t.sort(dim=1)[0],
    "gather": lambda L, t: t.gather(1, L.tensor([[0], [3], [1]])),
    "index": lambda L, t: t[L.tensor([0, 2, 2])],
    "bool_index": lambda L, t: t[t > 0],
    "tril": lambda L, t: t.tril(),
    "cross_entropy": lambda L, t: L.nn.functional.cross_entropy(
        t, L.tensor([0, 1, 3]), reduction="none"
    ),
}

# x: finite values with ties, signed zeros and NaN; the seed gradient: NaN, inf and finite.
_X = st.sampled_from([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, float("nan")])
_SEED = st.sampled_from([float("nan"), float("inf"), -float("inf"), 1.5, -0.5, 0.0])


def _grad(lib: Any, name: str, x: np.ndarray, seed: np.ndarray) -> np.ndarray:
    t = lib.from_numpy(x.copy()).requires_grad_()
    with np.errstate(divide="ignore"):  # 0 ** negative is inf; torch computes it silently
        out = PROGRAMS[name](lib, t)
    out.register_hook(lambda g: lib.from_numpy(np.resize(seed, tuple(g.shape)).copy()))
    out.backward(lib.ones(tuple(out.shape)))
    return t.grad.numpy()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@settings(max_examples=40, deadline=None)
@given(
    x=hnp.arrays(np.float32, SHAPE, elements=_X),
    seed=hnp.arrays(np.float32, SHAPE, elements=_SEED),
)
def test_gradient_with_nan_and_inf_as_torch(name: str, x: np.ndarray, seed: np.ndarray) -> None:
    """A NaN/inf gradient hook-substituted on the output, and NaN inputs, reach the input as in
    torch: an exact 0 where torch selects, NaN where torch multiplies."""
    ours, theirs = _grad(hookgrad, name, x, seed), _grad(torch, name, x, seed)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=0, equal_nan=True)


def test_a_blocked_element_gets_zero_for_a_nan_gradient() -> None:
    """The case the hypothesis test exists for: max() of all entries sends 0, not NaN, to the
    entries that are not the maximum when the incoming gradient is NaN (as torch)."""
    x = np.array([[1.0, 3.0], [2.0, 0.0]], np.float32)
    seed = np.full((), np.nan, np.float32)
    ours = _grad(hookgrad, "max", x, seed)
    np.testing.assert_array_equal(ours, _grad(torch, "max", x, seed))
    assert (ours == 0).sum() == 3 and np.isnan(ours[0, 1])


def test_sign_of_nan_is_zero_as_torch() -> None:
    """sign() gives 0 for a NaN element, as torch's (numpy's gives NaN)."""
    x = np.array([np.nan, -3.0, 0.0, 2.0], np.float32)
    ours = hookgrad.from_numpy(x).sign().numpy()
    np.testing.assert_array_equal(ours, torch.from_numpy(x).sign().numpy())


def test_dropout_multiplies_its_mask_as_torch() -> None:
    """dropout's backward is torch's native_dropout_backward, ``grad * mask * scale``: a NaN or
    inf gradient at a dropped element stays NaN (torch multiplies there, it does not select)."""
    hookgrad.manual_seed(0)
    x = hookgrad.ones(64, requires_grad=True)
    out = hookgrad.nn.functional.dropout(x, 0.5)
    seed = np.resize(np.array([np.nan, np.inf, 2.0], np.float32), 64)
    out.backward(hookgrad.from_numpy(seed.copy()))
    kept = torch.from_numpy(out.detach().numpy() != 0)
    expected = torch.ops.aten.native_dropout_backward(torch.from_numpy(seed), kept, 2.0)
    np.testing.assert_array_equal(x.grad.numpy(), expected.numpy())
    assert not kept.all() and kept.any()
