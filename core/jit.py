"""``torch.jit``'s decorators as eager pass-throughs: the decorated code runs as written.

In eager use a scripted function computes what the Python function computes, so
``script``, ``ignore``, ``unused`` and ``export`` return their argument; hookgrad compiles
nothing. ``trace`` and saving/loading TorchScript need torch.
"""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

__all__ = ["export", "ignore", "is_scripting", "script", "unused"]

F = TypeVar("F")


def script(obj: F, *_: Any, **__: Any) -> F:
    """``obj`` itself, with torch 2.13's deprecation warning."""
    warnings.warn(
        "`torch.jit.script` is deprecated. Please switch to `torch.compile` or `torch.export`.",
        DeprecationWarning,
        stacklevel=2,
    )
    return obj


def ignore(drop: Any = False, **_: Any) -> Any:
    """``@ignore`` and ``@ignore(drop=...)`` alike."""
    return drop if callable(drop) else (lambda fn: fn)


def unused(fn: F) -> F:
    return fn


def export(fn: F) -> F:
    return fn


def is_scripting() -> bool:
    return False
