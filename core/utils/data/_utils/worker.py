"""Data-loading workers, run in the main process: ``get_worker_info`` and ``WorkerInfo``.

hookgrad does not start worker processes. With ``num_workers=k`` the loader keeps ``k``
in-process workers, each with its own copy of the dataset, its ``WorkerInfo`` and its
``worker_init_fn`` call, and asks them for batches in torch's round-robin order, so
the batches (and their order) are the ones torch's worker processes deliver.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["WorkerInfo", "get_worker_info"]


@dataclass(frozen=True)
class WorkerInfo:
    """Who is loading: worker ``id`` of ``num_workers``, its ``seed`` and its ``dataset`` copy."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_current: contextvars.ContextVar[WorkerInfo | None] = contextvars.ContextVar(
    "hookgrad_data_worker", default=None
)


def get_worker_info() -> WorkerInfo | None:
    """The running worker's :class:`WorkerInfo`; None outside a worker (``num_workers=0``)."""
    return _current.get()


@contextlib.contextmanager
def as_worker(info: WorkerInfo) -> Iterator[None]:
    """Run the body as worker ``info.id``: ``get_worker_info()`` returns ``info`` meanwhile."""
    token = _current.set(info)
    try:
        yield
    finally:
        _current.reset(token)
