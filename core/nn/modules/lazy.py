"""Lazy modules: parameters whose shapes come from the first input, as torch's.

A lazy module holds :class:`UninitializedParameter` objects and registers, at construction, a
forward pre-hook (``with_kwargs=True``, so it runs before any hook a user adds later) that
infers the shapes from the first call's arguments, materializes the parameters in place (the
same objects, so an optimizer built before the first call keeps working), removes itself and
turns the module into its ``cls_to_become`` (``LazyLinear`` becomes ``Linear``). Loading a
state dict materializes the parameters from the stored shapes first.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import Any

import numpy as np

from ..._dtype import resolve_dtype
from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ..parameter import Parameter
from .module import Module

__all__ = ["LazyModuleMixin", "UninitializedParameter"]

_SHAPE_MESSAGE = (
    "Can't access the shape of an uninitialized parameter or buffer. This error usually "
    "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
    "initialized one. Call `forward` to initialize the parameters before accessing their "
    "attributes."
)


class UninitializedParameter(Parameter):
    """A parameter without a shape yet: :meth:`materialize` gives it one and makes it a
    plain :class:`Parameter` (the same object)."""

    __slots__ = ()

    cls_to_become = Parameter

    def __init__(self, requires_grad: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__(None, requires_grad)
        if dtype is not None:
            self._data = np.empty((0,), dtype=resolve_dtype(dtype))

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Give the parameter ``shape`` (uninitialized values) and make it a Parameter."""
        if isinstance(shape, int):
            shape = (shape,)
        chosen = self._data.dtype if dtype is None else resolve_dtype(dtype)
        self._data = np.empty(tuple(shape), dtype=chosen)
        self.__class__ = self.cls_to_become  # type: ignore[assignment]

    @property
    def shape(self) -> Any:
        raise RuntimeError(_SHAPE_MESSAGE)

    def size(self, dim: int | None = None) -> Any:
        raise RuntimeError(_SHAPE_MESSAGE)

    def __repr__(self) -> str:
        return "<UninitializedParameter>"


def is_lazy(value: Tensor | None) -> bool:
    return isinstance(value, UninitializedParameter)


class LazyModuleMixin:
    """Mixed in before a module class whose ``initialize_parameters(*args)`` materializes its
    :class:`UninitializedParameter` objects from the first input."""

    cls_to_become: type[Module] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        module: Any = self
        module._initialize_hook = module.register_forward_pre_hook(
            self._infer_parameters, with_kwargs=True
        )

    def has_uninitialized_params(self) -> bool:
        """Whether some parameter or buffer still waits for its shape."""
        module: Any = self
        return any(is_lazy(t) for t in chain(module._parameters.values(), module._buffers.values()))

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {type(self).__name__}"
        )

    def _infer_parameters(
        self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None
    ) -> None:
        """The forward pre-hook: materialize, check, then become ``cls_to_become``."""
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        delattr(module, "_initialize_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _load_from_state_dict(
        self,
        state_dict: Mapping[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        """Materialize each uninitialized parameter or buffer to its stored shape, then load."""
        module: Any = self
        for name, value in chain(module._parameters.items(), module._buffers.items()):
            key = prefix + name
            if is_lazy(value) and key in state_dict and not is_lazy(state_dict[key]):
                with no_grad():
                    value.materialize(tuple(state_dict[key].shape))
        super()._load_from_state_dict(  # type: ignore[misc]
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )
