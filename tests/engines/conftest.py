"""What the kernel tests share: gradient-like arrays for hypothesis, and both engines."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad
from hookgrad.engines import Engine, engine_named

Maker = Callable[[np.ndarray], Any]


def gradient_batches(*extremes: float) -> st.SearchStrategy[list[np.ndarray | None]]:
    """Batches of up to 6 float32/float64 arrays (0-3 dims, empty ones too) or None, with
    NaN, Inf, 0 and ``extremes`` among the entries."""
    arrays = hnp.arrays(
        dtype=st.sampled_from([np.float32, np.float64]),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
        elements=st.one_of(
            st.floats(allow_nan=True, allow_infinity=True, width=32),
            st.sampled_from([0.0, *extremes]),
        ),
    )
    return st.lists(st.one_of(st.none(), arrays), max_size=6)


def both_engines(torch: Any) -> list[tuple[Engine, Maker]]:
    """(engine, tensor maker) of the numpy engine and of torch's (``torch`` imported)."""
    return [
        (engine_named("hookgrad"), lambda a: hookgrad.tensor(a)),
        (engine_named("torch"), lambda a: torch.tensor(a)),
    ]
