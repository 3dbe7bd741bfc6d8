"""contiguous() and is_contiguous() against torch 2.13: a non-contiguous tensor is copied."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hookgrad

torch = pytest.importorskip("torch")

VIEWS = {
    "transpose": lambda x: x.transpose(1, 2),
    "t of a column": lambda x: x[0, :, :1].t(),
    "every other row": lambda x: x[:, ::2],
    "plain": lambda x: x,
    "a slice of rows": lambda x: x[1:],
}


@pytest.mark.parametrize("name", VIEWS)
def test_is_contiguous_and_contiguous_follow_torch(name: str) -> None:
    """Which views are contiguous, whether contiguous() copies, and the graph node it adds."""
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    seen = []
    for lib in (hookgrad, torch):
        x = lib.tensor(values, requires_grad=True)
        view = VIEWS[name](x)
        made = view.contiguous()
        node = None if made.grad_fn is None else made.grad_fn.name()
        seen.append((view.is_contiguous(), made.is_contiguous(), made is view, node))
    assert seen[0] == seen[1]


def test_the_attention_reshape_of_character_level_gpts_runs_and_matches_torch() -> None:
    """``y.transpose(1, 2).contiguous().view(B, T, C)``: the values and the input's gradient."""
    rng = np.random.default_rng(0)
    heads = rng.standard_normal((2, 4, 5, 3)).astype(np.float32)  # B, heads, T, head size
    results: list[Any] = []
    for lib in (hookgrad, torch):
        y = lib.tensor(heads, requires_grad=True)
        merged = y.transpose(1, 2).contiguous().view(2, 5, 12)
        (merged * lib.arange(12, dtype=lib.float32)).sum().backward()
        results.append((merged.detach().numpy(), y.grad.numpy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
