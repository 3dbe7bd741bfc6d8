"""Optimizers with torch.optim's API, state format and (for-loop implementation) numbers.

Steps update the parameters' arrays in place with numpy and bump their version counters, so
they are fast and a graph that saved a parameter before the step refuses to backward after it.
"""

from __future__ import annotations

from . import adam, adamw, lr_scheduler, optimizer, sgd
from .adam import Adam
from .adamw import AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "adam", "adamw", "lr_scheduler", "optimizer", "sgd"]
