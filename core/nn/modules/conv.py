"""``Conv2d``: 2-D cross-correlation with stride, zero padding, dilation and groups."""

from __future__ import annotations

import math
from typing import Any

from ..._creation import empty
from ..._tensor import Tensor
from .. import init
from .._ops.conv import pair
from ..functional import conv2d
from ..parameter import Parameter
from .module import Module

__all__ = ["Conv2d"]


def _check_options(in_channels: int, out_channels: int, groups: int, padding_mode: str) -> None:
    if groups <= 0:
        raise ValueError("groups must be a positive integer")
    if in_channels % groups:
        raise ValueError("in_channels must be divisible by groups")
    if out_channels % groups:
        raise ValueError("out_channels must be divisible by groups")
    if padding_mode != "zeros":
        raise NotImplementedError(
            f"Conv2d: only padding_mode='zeros' is supported, got {padding_mode!r}"
        )


def _check_padding_string(padding: str, stride: tuple[int, int]) -> None:
    """torch's checks of ``padding="same"``/``"valid"`` at construction (ValueError)."""
    if padding not in ("same", "valid"):
        raise ValueError(
            f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}"
        )
    if padding == "same" and stride != (1, 1):
        raise ValueError("padding='same' is not supported for strided convolutions")


class Conv2d(Module):
    """Apply ``out_channels`` filters of size ``kernel_size`` over ``(N, C, H, W)`` input."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        _check_options(in_channels, out_channels, groups, padding_mode)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = pair(kernel_size, "kernel_size")
        self.stride = pair(stride, "stride")
        if isinstance(padding, str):
            _check_padding_string(padding, self.stride)
        self.padding: str | tuple[int, int] = (
            padding if isinstance(padding, str) else pair(padding, "padding")
        )
        self.dilation = pair(dilation, "dilation")
        self.groups = groups
        self.padding_mode = padding_mode
        self.output_padding = (0, 0)
        self.transposed = False
        shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(empty(shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's default: kaiming_uniform_(a=sqrt(5)) weight, U(+-1/sqrt(fan_in)) bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return conv2d(
            input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s
