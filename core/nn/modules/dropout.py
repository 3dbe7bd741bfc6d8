"""``Dropout`` (elements) and ``Dropout1d``/``Dropout2d`` (whole channels): zero with
probability ``p`` in training mode, identity in eval."""

from __future__ import annotations

from ..._tensor import Tensor
from ..functional import dropout, dropout1d, dropout2d
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d"]


class Dropout(Module):
    """Randomly zero elements (probability ``p``) and scale the kept ones by ``1/(1-p)``."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    """Randomly zero whole channels of ``(N, C, L)`` input and scale the rest by ``1/(1-p)``."""

    def forward(self, input: Tensor) -> Tensor:
        return dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """Randomly zero whole channels of ``(N, C, H, W)`` input and scale the rest."""

    def forward(self, input: Tensor) -> Tensor:
        return dropout2d(input, self.p, self.training, self.inplace)
