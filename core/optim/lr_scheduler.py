"""Learning-rate schedulers with ``torch.optim.lr_scheduler``'s names, state and numbers.

Every schedule gives torch 2.13's learning rates bit for bit, in both of torch's forms: the
chainable one ``step()`` uses and the closed one ``step(epoch)`` uses. ``CyclicLR`` is not
provided.
"""

from __future__ import annotations

from ._lr_base import EPOCH_DEPRECATION_WARNING as EPOCH_DEPRECATION_WARNING
from ._lr_base import LRScheduler
from ._lr_base import _LRScheduler as _LRScheduler
from ._lr_composite import ChainedScheduler, SequentialLR
from ._lr_cycles import CosineAnnealingLR, CosineAnnealingWarmRestarts, OneCycleLR
from ._lr_factors import (
    ConstantLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    MultiplicativeLR,
    MultiStepLR,
    PolynomialLR,
    StepLR,
)
from ._lr_plateau import ReduceLROnPlateau

__all__ = [
    "ChainedScheduler",
    "ConstantLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "MultiplicativeLR",
    "OneCycleLR",
    "PolynomialLR",
    "ReduceLROnPlateau",
    "SequentialLR",
    "StepLR",
]
