"""Torch's argument checks for optimizer hyperparameters, with torch's messages."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor

__all__ = ["check_betas", "check_lr", "check_nonnegative"]


def check_lr(lr: Any) -> None:
    """A learning rate is a number or a one-element tensor, and not negative."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not lr >= 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")


def check_nonnegative(**values: Any) -> None:
    """Each ``name=value`` is >= 0, checked in the order given ("Invalid <name> value: ...").

    ``eps`` is reported as torch does, as "epsilon".
    """
    for name, value in values.items():
        if not value >= 0.0:
            label = "epsilon" if name == "eps" else name
            raise ValueError(f"Invalid {label} value: {value}")


def check_betas(betas: tuple[Any, Any]) -> None:
    """Both betas lie in [0, 1)."""
    for index, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {index}: {beta}")
