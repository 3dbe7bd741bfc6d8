"""The disabled GradScaler of a machine without CUDA (see :mod:`hookgrad.amp`)."""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

__all__ = ["GradScaler"]

T = TypeVar("T")


class GradScaler:
    """torch.amp.GradScaler's interface, always disabled: scale() and unscale_() change
    nothing, step() is ``optimizer.step()``, update() does nothing, the scale reads 1.0."""

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        if enabled and device == "cpu":
            raise NotImplementedError(
                "hookgrad has no loss scaling on the CPU through GradScaler: enable the "
                "grad_scale plugin ([plugins.grad_scale] in hookgrad.toml) instead"
            )
        if enabled:
            warnings.warn(
                f"torch.{device}.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                UserWarning,
                stacklevel=2,
            )
        self._device = device

    def scale(self, outputs: T) -> T:
        return outputs

    def unscale_(self, optimizer: Any) -> None:
        return None

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: Any = None) -> None:
        return None

    def get_scale(self) -> float:
        return 1.0

    def is_enabled(self) -> bool:
        return False

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        return None
