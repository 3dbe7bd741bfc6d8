"""``Flatten``: merge dims ``start_dim..end_dim`` into one."""

from __future__ import annotations

from ..._ops import shape as _shape
from ..._tensor import Tensor
from .module import Module

__all__ = ["Flatten"]


class Flatten(Module):
    """Flatten dims ``start_dim`` to ``end_dim`` (by default all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return _shape.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
