"""Reading one batch (or one sample) from a dataset, as ``torch.utils.data._utils.fetch``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["IterableDatasetFetcher", "MapDatasetFetcher"]


class MapDatasetFetcher:
    """Index a map-style dataset: a list of indices with batching on, one key without."""

    def __init__(
        self, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any], drop_last: bool
    ) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn

    def fetch(self, possibly_batched_index: Any) -> Any:
        if not self.auto_collation:
            return self.collate_fn(self.dataset[possibly_batched_index])
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems:
            return self.collate_fn(getitems(possibly_batched_index))
        return self.collate_fn([self.dataset[i] for i in possibly_batched_index])


class IterableDatasetFetcher:
    """Take the next samples of an iterable dataset: as many as the batch has indices."""

    def __init__(
        self, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any], drop_last: bool
    ) -> None:
        self.dataset_iter: Iterator[Any] = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, possibly_batched_index: Any) -> Any:
        """The next batch; StopIteration once the stream is spent (or only a dropped tail is left)."""
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in possibly_batched_index:
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(possibly_batched_index)):
            raise StopIteration
        return self.collate_fn(data)
