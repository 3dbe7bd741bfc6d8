"""Tensor repr and torch.set_printoptions: hookgrad's text is torch's, character for character,
for any shape, dtype, values and print options."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad

torch = pytest.importorskip("torch")

_DTYPES = ["float32", "float64", "float16", "int64", "int32", "uint8", "bool"]
_SPECIAL = [0.0, -0.0, 1.0, 0.5, 1e-5, 3e8, 123456.0, float("nan"), float("inf"), -float("inf")]


@pytest.fixture(autouse=True)
def _default_printoptions() -> Iterator[None]:
    yield
    hookgrad.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


def _both(array: np.ndarray, dtype: str, grad: str) -> tuple[Any, Any]:
    pair = []
    for lib in (hookgrad, torch):
        t = lib.tensor(array).to(getattr(lib, dtype))
        if grad != "none" and t.is_floating_point():
            t.requires_grad_()
            if grad == "grad_fn":
                t = t * 1
        pair.append(t)
    return pair[0], pair[1]


_values = st.one_of(
    st.floats(-1e3, 1e3, width=32),
    st.sampled_from(_SPECIAL),
    st.integers(-50, 50).map(float),
)
_options = st.fixed_dictionaries(
    {},
    optional={
        "precision": st.integers(0, 8),
        "threshold": st.integers(1, 200),
        "edgeitems": st.integers(0, 4),
        "linewidth": st.integers(10, 150),
        "sci_mode": st.sampled_from([None, True, False]),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    array=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=9),
        elements=_values,
    ),
    dtype=st.sampled_from(_DTYPES),
    grad=st.sampled_from(["none", "requires_grad", "grad_fn"]),
    options=_options,
)
def test_repr_matches_torch(
    array: np.ndarray, dtype: str, grad: str, options: dict[str, Any]
) -> None:
    """repr gives torch's text under any print options: number format, alignment, line
    wrapping, '...' summaries, size/dtype/requires_grad/grad_fn suffixes and their wrapping."""
    if dtype not in ("float32", "float64", "float16"):
        array = np.nan_to_num(array, nan=0.0, posinf=7.0, neginf=-7.0)
    ours, theirs = _both(array, dtype, grad)
    hookgrad.set_printoptions(**options)
    torch.set_printoptions(**options)
    assert repr(ours) == repr(theirs)


def test_bfloat16_repr_matches_torch() -> None:
    """bfloat16 tensors print as torch prints them, with dtype=torch.bfloat16."""
    pytest.importorskip("ml_dtypes")
    array = np.array([[0.1, -2.5, 300.0], [1e-3, 7.0, 0.0]])
    ours, theirs = _both(array, "bfloat16", "none")
    assert repr(ours) == repr(theirs)
    assert "dtype=torch.bfloat16" in repr(ours)


@pytest.mark.parametrize("profile", ["default", "short", "full"])
def test_profiles_match_torch(profile: str) -> None:
    """The 'default', 'short' and 'full' profiles print a 2000-element tensor as torch does."""
    ours, theirs = _both(np.linspace(-1, 1, 2000).reshape(40, 50), "float32", "none")
    hookgrad.set_printoptions(profile=profile)
    torch.set_printoptions(profile=profile)
    assert repr(ours) == repr(theirs)


def test_set_printoptions_documented_example() -> None:
    """torch's docstring example: precision=2, threshold=5, then profile='default' restores."""
    hookgrad.set_printoptions(precision=2)
    assert repr(hookgrad.tensor([1.12345])) == "tensor([1.12])"
    hookgrad.set_printoptions(threshold=5)
    assert repr(hookgrad.arange(10)) == "tensor([0, 1, 2,  ..., 7, 8, 9])"
    hookgrad.set_printoptions(profile="default")
    assert repr(hookgrad.tensor([1.12345])) == "tensor([1.1235])"
    assert repr(hookgrad.arange(10)) == "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])"
