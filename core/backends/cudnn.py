"""``torch.backends.cudnn``: its flags, with torch's defaults; no cuDNN behind them."""

from __future__ import annotations

__all__ = ["allow_tf32", "benchmark", "deterministic", "enabled", "is_available", "version"]

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False


def version() -> None:
    """None: no cuDNN library is loaded (torch's answer without one)."""
    return None
