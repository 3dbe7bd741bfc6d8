"""Models and probes shared by the tap tests, on either engine (``lib``: hookgrad or torch)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

X = np.array(
    [[0.5, -1.0, 0.25], [1.5, 0.3, -0.7], [-0.2, 0.8, 1.1], [0.9, -0.4, 0.0], [-1.3, 0.6, 0.2]],
    dtype=np.float32,
)
"""The input batch every test feeds (5 x 3)."""

_MODULE_TABLES = (
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_backward_pre_hooks",
    "_backward_hooks",
)
_GLOBAL_TABLES = (
    "_global_forward_pre_hooks",
    "_global_forward_hooks",
    "_global_forward_hooks_with_kwargs",
    "_global_forward_hooks_always_called",
    "_global_backward_pre_hooks",
    "_global_backward_hooks",
)


def mlp(lib: ModuleType, seed: int = 0) -> Any:
    """Linear(3, 4), Tanh, Linear(4, 2), drawn from ``seed``."""
    lib.manual_seed(seed)
    nn = lib.nn
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def twice(lib: ModuleType, seed: int = 0) -> Any:
    """A model calling its one Linear(3, 3), ``lin``, twice per forward."""

    class Twice(lib.nn.Module):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = lib.nn.Linear(3, 3)

        def forward(self, x: Any) -> Any:
            return self.lin(self.lin(x) * 2)

    lib.manual_seed(seed)
    return Twice()


def hook_state(lib: ModuleType, model: Any) -> tuple[Any, ...]:
    """How many hooks of each kind the model's modules, the engine's global module hooks and
    its backward observers hold right now."""
    modules = tuple(
        tuple(len(getattr(module, table)) for table in _MODULE_TABLES) for module in model.modules()
    )
    registry = lib.nn.modules.module
    tables = _GLOBAL_TABLES
    if lib.__name__ == "torch":  # torch's handle never removes this flag: not a hook
        tables = tuple(t for t in tables if t != "_global_forward_hooks_with_kwargs")
    global_hooks = tuple(len(getattr(registry, table)) for table in tables)
    if lib.__name__ == "torch":
        from hookgrad.engines.torch import _backward, _private

        observers: tuple[Any, ...] = (len(_backward._OBSERVERS), _private.autograd_backward())
    else:
        from hookgrad.autograd._observers import BACKWARD_OBSERVERS

        observers = (len(BACKWARD_OBSERVERS),)
    return modules, global_hooks, observers
