"""Utilities mirroring ``torch.utils``: hook handles in :mod:`hookgrad.utils.hooks`, datasets
and the DataLoader in :mod:`hookgrad.utils.data`."""

from __future__ import annotations

import importlib
from types import ModuleType

from . import hooks

__all__ = ["data", "hooks", "safetensors"]


def __getattr__(name: str) -> ModuleType:
    """``hookgrad.utils.data`` and ``.safetensors`` on first access (PEP 562):
    ``hookgrad._tensor`` imports this package for its hook handles, before their own imports
    can be resolved."""
    if name in ("data", "safetensors"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
