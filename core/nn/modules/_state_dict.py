"""Loading a state dict into a module tree, with torch's error texts.

Kept apart from ``module.py`` so the Module class stays readable; ``Module.load_state_dict``
and ``Module._load_from_state_dict`` delegate here.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ..parameter import Parameter

if TYPE_CHECKING:
    from .module import Module, _IncompatibleKeys

__all__ = ["load_local", "load_tree"]


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
