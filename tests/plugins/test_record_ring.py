"""RecordRing: a plugin's latest records, kept as batches and built only when read."""

from __future__ import annotations

from collections import deque
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hookgrad.plugins._record_ring import RecordRing


class CountingBatch:
    """A batch of ``size`` records numbered from ``first``, counting how often it is built."""

    def __init__(self, first: int, size: int) -> None:
        self.first, self.size, self.builds = first, size, 0
        self._records: list[dict[str, Any]] | None = None

    def __len__(self) -> int:
        return self.size

    def records(self) -> list[dict[str, Any]]:
        if self._records is None:
            self.builds += 1
            self._records = [{"n": self.first + i} for i in range(self.size)]
        return self._records


@given(maxlen=st.integers(0, 12), sizes=st.lists(st.integers(0, 7), max_size=20))
def test_the_ring_holds_the_latest_maxlen_records_of_any_batches(
    maxlen: int, sizes: list[int]
) -> None:
    """Whatever the batch sizes, the ring reads as the last ``maxlen`` records, in order."""
    ring, expected, first = RecordRing(maxlen), deque[dict[str, Any]](maxlen=maxlen), 0
    for size in sizes:
        ring.add(CountingBatch(first, size))
        expected.extend({"n": first + i} for i in range(size))
        first += size
        assert len(ring) == len(expected)
    assert list(ring) == list(expected)
    if expected:
        assert ring[0] == expected[0] and ring[-1] == expected[-1]
        assert ring[1:3] == list(expected)[1:3]


def test_batches_are_built_once_and_only_when_read() -> None:
    """Adding costs no record; the first read builds each batch once, later reads reuse it."""
    ring = RecordRing(100)
    batches = [CountingBatch(10 * k, 3) for k in range(4)]
    for batch in batches:
        ring.add(batch)
    assert [b.builds for b in batches] == [0, 0, 0, 0]
    first = list(ring)
    assert [r["n"] for r in first] == [0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32]
    assert list(ring) == first and [b.builds for b in batches] == [1, 1, 1, 1]
    assert all(a is b for a, b in zip(ring, first))


def test_a_batch_wholly_past_the_bound_is_let_go() -> None:
    """Memory stays bounded: a batch with no record left among the latest is not kept."""
    ring = RecordRing(4)
    old = CountingBatch(0, 3)
    ring.add(old)
    ring.add(CountingBatch(3, 4))
    assert len(ring) == 4 and [r["n"] for r in ring] == [3, 4, 5, 6]
    assert old.builds == 0 and old not in ring._batches


def test_single_records_and_clear() -> None:
    """append keeps a ready record among the batches; clear forgets everything."""
    ring = RecordRing(3)
    ring.add(CountingBatch(0, 2))
    ring.append({"n": 99})
    ring.append({"n": 100})
    assert [r["n"] for r in ring] == [1, 99, 100]
    ring.clear()
    assert len(ring) == 0 and list(ring) == []
