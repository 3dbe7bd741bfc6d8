"""``torch.accelerator`` as on a CPU-only build of torch: no accelerator, so programs that
pick their device with ``torch.accelerator.is_available()`` (pytorch/examples' MNIST, VAE,
forward-forward, ...) choose the CPU; whatever needs a device raises torch's RuntimeError."""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = [
    "current_accelerator",
    "current_device_index",
    "current_stream",
    "device_count",
    "empty_cache",
    "is_available",
    "max_memory_allocated",
    "memory_allocated",
    "set_device_index",
    "synchronize",
]

_NONE = "Cannot access accelerator device when none is available."


def is_available() -> bool:
    """False: hookgrad computes on the CPU."""
    return False


def device_count() -> int:
    """0 accelerators."""
    return 0


def current_accelerator(check_available: bool = False) -> None:
    """None: there is no accelerator."""
    return None


def _refuse(*args: Any, **kwargs: Any) -> NoReturn:
    raise RuntimeError(_NONE)


def set_device_index(device: Any, /) -> NoReturn:
    """Refused as in torch without an accelerator."""
    _refuse()


current_device_index = current_stream = synchronize = empty_cache = _refuse
memory_allocated = max_memory_allocated = _refuse
