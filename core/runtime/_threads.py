"""Whose work a runtime acts on: the thread that started it, or every thread.

The engine's global hooks are process-wide: a module call, a backward pass or an optimizer
step of any thread runs every registered hook. So each runtime callback (the bridge's module
hooks and call records, the backward observer, the step gate and post hook, the root spotter)
begins with one owner check, :func:`current_thread` compared with what the runtime recorded
when it started. With ``threads="starter"`` (the default) a runtime acts only on the work of
the thread that started it, so two threads each with their own runtime never see each other's
models; ``threads="all"`` shares the runtime with every thread, each with its own calls in
progress (names, call indices, backward records).

Backward events belong to the thread that made the forward call: a record bound in one
thread does nothing when a backward runs it in another. hookgrad's engine runs backward in
the calling thread; an engine that runs backward hooks on worker threads would provide the
key of the thread that built the graph here, in this one place.
"""

from __future__ import annotations

from threading import get_ident
from typing import Final, Literal, TypeAlias

__all__ = ["THREAD_POLICIES", "ThreadPolicy", "check_policy", "current_thread"]

ThreadPolicy: TypeAlias = Literal["starter", "all"]
"""``"starter"``: the thread that started the runtime only; ``"all"``: every thread."""

THREAD_POLICIES: Final = ("starter", "all")

current_thread: Final = get_ident
"""The key of the thread whose work a callback sees (one C call: the owner check's cost)."""


def check_policy(threads: str) -> ThreadPolicy:
    """``threads`` if it is a policy, else a ValueError naming the valid ones."""
    if threads not in THREAD_POLICIES:
        raise ValueError(f"threads must be one of {THREAD_POLICIES}, got {threads!r}")
    return threads  # type: ignore[return-value]
