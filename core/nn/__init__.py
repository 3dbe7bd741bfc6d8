"""Neural network layers, losses and initialisation, as ``torch.nn``.

``hookgrad.nn.Module`` keeps parameters, buffers and children in ordered dicts and routes
attribute assignment into them; ``hookgrad.nn.functional`` holds the functional forms, whose
layers record one fused graph node each.
"""

from __future__ import annotations

from . import functional, init, modules, parameter, utils
from .modules import (
    GELU,
    BCELoss,
    BCEWithLogitsLoss,
    Conv2d,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    L1Loss,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSoftmax,
    Module,
    ModuleDict,
    ModuleList,
    MSELoss,
    NLLLoss,
    ReLU,
    Sequential,
    Sigmoid,
    SmoothL1Loss,
    Softmax,
    Tanh,
    register_module_backward_hook,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from .parameter import Buffer, Parameter

__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "Buffer",
    "Conv2d",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Flatten",
    "GELU",
    "Identity",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "Module",
    "ModuleDict",
    "ModuleList",
    "NLLLoss",
    "Parameter",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "SmoothL1Loss",
    "Softmax",
    "Tanh",
    "functional",
    "init",
    "modules",
    "parameter",
    "register_module_backward_hook",
    "register_module_forward_hook",
    "register_module_forward_pre_hook",
    "register_module_full_backward_hook",
    "register_module_full_backward_pre_hook",
    "utils",
]
