"""The latest records of a plugin, kept as the batches they were made in, built only when read.

A statistics plugin makes dozens of records per step; most of them are never read in memory
(the sinks, when there are any, get their own copies at once). Building each record's dict
cost more than the statistics themselves, so a plugin hands :class:`RecordRing` a
:class:`RecordBatch`, which holds the step's computed values and builds its dicts the first
time somebody reads them (``plugin.records``, a sink, the end-of-run table). The ring bounds
the number of *records* it holds, whatever the batch sizes, so a run of any length keeps a
bounded memory.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, overload

__all__ = ["RecordBatch", "RecordRing"]

Record = dict[str, Any]


class RecordBatch(Protocol):
    """Records made together; ``len`` must be known before they are built."""

    def __len__(self) -> int: ...

    def records(self) -> list[Record]:
        """The records (built on the first call, the same list on every later one)."""
        ...


class _Built:
    """A batch whose records already exist (a plugin's single record)."""

    __slots__ = ("_records",)

    def __init__(self, records: list[Record]) -> None:
        self._records = records

    def __len__(self) -> int:
        return len(self._records)

    def records(self) -> list[Record]:
        return self._records


class RecordRing(Sequence[Record]):
    """The latest ``maxlen`` records, oldest first, of the batches added (0 keeps none)."""

    __slots__ = ("_batches", "_count", "_skip", "maxlen")

    def __init__(self, maxlen: int) -> None:
        self.maxlen = maxlen
        self._batches: deque[RecordBatch] = deque()
        self._count = 0  # records in _batches, the dropped head of the oldest included
        self._skip = 0  # records of the oldest batch already dropped

    def add(self, batch: RecordBatch) -> None:
        """Keep ``batch``'s records; drop the oldest ones past ``maxlen``."""
        size = len(batch)
        if not size or not self.maxlen:
            return
        self._batches.append(batch)
        self._count += size
        excess = self._count - self._skip - self.maxlen
        while excess > 0:  # the ring is full: the oldest records go
            oldest = len(self._batches[0]) - self._skip
            if oldest > excess:
                self._skip += excess
                return
            self._count -= len(self._batches.popleft())
            self._skip = 0
            excess -= oldest

    def append(self, record: Record) -> None:
        """Keep one record made on its own."""
        self.add(_Built([record]))

    def clear(self) -> None:
        self._batches.clear()
        self._count = self._skip = 0

    def __len__(self) -> int:
        return self._count - self._skip

    def __iter__(self) -> Iterator[Record]:
        skip = self._skip
        for batch in list(self._batches):  # a copy: a hook may add while a reader iterates
            records = batch.records()
            yield from (records[skip:] if skip else records)
            skip = 0

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> list[Record]: ...

    def __getitem__(self, index: int | slice) -> Record | list[Record]:
        return list(self)[index]

    def __repr__(self) -> str:
        return f"RecordRing(<{len(self)} records, maxlen={self.maxlen}>)"
