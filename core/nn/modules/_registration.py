"""Helpers of ``Module``'s registration and conversion methods: name checks, type names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..._dtype import device as _device
from ..._dtype import resolve_dtype
from ..._tensor import Tensor

if TYPE_CHECKING:
    from .module import Module

__all__ = ["check_name", "discard", "parse_to", "registered", "typename"]

_TENSOR_TYPE_NAMES = {
    "float16": "HalfTensor",
    "float32": "FloatTensor",
    "float64": "DoubleTensor",
    "int8": "CharTensor",
    "int16": "ShortTensor",
    "int32": "IntTensor",
    "int64": "LongTensor",
    "uint8": "ByteTensor",
    "bool": "BoolTensor",
}


def typename(obj: Any) -> str:
    """The name torch's error messages give ``obj`` (``torch.typename``).

    A tensor is named by its legacy type (``hookgrad.FloatTensor``); a class or function by
    its own qualified name (``hookgrad.nn.modules.activation.ReLU``, ``len``); any other object
    by its class (``int``).
    """
    if isinstance(obj, Tensor):
        kind = str(obj._data.dtype)
        return "hookgrad." + _TENSOR_TYPE_NAMES.get(kind, f"{kind}Tensor")
    module = getattr(obj, "__module__", "") or ""
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not isinstance(qualname, str):
        cls = type(obj)
        module, qualname = cls.__module__ or "", cls.__qualname__
    if module in ("", "builtins"):
        return qualname
    return f"{module}.{qualname}"


def check_name(module: Module, name: Any, kind: str, table: dict[str, Any]) -> None:
    """The checks torch makes before registering a parameter or buffer under ``name``."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {typename(name)}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain "."')
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if hasattr(module, name) and name not in table:
        raise KeyError(f"attribute '{name}' already exists")


def discard(name: str, *tables: Any) -> None:
    """Remove ``name`` from every dict or set in ``tables`` that holds it."""
    for table in tables:
        if name in table:
            if isinstance(table, dict):
                del table[name]
            else:
                table.discard(name)


def parse_to(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The dtype requested by ``Module.to(...)``, or None; a non-CPU device raises."""
    dtype = resolve_dtype(kwargs.get("dtype"))
    for arg in (*args, kwargs.get("device"), kwargs.get("tensor")):
        if arg is None:
            continue
        if isinstance(arg, Tensor):
            dtype = arg._data.dtype
        elif isinstance(arg, (str, _device)):
            _device(arg)  # validates
        else:
            dtype = resolve_dtype(arg)
    return dtype


def registered(
    hooks: Mapping[int, Callable[..., Any]], module: Module, name: str, value: Any
) -> Any:
    """``value`` after the global registration ``hooks``: each is called as
    ``hook(module, name, value)`` and a non-None return replaces ``value``."""
    for hook in tuple(hooks.values()):
        output = hook(module, name, value)
        if output is not None:
            value = output
    return value
