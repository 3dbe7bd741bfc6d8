"""The FutureWarning of torch's deprecated per-device amp spellings (``torch.cuda.amp`` and
``torch.cpu.amp``), in torch's words."""

from __future__ import annotations

import warnings

__all__ = ["warn_deprecated"]


def warn_deprecated(device: str, name: str) -> None:
    """Warn that ``torch.<device>.amp.<name>(...)`` is deprecated, at the caller's caller (the
    line that built the object)."""
    warnings.warn(
        f"`torch.{device}.amp.{name}(args...)` is deprecated. Please use "
        f"`torch.amp.{name}('{device}', args...)` instead.",
        FutureWarning,
        stacklevel=3,
    )
