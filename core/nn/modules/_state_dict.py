"""State-dict hooks, and loading a state dict into a module tree, with torch's error texts.

Kept apart from ``module.py`` so the Module class stays readable; ``Module.load_state_dict``
and ``Module._load_from_state_dict`` delegate here, and :class:`StateDictHooksMixin` gives
Module torch's four state-dict hook registrations with their return rules.
"""

from __future__ import annotations

import functools
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ...utils.hooks import HookDict, RemovableHandle
from ..parameter import Parameter

if TYPE_CHECKING:
    from .module import Module, _IncompatibleKeys

__all__ = ["StateDictHooksMixin", "load_local", "load_tree", "run_state_dict_post_hooks"]

Hook = Callable[..., Any]
_STATE_DICT_HOOK_TABLES = (
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)


class _WrappedHook:
    """A load-state-dict pre-hook, called with its module first when registered so.

    Holds the module weakly (a hook must not keep its module alive) and pickles with it.
    """

    def __init__(self, hook: Hook, module: Module | None = None) -> None:
        self.hook = hook
        functools.update_wrapper(self, hook)
        self.with_module = module is not None
        if module is not None:
            self.module = weakref.ref(module)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.with_module:
            module = self.module()
            if module is None:
                raise RuntimeError("You are trying to call the hook of a dead Module!")
            return self.hook(module, *args, **kwargs)
        return self.hook(*args, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        state = {"hook": self.hook, "with_module": self.with_module}
        if self.with_module:
            state["module"] = self.module()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.hook = state["hook"]
        self.with_module = state["with_module"]
        if self.with_module:
            if state["module"] is None:
                raise RuntimeError("You are trying to revive the hook of a dead Module!")
            self.module = weakref.ref(state["module"])


class StateDictHooksMixin:
    """``state_dict`` / ``load_state_dict`` pre- and post-hooks, as torch registers them."""

    _state_dict_hooks: HookDict
    _state_dict_pre_hooks: HookDict
    _load_state_dict_pre_hooks: HookDict
    _load_state_dict_post_hooks: HookDict

    def _init_state_dict_hook_tables(self) -> None:
        """Create the tables a module (or an old pickle of one) lacks."""
        d = self.__dict__
        for name in _STATE_DICT_HOOK_TABLES:
            if name not in d:
                d[name] = HookDict()

    def _register_state_dict_hook(self, hook: Hook) -> RemovableHandle:
        """Post-hook ``hook(module, state_dict, prefix, local_metadata)``; a non-None return
        replaces the state dict (respected only on the module ``state_dict`` was called on)."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError(
                "Cannot register the same function as the state dict post hook that was "
                "previously registered via register_state_dict_post_hook"
            )
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def register_state_dict_post_hook(self, hook: Hook) -> RemovableHandle:
        """Post-hook ``hook(module, state_dict, prefix, local_metadata) -> None``: it may edit
        the state dict in place; returning anything else raises."""
        hook._from_public_api = True  # type: ignore[attr-defined]
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def register_state_dict_pre_hook(self, hook: Hook) -> RemovableHandle:
        """Pre-hook ``hook(module, prefix, keep_vars) -> None`` run before ``state_dict``."""
        handle = RemovableHandle(self._state_dict_pre_hooks)
        self._state_dict_pre_hooks[handle.id] = hook
        return handle

    def _register_load_state_dict_pre_hook(
        self, hook: Hook, with_module: bool = False
    ) -> RemovableHandle:
        """As :meth:`register_load_state_dict_pre_hook`, without the module argument unless
        ``with_module``."""
        handle = RemovableHandle(self._load_state_dict_pre_hooks)
        module: Any = self if with_module else None
        self._load_state_dict_pre_hooks[handle.id] = _WrappedHook(hook, module)
        return handle

    def register_load_state_dict_pre_hook(self, hook: Hook) -> RemovableHandle:
        """Pre-hook ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs) -> None`` run before this module loads its entries."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook: Hook) -> RemovableHandle:
        """Post-hook ``hook(module, incompatible_keys) -> None`` run after this module and its
        children loaded; it may edit the missing and unexpected key lists in place."""
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle


def run_state_dict_post_hooks(
    module: Module, destination: Any, prefix: str, local_metadata: dict[str, Any]
) -> Any:
    """Run ``module``'s state-dict post-hooks; return the (possibly replaced) state dict."""
    for hook in module._state_dict_hooks.values():
        result = hook(module, destination, prefix, local_metadata)
        if not getattr(hook, "_from_public_api", False):
            if result is not None:
                destination = result
        elif result is not None:
            raise RuntimeError("state_dict post-hook must return None")
    return destination


def _size(shape: tuple[int, ...]) -> str:
    return f"hookgrad.Size({list(shape)})"


def load_tree(
    root: Module, state_dict: Mapping[str, Any], strict: bool, assign: bool
) -> _IncompatibleKeys:
    """Load every module of ``root``'s tree; raise RuntimeError listing all problems at once."""
    from .module import _IncompatibleKeys

    if not isinstance(state_dict, Mapping):
        raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
    missing: list[str] = []
    unexpected: list[str] = []
    errors: list[str] = []
    metadata = getattr(state_dict, "_metadata", None)

    def load(module: Module, local: Mapping[str, Any], prefix: str) -> None:
        local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
        if assign:
            local_metadata["assign_to_params_buffers"] = True
        # Missing and unexpected keys are always collected; `strict` only decides on raising.
        module._load_from_state_dict(
            local, prefix, local_metadata, True, missing, unexpected, errors
        )
        for name, child in module._modules.items():
            if child is not None:
                child_prefix = prefix + name + "."
                subset = {k: v for k, v in local.items() if k.startswith(child_prefix)}
                load(child, subset, child_prefix)
        # A hook may edit missing_keys / unexpected_keys in place, before strict is applied.
        incompatible = _IncompatibleKeys(missing, unexpected)
        for hook in module._load_state_dict_post_hooks.values():
            out = hook(module, incompatible)
            assert out is None, (
                "Hooks registered with ``register_load_state_dict_post_hook`` are not"
                "expected to return new values, if incompatible_keys need to be modified,"
                "it should be done inplace."
            )

    load(root, OrderedDict(state_dict), "")
    if strict:
        if unexpected:
            keys = ", ".join(f'"{k}"' for k in unexpected)
            errors.insert(0, f"Unexpected key(s) in state_dict: {keys}. ")
        if missing:
            keys = ", ".join(f'"{k}"' for k in missing)
            errors.insert(0, f"Missing key(s) in state_dict: {keys}. ")
    if errors:
        raise RuntimeError(
            f"Error(s) in loading state_dict for {type(root).__name__}:\n\t" + "\n\t".join(errors)
        )
    return _IncompatibleKeys(missing, unexpected)


def load_local(
    module: Module,
    state_dict: Mapping[str, Any],
    prefix: str,
    local_metadata: dict[str, Any],
    strict: bool,
    missing_keys: list[str],
    unexpected_keys: list[str],
    error_msgs: list[str],
) -> None:
    """Copy ``module``'s own parameters and persistent buffers from ``state_dict``."""
    for hook in module._load_state_dict_pre_hooks.values():
        hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
    skip = module._non_persistent_buffers_set
    local: dict[str, Tensor] = {k: v for k, v in module._parameters.items() if v is not None}
    local.update((k, v) for k, v in module._buffers.items() if v is not None and k not in skip)
    assign = bool(local_metadata.get("assign_to_params_buffers", False))
    for name, current in local.items():
        key = prefix + name
        if key in state_dict:
            error = _copy_entry(module, name, key, current, state_dict[key], assign)
            if error is not None:
                error_msgs.append(error)
        elif strict:
            missing_keys.append(key)
    extra_key = prefix + "_extra_state"
    if module._has_extra_state():
        if extra_key in state_dict:
            module.set_extra_state(state_dict[extra_key])
        elif strict:
            missing_keys.append(extra_key)
    if strict:
        unexpected_keys.extend(_unexpected(module, state_dict, prefix, local, extra_key))


def _copy_entry(
    module: Module, name: str, key: str, current: Tensor, value: Any, assign: bool
) -> str | None:
    """Copy one checkpoint entry into ``current``; return torch's error text on failure."""
    if not isinstance(value, Tensor):
        return (
            f'While copying the parameter named "{key}", expected hookgrad.Tensor or '
            f"Tensor-like object from checkpoint but received {type(value)}"
        )
    if value.shape != current.shape:
        return (
            f"size mismatch for {key}: copying a param with shape {_size(value.shape)} from "
            f"checkpoint, the shape in current model is {_size(current.shape)}."
        )
    try:
        with no_grad():
            if not assign:
                current.copy_(value)
            elif isinstance(current, Parameter):
                setattr(module, name, Parameter(value, requires_grad=current.requires_grad))
            else:
                setattr(module, name, value)
    except Exception as error:
        return (
            f'While copying the parameter named "{key}", whose dimensions in the model are '
            f"{_size(current.shape)} and whose dimensions in the checkpoint are "
            f"{_size(value.shape)}, an exception occurred : {error.args}."
        )
    return None


def _unexpected(
    module: Module,
    state_dict: Mapping[str, Any],
    prefix: str,
    local: Mapping[str, Any],
    extra_key: str,
) -> list[str]:
    """Keys under ``prefix`` naming neither a local entry nor a child module."""
    found = []
    for key in state_dict:
        if not key.startswith(prefix) or key == extra_key:
            continue
        head, dot, _ = key[len(prefix) :].partition(".")
        if (dot and head not in module._modules) or (not dot and head not in local):
            found.append(key)
    return found
