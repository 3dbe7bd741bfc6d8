"""``torch.random``: the default generator's seed and state, as torch's CPU build has them.

hookgrad's generator is torch's CPU generator draw for draw (see
:mod:`hookgrad._random_stream`), so a state saved here restores the same future draws; the
saved bytes are hookgrad's own layout, not torch's (a torch state does not load here).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ._creation import default_generator, manual_seed
from ._tensor import Tensor

__all__ = ["fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed", "set_rng_state"]


def seed() -> int:
    """Seed the default generator from the operating system's entropy; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator was last seeded with (torch's default before any)."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state, a uint8 tensor for :func:`set_rng_state`."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore a state from :func:`get_rng_state`; RuntimeError for anything else."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(
    devices: Any = None,
    enabled: bool = True,
    _caller: str = "fork_rng",
    _devices_kw: str = "devices",
    device_type: str = "cuda",
) -> Iterator[None]:
    """Within the block, draw as you like: the default generator's state is restored after.

    Only the CPU generator exists here (``devices`` name CUDA devices in torch: none here).
    """
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
