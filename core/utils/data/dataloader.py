"""``DataLoader``: batches from a dataset, as ``torch.utils.data.dataloader``.

A loader picks an index sampler (sequential, shuffled, or the user's), groups indices with a
``BatchSampler`` when batching is on, fetches samples and collates them. Workers run in the
main process (see :mod:`._utils.worker`); ``pin_memory`` is accepted and does nothing, since
hookgrad tensors live on the CPU.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import math
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..._creation import Generator
from ._utils.collate import default_collate, default_convert
from ._utils.fetch import IterableDatasetFetcher, MapDatasetFetcher
from ._utils.seed import draw_seed
from ._utils.worker import WorkerInfo, as_worker, get_worker_info
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

_FROZEN_AFTER_INIT = frozenset(
    {"batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"}
)


class _DatasetKind(enum.IntEnum):
    Map = 0
    Iterable = 1


class _InfiniteConstantSampler(Sampler[None]):
    """The index sampler of an iterable dataset: ``None`` forever (the stream decides the end)."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


def _check_worker_options(
    num_workers: int, timeout: float, prefetch_factor: int | None, persistent_workers: bool
) -> int | None:
    """torch's checks of the worker options; returns the effective ``prefetch_factor``."""
    if num_workers < 0:
        raise ValueError(
            "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing."
        )
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError(
            "prefetch_factor option could only be specified in multiprocessing."
            "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
        )
    if prefetch_factor is not None and prefetch_factor < 0:
        raise ValueError("prefetch_factor option should be non-negative")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")
    return 2 if num_workers > 0 and prefetch_factor is None else prefetch_factor


def _check_iterable_options(shuffle: bool | None, sampler: Any, batch_sampler: Any) -> None:
    """An iterable dataset decides its own order: no shuffle, sampler or batch_sampler."""
    if shuffle not in {False, None}:
        raise ValueError(
            "DataLoader with IterableDataset: expected unspecified shuffle option, "
            f"but got shuffle={shuffle}"
        )
    if sampler is not None:
        raise ValueError(
            "DataLoader with IterableDataset: expected unspecified sampler option, "
            f"but got sampler={sampler}"
        )
    if batch_sampler is not None:
        raise ValueError(
            "DataLoader with IterableDataset: expected unspecified batch_sampler option, "
            f"but got batch_sampler={batch_sampler}"
        )


def _index_samplers(
    dataset: Any,
    kind: _DatasetKind,
    batch_size: int | None,
    shuffle: bool | None,
    sampler: Any,
    batch_sampler: Any,
    drop_last: bool,
    generator: Generator | None,
) -> tuple[Any, Any, int | None, bool]:
    """The loader's ``(sampler, batch_sampler, batch_size, drop_last)``, as torch chooses them.

    A ``batch_sampler`` excludes the options it replaces; otherwise the sampler is the user's,
    a shuffling or sequential one (map-style) or an endless one (iterable), wrapped in a
    ``BatchSampler`` unless ``batch_size`` is None.
    """
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None:
        if batch_size != 1 or shuffle or sampler is not None or drop_last:
            raise ValueError(
                "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                "sampler, and drop_last"
            )
        batch_size, drop_last = None, False
    elif batch_size is None and drop_last:
        raise ValueError(
            "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
        )
    if sampler is None:
        if kind is _DatasetKind.Iterable:
            sampler = _InfiniteConstantSampler()
        elif shuffle:
            sampler = RandomSampler(dataset, generator=generator)
        else:
            sampler = SequentialSampler(dataset)
    if batch_size is not None and batch_sampler is None:
        batch_sampler = BatchSampler(sampler, batch_size, drop_last)
    return sampler, batch_sampler, batch_size, drop_last


class DataLoader:
    """Iterate over ``dataset`` in batches; the arguments and their errors are torch's.

    ``batch_size=None`` turns batching off (each sample goes through ``default_convert``);
    ``shuffle=True`` draws a new order each epoch from ``generator`` (the default generator
    when None); ``num_workers > 0`` runs that many workers in the main process.
    """

    _initialized = False

    def __init__(
        self,
        dataset: Dataset[Any],
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler[Any] | Iterable[Any] | None = None,
        batch_sampler: Sampler[list[Any]] | Iterable[list[Any]] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[Any], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        self.prefetch_factor = _check_worker_options(
            num_workers, timeout, prefetch_factor, persistent_workers
        )
        if multiprocessing_context is not None and num_workers == 0:
            raise ValueError(
                "multiprocessing_context can only be used with multi-process loading "
                f"(num_workers > 0), but got num_workers={num_workers}"
            )
        if isinstance(dataset, IterableDataset):
            _check_iterable_options(shuffle, sampler, batch_sampler)
            kind = _DatasetKind.Iterable
        else:
            shuffle = bool(shuffle)
            kind = _DatasetKind.Map
        sampler, batch_sampler, batch_size, drop_last = _index_samplers(
            dataset, kind, batch_size, shuffle, sampler, batch_sampler, drop_last, generator
        )

        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        self.collate_fn = collate_fn or (
            default_collate if batch_sampler is not None else default_convert
        )
        self.persistent_workers = persistent_workers
        self._dataset_kind = kind
        self._iterator: _DataLoaderIter | None = None
        self._initialized = True

    def __setattr__(self, name: str, value: Any) -> None:
        if self._initialized and name in _FROZEN_AFTER_INIT:
            raise ValueError(
                f"{name} attribute should not be set after {type(self).__name__} is initialized"
            )
        super().__setattr__(name, value)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> _DataLoaderIter:
        """A new pass; with ``persistent_workers`` the same workers serve every pass."""
        if not self.persistent_workers:
            return _DataLoaderIter(self)
        if self._iterator is None:
            self._iterator = _DataLoaderIter(self)
        else:
            self._iterator._reset()
        return self._iterator

    def __len__(self) -> int:
        """Batches per epoch; for an iterable dataset, derived from ``len(dataset)``."""
        if self._dataset_kind is _DatasetKind.Map:
            return len(self._index_sampler)
        length = len(self.dataset)  # type: ignore[arg-type]
        if self.batch_size is None:
            return length
        return length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)


class _Worker:
    """One loading worker: its ``WorkerInfo`` (None when loading in the loader itself),
    its dataset and the fetcher reading from it."""

    __slots__ = ("dataset", "fetcher", "info")

    def __init__(self, loader: DataLoader, info: WorkerInfo | None) -> None:
        self.info = info
        self.dataset = loader.dataset if info is None else info.dataset
        self.fetcher: MapDatasetFetcher | IterableDatasetFetcher | None = None
        if info is not None and loader.worker_init_fn is not None:
            with as_worker(info):
                loader.worker_init_fn(info.id)

    def _context(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext() if self.info is None else as_worker(self.info)

    def start(self, loader: DataLoader) -> None:
        """Begin a pass: an iterable dataset is iterated afresh."""
        fetcher_type = (
            MapDatasetFetcher
            if loader._dataset_kind is _DatasetKind.Map
            else IterableDatasetFetcher
        )
        with self._context():
            self.fetcher = fetcher_type(
                self.dataset, loader._auto_collation, loader.collate_fn, loader.drop_last
            )

    def fetch(self, index: Any) -> Any:
        assert self.fetcher is not None
        with self._context():
            return self.fetcher.fetch(index)


def _make_workers(loader: DataLoader, base_seed: int) -> list[_Worker]:
    """The loader's workers; each of ``num_workers`` gets a shallow copy of the dataset,
    as a worker process gets its own dataset object."""
    if loader.num_workers == 0:
        return [_Worker(loader, None)]
    return [
        _Worker(
            loader,
            WorkerInfo(
                id=i,
                num_workers=loader.num_workers,
                seed=base_seed + i,
                dataset=copy.copy(loader.dataset),
            ),
        )
        for i in range(loader.num_workers)
    ]


class _DataLoaderIter:
    """One pass over a DataLoader: indices from the sampler, batches from the workers in turn.

    Batch ``i`` goes to the next worker in round-robin order, as torch hands out its tasks;
    a worker whose iterable dataset runs dry leaves the rotation, and the pass ends when
    the sampler or every worker is spent.
    """

    def __init__(self, loader: DataLoader) -> None:
        self._loader = loader
        self._sampler_iter = iter(loader._index_sampler)
        base_seed = draw_seed(loader.generator)  # one draw per pass, as torch's loader does
        if loader.pin_memory:
            warnings.warn(
                "'pin_memory' argument is set as true but no accelerator is found, "
                "then device pinned memory won't be used.",
                stacklevel=3,
            )
        self._workers = _make_workers(loader, base_seed)
        self._start_pass()

    def _reset(self) -> None:
        """Serve another pass with the same workers (``persistent_workers``)."""
        self._sampler_iter = iter(self._loader._index_sampler)
        self._start_pass()

    def _start_pass(self) -> None:
        for worker in self._workers:
            worker.start(self._loader)
        self._active = list(self._workers)
        self._turn = 0

    def __iter__(self) -> _DataLoaderIter:
        return self

    def __len__(self) -> int:
        return len(self._loader._index_sampler)

    def __next__(self) -> Any:
        while self._active:
            index = next(self._sampler_iter)
            position = self._turn % len(self._active)
            try:
                data = self._active[position].fetch(index)
            except StopIteration:
                del self._active[position]
                self._turn = position
                continue
            self._turn = position + 1
            return data
        raise StopIteration
