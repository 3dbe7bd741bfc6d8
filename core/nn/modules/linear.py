"""``Identity``, ``Linear`` and ``LazyLinear``."""

from __future__ import annotations

import math
from typing import Any, cast

from ..._creation import empty
from ..._grad_mode import no_grad
from ..._tensor import Tensor
from .. import init
from ..functional import linear
from ..parameter import Parameter
from .lazy import LazyModuleMixin, UninitializedParameter
from .module import Module

__all__ = ["Identity", "LazyLinear", "Linear"]


class Identity(Module):
    """Return the input unchanged; accepts and ignores any constructor arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight ``(out_features, in_features)``."""

    in_features: int
    out_features: int
    weight: Parameter

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's default: kaiming_uniform_(a=sqrt(5)) weight, U(+-1/sqrt(fan_in)) bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class LazyLinear(LazyModuleMixin, Linear):
    """A Linear whose ``in_features`` is the last dim of its first input; it becomes a
    ``Linear`` after that call (see :mod:`hookgrad.nn.modules.lazy`)."""

    cls_to_become = Linear

    def __init__(
        self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        """Linear's initialisation, once the parameters have their shapes."""
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        """Materialize ``weight`` as ``(out_features, input.shape[-1])`` and ``bias``."""
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                cast(UninitializedParameter, self.weight).materialize(
                    (self.out_features, self.in_features)
                )
                if self.bias is not None:
                    cast(UninitializedParameter, self.bias).materialize((self.out_features,))
                self.reset_parameters()
