"""``torch.cuda`` as on a CPU-only build of torch: no device, seeding accepted, use refused.

Programs probe CUDA before choosing a device (``"cuda" if torch.cuda.is_available() else
"cpu"``) and seed it unconditionally; both work here as on torch without CUDA. Whatever needs a
device raises the AssertionError torch raises there, naming what is missing.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

from .amp import _cuda as amp

# ``from torch.cuda.amp import GradScaler`` must work although this module is no package.
sys.modules[f"{__name__}.amp"] = amp

__all__ = [
    "amp",
    "current_device",
    "device_count",
    "empty_cache",
    "get_device_name",
    "is_available",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "set_device",
    "synchronize",
]

_NOT_COMPILED = "Torch not compiled with CUDA enabled"


def is_available() -> bool:
    """False: hookgrad computes on the CPU."""
    return False


def is_initialized() -> bool:
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Accepted and ignored, as torch without CUDA queues it for a device that never comes."""


def manual_seed_all(seed: int) -> None:
    """Accepted and ignored (see :func:`manual_seed`)."""


def empty_cache() -> None:
    """Nothing is cached: a no-op, as in torch before CUDA is initialised."""


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise AssertionError(_NOT_COMPILED)


current_device = synchronize = get_device_name = set_device = _refuse
