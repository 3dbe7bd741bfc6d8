"""The DataLoader's helpers, as ``torch.utils.data._utils``: collation, fetching, workers."""

from __future__ import annotations

from . import collate, fetch, seed, worker

__all__ = ["collate", "fetch", "seed", "worker"]
