"""Optimizers with torch.optim's API, state format and (for-loop implementation) numbers.

Steps update the parameters' arrays in place with numpy and bump their version counters, so
they are fast and a graph that saved a parameter before the step refuses to backward after it.
"""

from __future__ import annotations

from . import (
    adadelta,
    adagrad,
    adam,
    adamax,
    adamw,
    lbfgs,
    lr_scheduler,
    nadam,
    optimizer,
    radam,
    rmsprop,
    sgd,
)
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "SGD",
    "Adadelta",
    "Adagrad",
    "Adam",
    "LBFGS",
    "AdamW",
    "Adamax",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "adadelta",
    "adagrad",
    "adam",
    "adamax",
    "adamw",
    "lbfgs",
    "lr_scheduler",
    "nadam",
    "optimizer",
    "radam",
    "rmsprop",
    "sgd",
]
