"""``torch.amp`` as on a machine without a GPU: a GradScaler that disables itself.

Mixed precision programs build ``GradScaler()`` (for CUDA) unconditionally and route the loss
and the step through it. Without CUDA torch warns and disables the scaler, which then passes
everything through unchanged; hookgrad does the same, so such programs run and give the
numbers of the unscaled step. A scaler asked to scale on the CPU is refused: hookgrad's loss
scaling is the ``grad_scale`` plugin. ``autocast`` on the CPU computes torch's lower-precision
ops in bfloat16 or float16: see :mod:`hookgrad.amp.autocast_mode`.
"""

from __future__ import annotations

from .autocast_mode import autocast, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "is_autocast_available"]
