"""Utilities mirroring ``torch.utils``: hook handles live in :mod:`hookgrad.utils.hooks`."""

from . import hooks

__all__ = ["hooks"]
