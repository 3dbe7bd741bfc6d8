"""``nn.Module``: the base class of every layer, as ``torch.nn.Module``.

Parameters, buffers and submodules live in the ordered dicts ``_parameters``, ``_buffers`` and
``_modules``; ``__setattr__`` routes assignments into them and ``__getattr__`` (called only when
normal lookup fails) reads them back with plain dict probes, exactly as torch does. Calling a
module runs :meth:`Module._call_impl`, the single place where module hooks will be dispatched
(see its docstring).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, TypeVar

from ... import __future__ as _future
from ..._dtype import can_require_grad, float16, float32, float64, resolve_dtype
from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ...utils.hooks import HookDict, RemovableHandle
from ..parameter import Buffer, Parameter
from ._global_hooks import (
    GLOBAL_HOOKS,
    bind_table_names,
    register_module_backward_hook,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from ._module_hooks import ModuleHooksMixin, call_with_hooks
from ._registration import check_name, discard, parse_to, registered, typename
from ._state_dict import StateDictHooksMixin, run_state_dict_post_hooks

__all__ = [
    "Module",
    "register_module_backward_hook",
    "register_module_buffer_registration_hook",
    "register_module_forward_hook",
    "register_module_forward_pre_hook",
    "register_module_full_backward_hook",
    "register_module_full_backward_pre_hook",
    "register_module_module_registration_hook",
    "register_module_parameter_registration_hook",
]

# torch's module-level names for the global hook tables, for code that inspects them or
# resets them by assignment (bind_table_names).
_global_forward_pre_hooks = GLOBAL_HOOKS.forward_pre
_global_forward_hooks = GLOBAL_HOOKS.forward
_global_forward_hooks_with_kwargs = GLOBAL_HOOKS.forward_with_kwargs
_global_forward_hooks_always_called = GLOBAL_HOOKS.forward_always_called
_global_backward_pre_hooks = GLOBAL_HOOKS.backward_pre
_global_backward_hooks = GLOBAL_HOOKS.backward
bind_table_names(
    __name__,
    {
        "_global_forward_pre_hooks": GLOBAL_HOOKS.forward_pre,
        "_global_forward_hooks": GLOBAL_HOOKS.forward,
        "_global_forward_hooks_with_kwargs": GLOBAL_HOOKS.forward_with_kwargs,
        "_global_forward_hooks_always_called": GLOBAL_HOOKS.forward_always_called,
        "_global_backward_pre_hooks": GLOBAL_HOOKS.backward_pre,
        "_global_backward_hooks": GLOBAL_HOOKS.backward,
    },
)

# Hooks run when any module registers a buffer, submodule or parameter; a non-None return
# replaces the value registered. Read at each registration, so assigning a fresh dict to one
# of these names resets it, as in torch.
_global_buffer_registration_hooks: HookDict = HookDict()
_global_module_registration_hooks: HookDict = HookDict()
_global_parameter_registration_hooks: HookDict = HookDict()

_M = TypeVar("_M", bound="Module")


def register_module_buffer_registration_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Run ``hook(module, name, buffer)`` whenever a module registers a buffer."""
    handle = RemovableHandle(_global_buffer_registration_hooks)
    _global_buffer_registration_hooks[handle.id] = hook
    return handle


def register_module_module_registration_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Run ``hook(module, name, submodule)`` whenever a module registers a submodule."""
    handle = RemovableHandle(_global_module_registration_hooks)
    _global_module_registration_hooks[handle.id] = hook
    return handle


def register_module_parameter_registration_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Run ``hook(module, name, param)`` whenever a module registers a parameter."""
    handle = RemovableHandle(_global_parameter_registration_hooks)
    _global_parameter_registration_hooks[handle.id] = hook
    return handle


def _addindent(text: str, spaces: int) -> str:
    """Indent every line of ``text`` but the first (nested reprs, as torch prints them)."""
    first, *rest = text.split("\n")
    if not rest:
        return text
    pad = " " * spaces
    return "\n".join([first, *(pad + line for line in rest)])


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: the keys it could not match."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _forward_unimplemented(self: Module, *args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError(
        f'Module [{type(self).__name__}] is missing the required "forward" function'
    )


class Module(ModuleHooksMixin, StateDictHooksMixin):
    """Base class for all neural network modules; subclasses implement :meth:`forward`."""

    dump_patches: ClassVar[bool] = False
    # Written into state_dict metadata; a subclass bumps it when its state_dict format changes.
    _version: ClassVar[int] = 1
    call_super_init: ClassVar[bool] = False

    training: bool
    _parameters: dict[str, Parameter | None]
    _buffers: dict[str, Tensor | None]
    _non_persistent_buffers_set: set[str]
    _modules: dict[str, Module | None]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs:
            name = next(iter(kwargs))
            raise TypeError(f"Module.__init__() got an unexpected keyword argument '{name}'")
        if args:
            raise TypeError(
                f"Module.__init__() takes 1 positional argument but {len(args) + 1} were given"
            )
        # Bypass __setattr__: these are the tables it routes into.
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        self._init_hook_tables()
        self._init_state_dict_hook_tables()

    forward: Callable[..., Any] = _forward_unimplemented

    # ------------------------------------------------------------------ calling
    def _call_impl(self, *args: Any, **kwargs: Any) -> Any:
        """Run the module on ``args``: the one entry point of every ``module(...)`` call.

        Two flags decide the path: this module may have hooks, or some global hook exists.
        The global one follows the global tables exactly; the module's is set on registration
        and cleared by the slow path once it finds the module's tables empty. A module with no
        hook anywhere costs two attribute reads over ``forward``.
        """
        if self._hooks_maybe or GLOBAL_HOOKS.active:
            return call_with_hooks(self, args, kwargs)
        return self.forward(*args, **kwargs)

    __call__: Callable[..., Any] = _call_impl

    # ------------------------------------------------------------------ registration
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add ``param`` under ``name`` (None registers a slot that state_dict skips)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        check_name(self, name, "parameter", self._parameters)
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{typename(param)}' object to parameter '{name}' "
                "(hookgrad.nn.Parameter or None required)"
            )
        elif param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                f"created explicitly. To express '{name}' as a function of another Tensor, "
                "compute the value in the forward() method."
            )
        else:
            hooks = _global_parameter_registration_hooks
            self._parameters[name] = registered(hooks, self, name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter; non-persistent ones skip state_dict."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        check_name(self, name, "buffer", self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{typename(tensor)}' object to buffer '{name}' "
                "(hookgrad Tensor or None required)"
            )
        self._buffers[name] = registered(_global_buffer_registration_hooks, self, name, tensor)
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module, reachable as the attribute ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = registered(_global_module_registration_hooks, self, name, module)

    register_module = add_module

    # ------------------------------------------------------------------ attributes
    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        params = d.get("_parameters")
        if params is not None and name in params:
            return params[name]
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            return buffers[name]
        modules = d.get("_modules")
        if modules is not None and name in modules:
            return modules[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            discard(name, d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{typename(value)}' as parameter '{name}' "
                    "(hookgrad.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
        else:
            self._set_non_parameter(name, value)

    def _set_non_parameter(self, name: str, value: Any) -> None:
        d = self.__dict__
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            discard(name, d, self._parameters, self._buffers, self._non_persistent_buffers_set)
            modules[name] = registered(_global_module_registration_hooks, self, name, value)
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{typename(value)}' as child module '{name}' "
                    "(hookgrad.nn.Module or None expected)"
                )
            modules[name] = registered(_global_module_registration_hooks, self, name, value)
        else:
            buffers = d.get("_buffers")
            if isinstance(value, Buffer) or (buffers is not None and name in buffers):
                self._set_buffer(name, value)
            else:
                object.__setattr__(self, name, value)

    def _set_buffer(self, name: str, value: Any) -> None:
        """``module.name = value`` for a Buffer or a registered buffer's name: register it,
        persistent as the Buffer says, else as the buffer already was."""
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(
                f"cannot assign '{typename(value)}' as buffer '{name}' "
                "(hookgrad.nn.Buffer, hookgrad.Tensor or None expected)"
            )
        if isinstance(value, Buffer):
            persistent = value.persistent
        else:
            persistent = name not in self._non_persistent_buffers_set
        self.register_buffer(name, value, persistent)

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        keys = itertools.chain(
            dir(type(self)), self.__dict__, self._parameters, self._modules, self._buffers
        )
        return sorted({k for k in keys if not k[0].isdigit()})

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__.copy()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_non_persistent_buffers_set", set())
        if "_forward_hooks" not in self.__dict__:
            self._init_hook_tables()
        self._init_state_dict_hook_tables()  # pickles from before these hooks existed

    # ------------------------------------------------------------------ traversal
    def named_modules(
        self, memo: set[Module] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """Yield ``("", self)`` then every submodule depth-first, with its dotted name."""
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub_prefix = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub_prefix, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[Module] = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def _named_members(
        self,
        members: Callable[[Module], Any],
        prefix: str = "",
        recurse: bool = True,
        remove_duplicate: bool = True,
    ) -> Iterator[tuple[str, Any]]:
        seen: set[Any] = set()
        owners = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else iter([(prefix, self)])
        )
        for owner_prefix, owner in owners:
            for name, value in members(owner):
                if value is None or value in seen:
                    continue
                if remove_duplicate:
                    seen.add(value)
                yield owner_prefix + ("." if owner_prefix else "") + name, value

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """Yield ``(dotted name, parameter)``; a shared parameter appears once by default."""
        return self._named_members(
            lambda m: m._parameters.items(), prefix, recurse, remove_duplicate
        )

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path ``target`` (``""`` is the module itself)."""
        if target == "":
            return self
        module: Module = self
        for item in target.split("."):
            if not hasattr(module, item):
                raise AttributeError(f"{module._get_name()} has no attribute `{item}`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return module

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target``."""
        module, name = self._owner_of(target)
        param = getattr(module, name)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target``."""
        module, name = self._owner_of(target)
        if name not in module._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return getattr(module, name)

    def _owner_of(self, target: str) -> tuple[Module, str]:
        """The submodule holding the attribute at dotted path ``target``, and its name there."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
        return module, name

    # ------------------------------------------------------------------ modes and grads
    def train(self: _M, mode: bool = True) -> _M:
        """Set training mode on this module and every submodule."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self: _M) -> _M:
        return self.train(False)

    def requires_grad_(self: _M, requires_grad: bool = True) -> _M:
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's ``.grad``: to None by default, else to zeros in place."""
        for param in self.parameters():
            grad = param._grad
            if grad is None:
                continue
            if set_to_none:
                param._grad = None
                continue
            if grad.grad_fn is not None:
                grad.detach_()
            else:
                grad.requires_grad_(False)
            grad.zero_()

    def apply(self: _M, fn: Callable[[Module], None]) -> _M:
        """Call ``fn`` on every submodule (children first) and then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ dtype and device
    def _apply(self: _M, fn: Callable[[Tensor], Tensor]) -> _M:
        """Replace every parameter's and buffer's data by ``fn(tensor)``, keeping the parameter
        objects unless ``hookgrad.__future__`` asks to overwrite them (and not to swap)."""
        for module in self.children():
            module._apply(fn)
        overwrite = (
            _future.get_overwrite_module_params_on_conversion()
            and not _future.get_swap_module_params_on_conversion()
        )
        with no_grad():
            for key, param in self._parameters.items():
                if param is None:
                    continue
                if overwrite:
                    new = self._parameters[key] = Parameter(fn(param), param.requires_grad)
                    if param._grad is not None:
                        new._grad = fn(param._grad)
                    continue
                param._data = fn(param)._data
                if param._grad is not None:
                    param._grad._data = fn(param._grad)._data
            for name, buf in self._buffers.items():
                if buf is not None:
                    self._buffers[name] = fn(buf)
        return self

    def _cast_floating(self: _M, dtype: Any) -> _M:
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def to(self: _M, *args: Any, **kwargs: Any) -> _M:
        """Move to ``device`` (only the CPU exists) and/or cast floating tensors to ``dtype``."""
        dtype = parse_to(args, kwargs)
        if dtype is None:
            return self
        if not can_require_grad(dtype):  # floating (bfloat16 too) or complex
            raise TypeError(
                "nn.Module.to only accepts floating point or complex dtypes, but got desired "
                f"dtype=hookgrad.{dtype}"
            )
        return self._cast_floating(dtype)

    def float(self: _M) -> _M:
        return self._cast_floating(float32)

    def double(self: _M) -> _M:
        return self._cast_floating(float64)

    def half(self: _M) -> _M:
        return self._cast_floating(float16)

    def bfloat16(self: _M) -> _M:
        return self._cast_floating(resolve_dtype("bfloat16"))

    def cpu(self: _M) -> _M:
        return self

    def type(self: _M, dst_type: Any) -> _M:
        return self._apply(lambda t: t.type(dst_type))

    def share_memory(self: _M) -> _M:
        return self

    # ------------------------------------------------------------------ state dict
    def get_extra_state(self) -> Any:
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called."
        )

    def set_extra_state(self, state: Any) -> None:
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called."
        )

    def _has_extra_state(self) -> bool:
        return type(self).get_extra_state is not Module.get_extra_state

    def _save_to_state_dict(
        self, destination: dict[str, Any], prefix: str, keep_vars: bool
    ) -> None:
        """Write this module's own parameters and persistent buffers (not its children's)."""
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        skip = self._non_persistent_buffers_set
        for name, buf in self._buffers.items():
            if buf is not None and name not in skip:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        if self._has_extra_state():
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(
        self,
        *args: Any,
        destination: dict[str, Any] | None = None,
        prefix: str = "",
        keep_vars: bool = False,
    ) -> dict[str, Any]:
        """Every parameter and persistent buffer by dotted name, detached unless keep_vars."""
        if args:  # the legacy positional form state_dict(destination, prefix, keep_vars)
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()  # type: ignore[attr-defined]
        local_metadata = {"version": self._version}
        metadata = getattr(destination, "_metadata", None)
        if metadata is not None:
            metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(
                    destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars
                )
        return run_state_dict_post_hooks(self, destination, prefix, local_metadata)

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
        """Copy this module's own entries from ``state_dict``; record what did not match."""
        from ._state_dict import load_local

        load_local(
            self,
            state_dict,
            prefix,
            local_metadata,
            strict,
            missing_keys,
            unexpected_keys,
            error_msgs,
        )

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> _IncompatibleKeys:
        """Copy parameters and buffers from ``state_dict`` into this module and its children.

        With ``strict`` (the default) any missing or unexpected key raises RuntimeError, as
        does a size mismatch in any case; otherwise the unmatched keys are returned.
        """
        from ._state_dict import load_tree

        return load_tree(self, state_dict, strict, assign)

    # ------------------------------------------------------------------ repr
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside the parentheses of this module's repr; subclasses override it."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [
            f"({name}): {_addindent(repr(module), 2)}" for name, module in self._modules.items()
        ]
        lines = extra_lines + child_lines
        body = ""
        if len(extra_lines) == 1 and not child_lines:
            body = extra_lines[0]
        elif lines:
            body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"
