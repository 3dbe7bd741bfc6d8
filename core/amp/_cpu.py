"""``torch.cpu.amp``: the deprecated CPU spellings of ``torch.amp``'s autocast and GradScaler.
Each warns torch's FutureWarning, then is ``torch.amp``'s class for ``"cpu"``: the autocast
computes as ``torch.autocast("cpu")`` (bfloat16 by default), the GradScaler refuses as
``torch.amp.GradScaler("cpu")`` does in hookgrad (loss scaling is the grad_scale plugin)."""

from __future__ import annotations

from typing import Any

from .._dtype import resolve_dtype
from ._deprecated import warn_deprecated
from .autocast_mode import autocast as _autocast
from .grad_scaler import GradScaler as _GradScaler

__all__ = ["GradScaler", "autocast"]


class autocast(_autocast):
    """``torch.cpu.amp.autocast(enabled=True, dtype=torch.bfloat16, cache_enabled=True)``
    (``dtype=None`` is bfloat16: ml_dtypes is imported only when bfloat16 is used)."""

    def __init__(self, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> None:
        warn_deprecated("cpu", "autocast")
        dtype = resolve_dtype("bfloat16") if dtype is None else dtype
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``torch.cpu.amp.GradScaler(...)``: torch.amp.GradScaler("cpu", ...)."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        warn_deprecated("cpu", "GradScaler")
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
