"""Activation modules; each forward calls its elementwise op directly."""

from __future__ import annotations

from ..._ops import reduce as _reduce
from ..._tensor import Tensor
from .. import functional as F
from ..functional import _implicit_dim
from .module import Module

__all__ = ["GELU", "LeakyReLU", "LogSoftmax", "ReLU", "Sigmoid", "Softmax", "Tanh"]


class ReLU(Module):
    """``max(x, 0)`` elementwise."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        if self.inplace:
            return input.relu_()
        return F.relu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """``x`` where positive, ``negative_slope * x`` elsewhere."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        if self.inplace:
            return F.leaky_relu(input, self.negative_slope, inplace=True)
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"negative_slope={self.negative_slope}{inplace}"


class Tanh(Module):
    """Hyperbolic tangent elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class Sigmoid(Module):
    """Logistic sigmoid elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class GELU(Module):
    """Gaussian error linear unit (``approximate='tanh'`` for the tanh form)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    """Softmax along ``dim`` (torch's legacy implicit choice, with a warning, when None)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        dim = _implicit_dim("softmax", input.ndim) if self.dim is None else self.dim
        return _reduce.softmax(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim`` (torch's legacy implicit choice, with a warning, when None)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        dim = _implicit_dim("log_softmax", input.ndim) if self.dim is None else self.dim
        return _reduce.log_softmax(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
