"""The one 63-bit seed draw that samplers and loaders take from a generator, as torch takes it."""

from __future__ import annotations

from ...._creation import Generator, default_generator

_SEED_BOUND = 2**63


def draw_seed(generator: Generator | None) -> int:
    """A seed in [0, 2**63) from ``generator`` (the default one when None).

    torch draws ``torch.empty((), dtype=torch.int64).random_(generator=...)`` at the same
    points (each loader iteration, each unseeded shuffle), from the same stream, so seeded
    loaders shuffle as torch's do.
    """
    return (generator or default_generator).stream.random_int64() % _SEED_BOUND
