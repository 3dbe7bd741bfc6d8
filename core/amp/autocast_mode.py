"""``torch.autocast`` / ``torch.amp.autocast``: CPU autocast as torch's, CUDA disabled.

* An enabled CPU autocast to bfloat16 or float16 makes torch's CPU "lower_precision_fp" ops
  (matmul and its kin, linear, convolutions, prelu, scaled_dot_product_attention) compute in
  that dtype and its "fp32" ops (the losses, prod) in float32; everything else runs in its
  inputs' dtypes. The casts are differentiable, so float32 parameters get float32 gradients
  (see :mod:`hookgrad.amp._state`, which the ops read).
* Contexts nest as torch's: each saves the enabled flag, dtype and cache setting on entry and
  restores them on exit; leaving the outermost one clears the cache of casted parameters.
* ``enabled=False`` is a no-op context and decorator (inside an enabled one: a float32 island);
* a CUDA autocast warns and disables itself, as torch does on a machine without CUDA;
* a CPU autocast with an unsupported dtype warns and disables itself, as in torch.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from .._dtype import resolve_dtype
from ._state import clear_cache as clear_autocast_cache
from ._state import state

__all__ = [
    "autocast",
    "clear_autocast_cache",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_cache_enabled",
    "is_autocast_enabled",
]

_F = TypeVar("_F", bound=Callable[..., Any])
_CPU_DTYPES = ("bfloat16", "float16")
# torch's device types, in the order its device-string parser names them, and those of them
# torch has an autocast for (only "cpu" computes here; "cuda" disables itself, the others
# change nothing on a machine without them).
_DEVICE_TYPES = (
    "cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga",
    "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone",
)  # fmt: skip
_WITH_AUTOCAST = ("cpu", "cuda", "ipu", "xpu", "maia", "xla", "mps", "hpu", "mtia", "privateuseone")


def _device_type(device: str) -> str:
    """The type of a device string (``"cuda:0"`` -> ``"cuda"``), refused as torch's parser
    refuses an unknown one."""
    kind = device.split(":", 1)[0]
    if kind not in _DEVICE_TYPES:
        raise RuntimeError(
            f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start of device "
            f"string: {device}"
        )
    return kind


def is_autocast_available(device_type: str) -> bool:
    """Whether torch has an autocast for ``device_type`` (CUDA's then disables itself here)."""
    return _device_type(device_type) in _WITH_AUTOCAST


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """``torch.is_autocast_enabled(device_type)``; without an argument, CUDA's: always False."""
    return device_type is not None and _device_type(device_type) == "cpu" and state.enabled


def get_autocast_dtype(device_type: str) -> np.dtype[Any]:
    """The dtype an autocast on ``device_type`` computes in: torch's defaults until set."""
    kind = _device_type(device_type)
    if kind not in _WITH_AUTOCAST:
        raise RuntimeError("unsupported scalarType")
    if kind != "cpu":
        return np.dtype(np.float16)
    dtype = resolve_dtype("bfloat16") if state.dtype is None else state.dtype
    assert dtype is not None
    return dtype


def is_autocast_cache_enabled() -> bool:
    """Whether casted parameters are reused within an autocast region (default True)."""
    return state.cache_enabled


def _set_cpu(enabled: bool, dtype: np.dtype[Any] | None, cache_enabled: bool) -> None:
    state.enabled, state.dtype, state.cache_enabled = enabled, dtype, cache_enabled
    state.lower = dtype if enabled else None


class autocast:
    """torch's autocast: a context manager and decorator; computes on the CPU only."""

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
        # a dtype is a dtype: torch's names ("bfloat16") are not
        self.fast_dtype: Any = get_autocast_dtype(device_type) if dtype is None else dtype
        if not is_autocast_available(device_type):
            raise RuntimeError(
                f"User specified an unsupported autocast device_type '{device_type}'"
            )
        self._cache_enabled = (
            is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        )
        self._enabled = enabled and self._supported(device_type)
        self._previous: list[tuple[bool, np.dtype[Any] | None, bool]] = []

    def _supported(self, device_type: str) -> bool:
        if device_type == "cuda":
            warnings.warn(
                "CUDA is not available or torch_xla is imported. Disabling autocast.",
                UserWarning,
                stacklevel=3,
            )
            return False
        if device_type != "cpu":
            return False  # a device this machine does not have: nothing to compute on
        if not isinstance(self.fast_dtype, np.dtype) or self.fast_dtype.name not in _CPU_DTYPES:
            warnings.warn(
                "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                UserWarning,
                stacklevel=3,
            )
            return False
        return True

    def __enter__(self) -> autocast:
        state.nesting += 1
        if self.device == "cpu":
            if not isinstance(self.fast_dtype, np.dtype):
                state.nesting -= 1
                raise TypeError(
                    "set_autocast_dtype(): argument 'dtype' (position 2) must be torch.dtype, "
                    f"not {type(self.fast_dtype).__name__}"
                )
            self._previous.append((state.enabled, state.dtype, state.cache_enabled))
            _set_cpu(self._enabled, self.fast_dtype, self._cache_enabled)
        return self

    def __exit__(self, *exc: object) -> None:
        state.nesting -= 1
        if state.nesting == 0:
            clear_autocast_cache()
        if self.device == "cpu":
            _set_cpu(*self._previous.pop())

    def __call__(self, func: _F) -> _F:
        @functools.wraps(func)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return decorated  # type: ignore[return-value]
