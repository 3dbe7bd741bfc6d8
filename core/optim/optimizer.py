"""The Optimizer base class: parameter groups, per-parameter state and torch's state_dict format.

Subclasses implement ``_step_group(group)``; ``step`` runs the closure under grad mode, then
updates every group with grad mode off. Step and state-dict hooks, global and per optimizer, are
torch's (their order and the step wrapping are described in ``_hooks``); the names torch
defines in this module (``_global_optimizer_pre_hooks``, ``Args``, ...) are re-exported here.
Updates write straight into the parameters' numpy arrays and bump each parameter's version
counter once per in-place write, as torch's ``param.add_`` does, so a graph that saved a
parameter before the step refuses to backward.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from copy import deepcopy
from itertools import chain
from typing import Any, TypeAlias

from .._grad_mode import _state as _grad_state
from .._grad_mode import enable_grad
from .._tensor import Tensor
from ..nn.modules._registration import typename
from ._hooks import Args as Args
from ._hooks import GlobalOptimizerPostHook as GlobalOptimizerPostHook
from ._hooks import GlobalOptimizerPreHook as GlobalOptimizerPreHook
from ._hooks import Kwargs as Kwargs
from ._hooks import (
    OptimizerHooksMixin,
    StepGate,
    StepGateError,
    register_optimizer_step_gate,
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from ._hooks import _global_optimizer_post_hooks as _global_optimizer_post_hooks
from ._hooks import _global_optimizer_pre_hooks as _global_optimizer_pre_hooks

__all__ = [
    "Optimizer",
    "ParamsT",
    "StateDict",
    "register_optimizer_step_post_hook",
    "register_optimizer_step_pre_hook",
    "required",
    # hookgrad only: the runtime's veto on steps (torch has none)
    "StepGate",
    "StepGateError",
    "register_optimizer_step_gate",
]

ParamsT: TypeAlias = Iterable[Tensor] | Iterable[dict[str, Any]] | Iterable[tuple[str, Tensor]]
StateDict: TypeAlias = dict[str, Any]


class _RequiredParameter:
    """Singleton marking a default that every parameter group must supply itself."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer(OptimizerHooksMixin):
    """Base class for all optimizers.

    Args:
        params: an iterable of Tensors, of ``(name, Tensor)`` pairs, or of dicts (parameter
            groups, each with a ``"params"`` entry and optional per-group options).
        defaults: the options a group gets when it does not set them itself.
    """

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._init_hook_tables()
        self._patch_step_function()
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got {typename(params)}"
            )
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ pickling and repr
    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_hook_tables()
        self._patch_step_function()  # an unpickled optimizer may be the first of its class
        self.defaults.setdefault("differentiable", False)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {key}: {group[key]}" for key in sorted(group) if key != "params")
        return "\n".join(lines) + "\n)"

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters (with its own options) to ``param_groups``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        _split_names(param_group)
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is "
                    + typename(param)
                )
            if not self.defaults.get("differentiable", None) and not (
                param.is_leaf or param.retains_grad
            ):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    "parameter group didn't specify a value of required optimization "
                    f"parameter {name}"
                )
            param_group.setdefault(name, default)
        self._check_disjoint(param_group)
        self.param_groups.append(param_group)

    def _check_disjoint(self, param_group: dict[str, Any]) -> None:
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, "
                "this will cause an error; see github.com/pytorch/pytorch/issues/40967 for more "
                "information",
                stacklevel=4,
            )
        seen: set[int] = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. "
                    f"cannot add param group {which} to the optimizer"
                )
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")

    # ------------------------------------------------------------------ gradients and steps
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients: drop them (default) or zero them in place, detached."""
        for group in self.param_groups:
            for p in group["params"]:
                grad = p._grad
                if grad is None:
                    continue
                if set_to_none:
                    p._grad = None
                    continue
                if grad.grad_fn is not None:
                    grad.detach_()
                else:
                    grad.requires_grad_(False)
                grad._data.fill(0)
                grad._vbox[0] += 1

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Re-evaluate the loss with ``closure`` (if given), update every group, return the loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        previous = _grad_state.enabled
        _grad_state.enabled = False
        try:
            for group in self.param_groups:
                self._step_group(group)
        finally:
            _grad_state.enabled = previous
        return loss

    def _step_group(self, group: dict[str, Any]) -> None:
        """Update the parameters of one group in place; what each optimizer implements."""
        raise NotImplementedError

    # ------------------------------------------------------------------ state dicts
    def state_dict(self) -> StateDict:
        """The state as torch stores it: parameters replaced by their integer position.

        State tensors are returned by reference, not copied, as torch does. Pre-hooks run
        first; each post hook may edit the dict or return a replacement.
        """
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        index: dict[int, int] = {}
        start = 0

        def pack(group: dict[str, Any]) -> dict[str, Any]:
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index.setdefault(id(p), i)
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        param_groups = [pack(g) for g in self.param_groups]
        state = {(index[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        state_dict: StateDict = {"state": state, "param_groups": param_groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict: StateDict) -> None:
        """Load a ``state_dict()``: groups are matched by order, parameters by position.

        Floating state tensors are cast to the parameter's dtype; tensors already of that dtype
        are shared with ``state_dict``, not copied (torch does the same). Pre-hooks get a
        shallow copy of ``state_dict`` and may return a replacement; post hooks run last.
        """
        state_dict = state_dict.copy()
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of "
                "optimizer's group"
            )
        id_map = dict(
            zip(
                chain.from_iterable(g["params"] for g in saved_groups),
                chain.from_iterable(g["params"] for g in groups),
            )
        )
        state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in id_map:
                param = id_map[key]
                state[param] = {k: _cast(param, v, k) for k, v in value.items()}
            else:
                state[key] = value
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
        self.__setstate__({"state": state, "param_groups": saved_groups})
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)


def _split_names(param_group: dict[str, Any]) -> None:
    """Normalise ``param_group["params"]`` to a list of tensors; ``(name, t)`` pairs name them."""
    params = param_group["params"]
    if isinstance(params, Tensor):
        params = [params]
    elif isinstance(params, set):
        raise TypeError(
            "optimizer parameters need to be organized in ordered collections, but the ordering "
            "of tensors in sets will change between runs. Please use a list instead."
        )
    else:
        params = list(params)
    names = [p[0] for p in params if isinstance(p, tuple)]
    param_group["params"] = [p[1] if isinstance(p, tuple) else p for p in params]
    if names:
        if len(names) != len(params):
            raise ValueError(
                "all optimizer params should be with/without names. Some param names are missing"
            )
        param_group["param_names"] = names


def _cast(param: Tensor, value: Any, key: Any = None) -> Any:
    """Copy a state value for ``param``: floating tensors take the parameter's dtype.

    ``step`` counters keep their own dtype (pytorch/pytorch#74424).
    """
    if isinstance(value, Tensor):
        if key == "step" or not param.is_floating_point():
            return value
        return value.to(dtype=param.dtype)
    if isinstance(value, dict):
        return {k: _cast(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(param, v) for v in value)
    return value


def _refuse_unsupported(name: str, **flags: Any) -> None:
    """Refuse torch options that change how a step is computed and that hookgrad lacks."""
    for flag, value in flags.items():
        if value:
            raise NotImplementedError(
                f"hookgrad's {name} does not implement {flag}={value!r}; its steps are plain "
                "numpy updates (the result equals torch's for-loop implementation)"
            )
