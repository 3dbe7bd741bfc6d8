"""``torch.cuda.amp``: the deprecated CUDA spellings of ``torch.amp``'s autocast and
GradScaler, still in many training scripts. Each warns torch's FutureWarning, then behaves as
``torch.amp``'s class for ``"cuda"`` on a machine without CUDA: disabled."""

from __future__ import annotations

from typing import Any

from ._deprecated import warn_deprecated
from .autocast_mode import autocast as _autocast
from .grad_scaler import GradScaler as _GradScaler

__all__ = ["GradScaler", "autocast"]


class autocast(_autocast):
    """``torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)``."""

    def __init__(self, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> None:
        warn_deprecated("cuda", "autocast")
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``torch.cuda.amp.GradScaler(...)``: torch.amp.GradScaler("cuda", ...)."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        warn_deprecated("cuda", "GradScaler")
        super().__init__(
            "cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled
        )
