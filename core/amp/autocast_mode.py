"""``torch.autocast`` / ``torch.amp.autocast`` without lower-precision kernels.

hookgrad computes in the dtypes of its inputs; it has no autocast op lists (torch's CPU
autocast runs matmul, linear and conv in bfloat16 and keeps losses in float32). So:

* ``enabled=False`` is a no-op context and decorator, as in torch (the usual
  ``autocast(device_type, enabled=use_amp)`` runs unchanged);
* a CUDA autocast warns and disables itself, as torch does on a machine without CUDA;
* an enabled CPU autocast with an unsupported dtype warns and disables itself, as in torch;
* an enabled CPU autocast to bfloat16/float16 raises NotImplementedError on entry rather than
  silently computing in float32 where torch would round to bfloat16.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from .._dtype import resolve_dtype

__all__ = ["autocast", "is_autocast_available"]

_F = TypeVar("_F", bound=Callable[..., Any])
_CPU_DTYPES = ("bfloat16", "float16")


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast can run on ``device_type``: never, in hookgrad (see module doc)."""
    return False


class autocast:
    """torch's autocast signature; enabled only where hookgrad cannot honour it (raises)."""

    def __init__(
        self,
        device_type: str,
        dtype: Any = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = device_type
        self.fast_dtype: np.dtype[Any] | None = None
        if device_type == "cpu":
            self.fast_dtype = resolve_dtype("bfloat16" if dtype is None else dtype)
        self._enabled = enabled and self._supported(device_type, dtype)

    def _supported(self, device_type: str, dtype: Any) -> bool:
        if device_type == "cuda":
            warnings.warn(
                "CUDA is not available or torch_xla is imported. Disabling autocast.",
                UserWarning,
                stacklevel=3,
            )
            return False
        if device_type != "cpu":
            raise RuntimeError(
                f"User specified an unsupported autocast device_type '{device_type}'"
            )
        if getattr(self.fast_dtype, "name", None) not in _CPU_DTYPES:
            warnings.warn(
                "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                UserWarning,
                stacklevel=3,
            )
            return False
        return True

    def __enter__(self) -> None:
        if self._enabled:
            raise NotImplementedError(
                f"hookgrad has no mixed precision: autocast on the CPU to "
                f"torch.{self.fast_dtype} (matmul, linear and conv in lower precision) is not "
                "supported. Run without autocast (or with enabled=False) to compute in float32, "
                "or train on torch with hookgrad's torch engine."
            )

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, func: _F) -> _F:
        @functools.wraps(func)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return decorated  # type: ignore[return-value]
