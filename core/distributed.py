"""``torch.distributed`` for programs that only ask: hookgrad has no process groups.

``is_available()`` is False, so code written as ``if dist.is_available() and
dist.is_initialized()`` takes its single-process path; every collective needs torch (run the
model on torch, with hookgrad's torch engine, for distributed training).
"""

from __future__ import annotations

__all__ = ["get_rank", "get_world_size", "is_available", "is_initialized"]

_NO_GROUP = (
    "Default process group has not been initialized, please make sure to call init_process_group."
)


def is_available() -> bool:
    return False


def is_initialized() -> bool:
    return False


def get_rank() -> int:
    raise ValueError(_NO_GROUP)


def get_world_size() -> int:
    raise ValueError(_NO_GROUP)
