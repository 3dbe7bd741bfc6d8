"""Process-wide switches for behaviour torch plans to change (``torch.__future__``).

Both concern what ``Module._apply`` (``.double()``, ``.to(dtype)``, ...) does to parameters:

- overwrite: give the module new Parameter objects (and new ``.grad`` tensors) instead of
  changing the existing ones in place;
- swap: keep the Parameter objects and swap their contents (torch's ``swap_tensors``), which
  is also how ``load_state_dict`` then fills them.

hookgrad's default already changes parameters in place and keeps their identity, which is
what swapping yields too, so only ``overwrite`` changes what hookgrad does.
"""

from __future__ import annotations

__all__ = [
    "get_overwrite_module_params_on_conversion",
    "get_swap_module_params_on_conversion",
    "set_overwrite_module_params_on_conversion",
    "set_swap_module_params_on_conversion",
]

_overwrite_module_params_on_conversion: bool = False
_swap_module_params_on_conversion: bool = False


def set_overwrite_module_params_on_conversion(value: bool) -> None:
    """Whether ``Module._apply`` assigns new Parameter objects instead of updating the old."""
    global _overwrite_module_params_on_conversion
    _overwrite_module_params_on_conversion = value


def get_overwrite_module_params_on_conversion() -> bool:
    """See :func:`set_overwrite_module_params_on_conversion` (default False)."""
    return _overwrite_module_params_on_conversion


def set_swap_module_params_on_conversion(value: bool) -> None:
    """Whether ``Module._apply`` and ``load_state_dict`` swap parameter contents in place,
    keeping the Parameter objects (takes precedence over overwrite)."""
    global _swap_module_params_on_conversion
    _swap_module_params_on_conversion = value


def get_swap_module_params_on_conversion() -> bool:
    """See :func:`set_swap_module_params_on_conversion` (default False)."""
    return _swap_module_params_on_conversion
