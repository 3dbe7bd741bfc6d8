"""``hookgrad.nn.init``: in-place weight initialisation, as ``torch.nn.init``.

Every function writes the tensor's array directly (nothing is recorded, as under
``no_grad``), bumps its version counter and returns the tensor. Random draws come from
``hookgrad.default_generator`` unless a ``generator`` is given, so ``manual_seed`` makes
initialisation reproducible.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .._creation import Generator, default_generator
from .._ops.inplace import bump
from .._random_stream import TorchStream
from .._tensor import Tensor

__all__ = [
    "calculate_gain",
    "constant_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]

_LINEAR_FNS = (
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "sigmoid",
)


def _rng(generator: Generator | None) -> TorchStream:
    return (generator or default_generator).stream


def _write(tensor: Tensor, values: Any) -> Tensor:
    """Store ``values`` into ``tensor`` in place (cast to its dtype) and count the write."""
    tensor._data[...] = values
    return bump(tensor)


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (``param``: leaky_relu's negative slope)."""
    if nonlinearity in _LINEAR_FNS:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(in * receptive field, out * receptive field)`` of a weight shaped ``(out, in, ...)``."""
    shape = tensor._data.shape
    if len(shape) < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _no_op_for_empty(tensor: Tensor) -> bool:
    if tensor._data.size == 0:
        warnings.warn("Initializing zero-element tensors is a no-op", UserWarning, stacklevel=3)
        return True
    return False


def uniform_(
    tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None
) -> Tensor:
    """Fill with draws from U(a, b)."""
    return _write(tensor, _rng(generator).uniform(tensor._data.shape, tensor._data.dtype, a, b))


def normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None
) -> Tensor:
    """Fill with draws from N(mean, std**2)."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    return _write(tensor, _rng(generator).normal(tensor._data.shape, tensor._data.dtype, mean, std))


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Generator | None = None,
) -> Tensor:
    """Fill with N(mean, std**2) draws redrawn until they fall in [a, b]."""
    rng = _rng(generator)
    values = rng.normal(tensor._data.shape, np.float64, mean, std)
    outside = (values < a) | (values > b)
    while outside.any():
        values[outside] = rng.normal((int(outside.sum()),), np.float64, mean, std)
        outside = (values < a) | (values > b)
    return _write(tensor, values)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    return _write(tensor, val)


def ones_(tensor: Tensor) -> Tensor:
    return _write(tensor, 1)


def zeros_(tensor: Tensor) -> Tensor:
    return _write(tensor, 0)


def xavier_uniform_(
    tensor: Tensor, gain: float = 1.0, generator: Generator | None = None
) -> Tensor:
    """U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """N(0, std**2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """U(-b, b) with ``b = gain * sqrt(3 / fan)`` (He et al., 2015)."""
    if _no_op_for_empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """N(0, std**2) with ``std = gain / sqrt(fan)``."""
    if _no_op_for_empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1, generator: Generator | None = None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix (Saxe et al.), as torch: the Q of the QR of a
    normal draw of shape ``(rows, numel // rows)`` (transposed when wider than tall), its
    columns' signs fixed by R's diagonal, times ``gain``."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flattened = _rng(generator).normal((rows, cols), tensor._data.dtype, 0.0, 1.0)
    if rows < cols:
        flattened = flattened.T
    q, r = np.linalg.qr(flattened)
    q = q * np.sign(np.diagonal(r))
    if rows < cols:
        q = q.T
    return _write(
        tensor,
        (q.astype(tensor._data.dtype) * tensor._data.dtype.type(gain)).reshape(tensor._data.shape),
    )
