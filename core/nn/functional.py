"""``hookgrad.nn.functional``: the functional forms of the layers and losses, as torch's.

Activations call the elementwise ops of ``hookgrad._ops`` directly; the layers with a fused
backward node (linear, conv2d, layer_norm, embedding, dropout, the losses) live in
``hookgrad.nn._ops`` and are re-exported here.
"""

from __future__ import annotations

import warnings
from typing import Any

from .._ops import reduce as _reduce
from .._ops import unary as _unary
from .._ops._base import public_op
from .._ops.index import one_hot
from .._ops.inplace import apply_inplace
from .._tensor import Tensor
from ._ops.activation import (
    celu,
    elu,
    hardsigmoid,
    hardswish,
    hardtanh,
    logsigmoid,
    mish,
    prelu,
    relu6,
    selu,
    silu,
    softmin,
    softplus,
    softsign,
    tanhshrink,
)
from ._ops.conv import conv1d, conv2d, pad
from ._ops.conv_transpose import conv_transpose2d
from ._ops.dropout import dropout, dropout1d, dropout2d
from ._ops.linear import linear
from ._ops.loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from ._ops.normalization import batch_norm, group_norm, instance_norm, layer_norm
from ._ops.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
)
from ._ops.sparse import embedding
from ._ops.upsampling import interpolate

__all__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv2d",
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "mse_loss",
    "nll_loss",
    "one_hot",
    "pad",
    "relu",
    "sigmoid",
    "smooth_l1_loss",
    "softmax",
    "tanh",
]
__all__ += [  # the layers of issue #16, kept together
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "batch_norm",
    "celu",
    "conv1d",
    "conv_transpose2d",
    "dropout1d",
    "dropout2d",
    "elu",
    "group_norm",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "instance_norm",
    "interpolate",
    "logsigmoid",
    "max_pool1d",
    "max_pool2d",
    "mish",
    "prelu",
    "relu6",
    "selu",
    "silu",
    "softmin",
    "softplus",
    "softsign",
    "tanhshrink",
]


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(input, 0)``; with ``inplace`` the input is overwritten and returned."""
    if inplace:
        return input.relu_()
    return _unary.relu(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``input`` where positive, ``negative_slope * input`` elsewhere."""
    if inplace:
        return apply_inplace(input, lambda s: _unary.leaky_relu(s, negative_slope), None)
    return _unary.leaky_relu(input, negative_slope)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit, exact (erf) or with the tanh approximation."""
    return _unary.gelu(input, approximate)


def tanh(input: Tensor) -> Tensor:
    return _unary.tanh(input)


def sigmoid(input: Tensor) -> Tensor:
    return _unary.sigmoid(input)


def _implicit_dim(name: str, ndim: int) -> int:
    """torch's legacy choice when ``dim`` is omitted, with its deprecation warning."""
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
        UserWarning,
        stacklevel=3,
    )
    return 0 if ndim in (0, 1, 3) else 1


def _cast(input: Tensor, dtype: Any) -> Tensor:
    return input if dtype is None else input.to(dtype)


def softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``."""
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim)
    return _reduce.softmax(_cast(input, dtype), dim)


def log_softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """``log(softmax(x))`` along ``dim``, computed stably."""
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim)
    return _reduce.log_softmax(_cast(input, dtype), dim)


# Every function above as a public function form: a first argument that is not a Tensor is
# torch's TypeError (see public_op), checked only after the call failed.
globals().update(
    {name: public_op(value) for name, value in tuple(globals().items()) if name in __all__}
)

# -- attention (issue #16, "seq") --------------------------------------------------------------
from ._ops.attention import scaled_dot_product_attention  # noqa: E402
from ._ops.multi_head_attention import multi_head_attention_forward  # noqa: E402

__all__ += ["multi_head_attention_forward", "scaled_dot_product_attention"]
scaled_dot_product_attention = public_op(scaled_dot_product_attention)
multi_head_attention_forward = public_op(multi_head_attention_forward)

from ._ops.pixelshuffle import pixel_shuffle, pixel_unshuffle  # noqa: E402

__all__ += ["pixel_shuffle", "pixel_unshuffle"]
