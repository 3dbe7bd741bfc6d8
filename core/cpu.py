"""``torch.cpu``: the CPU as a device module, as torch keeps it (programs written for several
devices call ``torch.<device>.synchronize()`` or ``device_count()`` on whichever they run on),
and its deprecated ``torch.cpu.amp``."""

from __future__ import annotations

import sys
from typing import Any

from .amp import _cpu as amp

# ``from torch.cpu.amp import autocast`` must work although this module is no package.
sys.modules[f"{__name__}.amp"] = amp

__all__ = [
    "amp",
    "current_device",
    "device_count",
    "is_available",
    "is_initialized",
    "set_device",
    "synchronize",
]


def is_available() -> bool:
    """True: the CPU is always there."""
    return True


def is_initialized() -> bool:
    """True, as torch's."""
    return True


def device_count() -> int:
    """1, as torch's."""
    return 1


def current_device() -> str:
    """``"cpu"``."""
    return "cpu"


def set_device(device: Any) -> None:
    """Accepted and ignored, as torch's."""


def synchronize(device: Any = None) -> None:
    """Nothing to wait for: CPU work is done when the call returns."""
