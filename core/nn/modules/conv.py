"""``Conv1d``, ``Conv2d`` and ``ConvTranspose2d``: stride, zero padding, dilation and groups."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

from ..._creation import empty
from ..._tensor import Tensor
from .. import functional as F
from .. import init
from .._ops.conv import pair
from ..functional import conv1d, conv2d, conv_transpose2d
from ..parameter import Parameter
from .module import Module

__all__ = ["Conv1d", "Conv2d", "ConvTranspose2d"]


def _check_options(
    in_channels: int, out_channels: int, groups: int, padding_mode: str, transposed: bool, name: str
) -> None:
    if groups <= 0:
        raise ValueError("groups must be a positive integer")
    if in_channels % groups:
        raise ValueError("in_channels must be divisible by groups")
    if out_channels % groups:
        raise ValueError("out_channels must be divisible by groups")
    if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
        raise ValueError(
            "padding_mode must be one of {'zeros', 'replicate', 'circular', 'reflect'}, but got "
            f"padding_mode={padding_mode!r}"
        )
    if padding_mode != "zeros" and transposed:
        raise ValueError(f'Only "zeros" padding mode is supported for {name}')


def _check_padding_string(padding: str, stride: tuple[int, ...]) -> None:
    """torch's checks of ``padding="same"``/``"valid"`` at construction (ValueError)."""
    if padding not in ("same", "valid"):
        raise ValueError(
            f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}"
        )
    if padding == "same" and any(s != 1 for s in stride):
        raise ValueError("padding='same' is not supported for strided convolutions")


def _single(value: Any, name: str = "value") -> tuple[int]:
    """``3`` -> ``(3,)``; a 1-sequence is kept."""
    if isinstance(value, (tuple, list)):
        return (int(value[0]),)
    return (int(value),)


def _reversed_padding(
    padding: Any, kernel: tuple[int, ...], dilation: tuple[int, ...]
) -> list[int]:
    """torch's ``_reversed_padding_repeated_twice``: ``F.pad``'s (left, right) pairs, last dim
    first ('same' splits an odd total with the extra zero on the right)."""
    if isinstance(padding, str):
        pads = [0, 0] * len(kernel)
        if padding == "same":
            for i, (d, k) in enumerate(zip(dilation[::-1], kernel[::-1])):
                total = d * (k - 1)
                pads[2 * i], pads[2 * i + 1] = total // 2, total - total // 2
        return pads
    return [p for p in padding[::-1] for _ in range(2)]


class _ConvNd(Module):
    """Options, parameters and initialisation shared by the convolution modules.

    A convolution's weight is ``(out, in / groups, *kernel)``, a transposed one's
    ``(in, out / groups, *kernel)``; both start as torch's: kaiming_uniform_(a=sqrt(5)),
    bias U(+-1/sqrt(fan_in)).
    """

    _dims: int

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        transposed: bool,
        output_padding: Any,
        groups: int,
        bias: bool,
        padding_mode: str,
        device: Any,
        dtype: Any,
    ) -> None:
        super().__init__()
        _check_options(
            in_channels, out_channels, groups, padding_mode, transposed, type(self).__name__
        )
        as_tuple = pair if self._dims == 2 else _single
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = as_tuple(kernel_size, "kernel_size")
        self.stride = as_tuple(stride, "stride")
        if isinstance(padding, str) and not transposed:
            _check_padding_string(padding, self.stride)
        self.padding: Any = padding if isinstance(padding, str) else as_tuple(padding, "padding")
        self.dilation = as_tuple(dilation, "dilation")
        self.transposed = transposed
        self.output_padding = as_tuple(output_padding, "output_padding")
        self.groups = groups
        self.padding_mode = padding_mode
        self._reversed_padding_repeated_twice = _reversed_padding(
            self.padding, self.kernel_size, self.dilation
        )
        channels = (in_channels, out_channels // groups) if transposed else (
            out_channels, in_channels // groups
        )  # fmt: skip
        shape = (*channels, *self.kernel_size)
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

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        n = self._dims
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _pad_input(self, input: Tensor) -> tuple[Tensor, Any]:
        """``(input, padding)`` for the convolution: with a padding mode other than zeros the
        input is padded first (``F.pad``) and the convolution pads nothing, as torch's."""
        if self.padding_mode == "zeros":
            return input, self.padding
        padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
        return padded, 0


class _Conv(_ConvNd):
    """A forward convolution layer: Conv1d and Conv2d differ only in ``_dims`` and the
    functional they call (``_conv``)."""

    _conv: ClassVar[Callable[..., Tensor]]

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
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0,
            groups, bias, padding_mode, device, dtype,
        )  # fmt: skip

    def forward(self, input: Tensor) -> Tensor:
        input, padding = self._pad_input(input)
        return self._conv(
            input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups
        )


class Conv1d(_Conv):
    """Apply ``out_channels`` filters of length ``kernel_size`` over ``(N, C, L)`` input."""

    _dims = 1
    _conv = staticmethod(conv1d)


class Conv2d(_Conv):
    """Apply ``out_channels`` filters of size ``kernel_size`` over ``(N, C, H, W)`` input."""

    _dims = 2
    _conv = staticmethod(conv2d)


class ConvTranspose2d(_ConvNd):
    """The gradient of a Conv2d with respect to its input, as a layer (a "deconvolution")."""

    _dims = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, True,
            output_padding, groups, bias, padding_mode, device, dtype,
        )  # fmt: skip

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        output_padding = self._output_padding(input, output_size)
        return conv_transpose2d(
            input, self.weight, self.bias, self.stride, self.padding, output_padding,
            self.groups, self.dilation,
        )  # fmt: skip

    def _output_padding(self, input: Tensor, output_size: Any) -> tuple[int, ...]:
        """The output padding that makes the output ``output_size`` (torch's range check)."""
        if output_size is None:
            return self.output_padding
        batched = input.dim() == 4
        leading = 2 if batched else 1
        sizes = output_size
        if len(sizes) == leading + 2:
            sizes = sizes[leading:]
        if len(sizes) != 2:
            raise ValueError(
                f"ConvTranspose2D: for {input.dim()}D input, output_size must have 2 "
                f"or {leading + 2} elements (got {len(sizes)})"
            )
        low = [
            (input.shape[d + leading] - 1) * s - 2 * p + dil * (k - 1) + 1
            for d, (s, p, dil, k) in enumerate(
                zip(self.stride, self.padding, self.dilation, self.kernel_size)
            )
        ]
        high = [m + s - 1 for m, s in zip(low, self.stride)]
        for size, lo, hi in zip(sizes, low, high):
            if not lo <= size <= hi:
                raise ValueError(
                    f"requested an output size of {sizes}, but valid sizes range "
                    f"from {low} to {high} (for an input of {input.shape[2:]})"
                )
        return tuple(size - lo for size, lo in zip(sizes, low))
