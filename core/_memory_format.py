"""``torch.memory_format`` values, accepted wherever torch takes ``memory_format=``.

hookgrad keeps every tensor row-major, so a memory format changes no values and no layout:
``contiguous_format`` and ``preserve_format`` are exact, ``channels_last`` (rank 4) and
``channels_last_3d`` (rank 5) are checked for the rank torch requires and otherwise ignored
(``is_contiguous()`` keeps answering for the row-major layout).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "channels_last",
    "channels_last_3d",
    "check_memory_format",
    "contiguous_format",
    "memory_format",
    "preserve_format",
]


class memory_format:
    """One of torch's memory formats; prints as torch's (``torch.channels_last``)."""

    __slots__ = ("_name", "_rank")

    def __init__(self, name: str, rank: int | None = None) -> None:
        self._name = name
        self._rank = rank

    def __repr__(self) -> str:
        return f"torch.{self._name}"

    def __reduce__(self) -> str:
        return self._name


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last", 4)
channels_last_3d = memory_format("channels_last_3d", 5)


def check_memory_format(ndim: int, fmt: Any) -> None:
    """Refuse a channels-last format for a tensor of another rank, as torch does."""
    if fmt is None:
        return
    if not isinstance(fmt, memory_format):
        raise TypeError(f"memory_format must be torch.memory_format, not {type(fmt).__name__}")
    if fmt._rank is not None and ndim != fmt._rank:
        raise RuntimeError(f"required rank {fmt._rank} tensor to use {fmt._name} format")
