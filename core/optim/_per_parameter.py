"""The shape every optimizer but SGD shares: per parameter, lazy state, then one update.

A subclass says which options old checkpoints may lack (``_group_defaults``), reads a group's
options once per step (``_hyper``), creates a parameter's state the first time it has a
gradient (``_init_state``, in torch's key order) and updates it (``_update``, which bumps the
parameter's version counter once per in-place write, as torch's ``param.add_`` does).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from .._tensor import Tensor
from ._kernels import step_counter
from .optimizer import Optimizer

__all__ = ["PerParameterOptimizer", "steps_as_tensors"]


class PerParameterOptimizer(Optimizer):
    """Base of the optimizers whose step updates each parameter independently."""

    _group_defaults: ClassVar[dict[str, Any]] = {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            for key, value in self._group_defaults.items():
                group.setdefault(key, value)
        steps_as_tensors(self)

    def _step_group(self, group: dict[str, Any]) -> None:
        hyper = self._hyper(group)
        state = self.state
        for p in group["params"]:
            g = p._grad
            if g is None:
                continue
            p_state = state[p]
            if not p_state:
                self._init_state(p_state, p._data, group)
            self._update(p, g._data, p_state, hyper)

    def _hyper(self, group: dict[str, Any]) -> Any:
        """The group's options as plain Python values, read once per step."""
        raise NotImplementedError

    def _init_state(self, p_state: dict[str, Any], data: np.ndarray, group: dict[str, Any]) -> None:
        """Fill a parameter's empty state, in torch's key order."""
        raise NotImplementedError

    def _update(self, p: Tensor, grad: np.ndarray, p_state: dict[str, Any], hyper: Any) -> None:
        """Update one parameter and its state in place."""
        raise NotImplementedError


def steps_as_tensors(optimizer: Optimizer) -> None:
    """Old checkpoints stored ``step`` as a number; torch converts it to a tensor on load."""
    for p_state in optimizer.state.values():
        if p_state and "step" in p_state and not isinstance(p_state["step"], Tensor):
            p_state["step"] = step_counter(float(p_state["step"]))
