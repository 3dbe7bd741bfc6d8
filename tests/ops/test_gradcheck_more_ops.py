"""Numerical gradient checks (float64 central differences) for the ops of
test_more_ops_vs_torch.py: their backward formulas hold at any values, zeros and repeated
einsum letters included, not only at the points compared with torch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad

from .test_gradcheck import check

_IDX = hookgrad.tensor([[0, 2, 2], [1, 1, 0]])
# scatter writes each position once here: with repeats torch (and hookgrad) still give every
# src entry the gradient gathered at its position, which differences cannot see
_PERM = hookgrad.tensor([[0, 2, 1], [1, 0, 2]])

OPS: dict[str, tuple[Callable[..., Any], int]] = {
    "tril_triu": (lambda x: x.tril(-1) * 2 + x.triu(1), 1),
    "cumsum": (lambda x: x.cumsum(1), 1),
    "cumprod": (lambda x: x.cumprod(0), 1),
    "flip_narrow": (lambda x: x.flip(0, 1).narrow(1, 1, 2), 1),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, dim=1), 1),
    "index_select": (lambda x: x.index_select(1, hookgrad.tensor([2, 0, 2])), 1),
    "log10_log2": (lambda x: (x * x + 1).log10() + (x * x + 1).log2(), 1),
    "var_mean": (lambda x: hookgrad.var_mean(x, 1)[0] * hookgrad.var_mean(x, 1)[1], 1),
    "std_mean": (lambda x: sum(hookgrad.std_mean(x, 0, correction=0)), 1),
    "sort_topk_median": (lambda x: x.sort(1)[0][:, :2] + x.topk(2)[0] + x.median(1)[0][:, None], 1),
    "scatter": (lambda x, s: x.scatter(1, _PERM[:, :2], s[:, :2]), 2),
    "scatter_add": (lambda x, s: x.scatter_add(1, _IDX, s[:, :3]), 2),
    "gather": (lambda x, s: x.gather(1, _IDX) * s[:, :3], 2),
    "bmm_baddbmm": (
        lambda x, s: hookgrad.baddbmm(x[None, :, :2], x[None], s.T[None], beta=0.5, alpha=2),
        2,
    ),
    "mv": (lambda x, s: hookgrad.mv(x, s[0]), 2),
    "einsum_contract": (lambda x, s: hookgrad.einsum("ij,kj->ik", x, s), 2),
    "einsum_diagonal": (lambda x, s: hookgrad.einsum("ii,ij->j", x[:, :2], s[:2]), 2),
    "einsum_sum_only_in_one": (lambda x, s: hookgrad.einsum("ij,ik->i", x, s), 2),
    "lerp_tensor_weight": (lambda x, s: hookgrad.lerp(x, s, s.sigmoid()), 2),
    "addcmul_addcdiv": (lambda x, s: x.addcmul(x, s, value=0.5).addcdiv(s, x * x + 1, value=-2), 2),
}


@pytest.mark.parametrize("name", sorted(OPS))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_backward_matches_central_differences(name: str, data: st.DataObject) -> None:
    """The op's backward matches numerical differentiation at random distinct values."""
    fn, n_inputs = OPS[name]
    n = 2 * 3
    arrays = []
    for _ in range(n_inputs):
        order = data.draw(st.permutations(list(range(n))))
        arrays.append((np.array(order, np.float64) * 0.37 - 0.9).reshape(2, 3))
    check(fn, *arrays)


@settings(max_examples=15, deadline=None)
@given(x=hnp.arrays(np.float64, (3, 4), elements=st.sampled_from([0.0, 0.5, -1.5, 2.0])))
def test_cumprod_gradient_with_zeros(x: np.ndarray) -> None:
    """cumprod's gradient is exact where entries are zero (one or several in a row)."""
    check(lambda t: t.cumprod(1), x)
    check(lambda t: t.cumprod(0), x)
