"""``torch.backends`` flags that programs set or query, as on a CPU-only build of torch.

Setting ``cudnn.benchmark`` or ``cudnn.deterministic`` is accepted and changes nothing (there
is no cuDNN); ``cudnn.is_available()`` and ``mps.is_available()`` are False.
"""

from __future__ import annotations

from . import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
