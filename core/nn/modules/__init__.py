"""The module classes of ``hookgrad.nn``, as ``torch.nn.modules``."""

from __future__ import annotations

from .activation import (
    CELU,
    ELU,
    GELU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softsign,
    Tanh,
    Tanhshrink,
)
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d, ConvTranspose2d
from .dropout import Dropout, Dropout1d, Dropout2d
from .flatten import Flatten
from .linear import Identity, LazyLinear, Linear
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import (
    Module,
    register_module_backward_hook,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    LayerNorm,
)
from .padding import (
    CircularPad1d,
    CircularPad2d,
    ConstantPad1d,
    ConstantPad2d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReplicationPad1d,
    ReplicationPad2d,
    ZeroPad1d,
    ZeroPad2d,
)
from .pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
)
from .sparse import Embedding
from .upsampling import Upsample

__all__ = [
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "CELU",
    "CircularPad1d",
    "CircularPad2d",
    "ConstantPad1d",
    "ConstantPad2d",
    "Conv1d",
    "Conv2d",
    "ConvTranspose2d",
    "CrossEntropyLoss",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "ELU",
    "Embedding",
    "Flatten",
    "GELU",
    "GroupNorm",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "Identity",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "L1Loss",
    "LayerNorm",
    "LazyLinear",
    "LeakyReLU",
    "Linear",
    "LogSigmoid",
    "LogSoftmax",
    "MSELoss",
    "MaxPool1d",
    "MaxPool2d",
    "Mish",
    "Module",
    "ModuleDict",
    "ModuleList",
    "PReLU",
    "ReLU6",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "SELU",
    "SiLU",
    "SmoothL1Loss",
    "NLLLoss",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Softmax",
    "Softmin",
    "Softplus",
    "Softsign",
    "Tanh",
    "Tanhshrink",
    "Upsample",
    "ZeroPad1d",
    "ZeroPad2d",
    "register_module_backward_hook",
    "register_module_forward_hook",
    "register_module_forward_pre_hook",
    "register_module_full_backward_hook",
    "register_module_full_backward_pre_hook",
]

# -- sequence models (issue #16, "seq") --------------------------------------------------------
from .attention import MultiheadAttention
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ += [
    "GRU",
    "GRUCell",
    "LSTM",
    "LSTMCell",
    "MultiheadAttention",
    "RNN",
    "RNNBase",
    "RNNCell",
    "RNNCellBase",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]

# -- modules the external real programs needed (issue #16, "realprogs") ------------------------
from .pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: E402

__all__ += ["PixelShuffle", "PixelUnshuffle"]
