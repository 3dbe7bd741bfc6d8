"""``PluginConfig``: the settings every plugin accepts, and the module selector they define."""

from __future__ import annotations

import re
from fnmatch import translate
from functools import lru_cache
from typing import Any, Literal, TypeAlias, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

__all__ = ["OnError", "PluginAbort", "PluginConfig"]

OnError: TypeAlias = Literal["raise", "warn", "disable"]
"""What the runtime does when a plugin raises inside a hook (not a :class:`PluginAbort`)."""


class PluginAbort(Exception):
    """Mix-in base of an error a plugin raises on purpose to stop the caller: its configured
    verdict, not a failure (nan_guard's ``NonFiniteGradientError`` under ``action =
    "raise"``). It propagates from the hook whatever the plugin's ``on_error``, which is for
    the plugin's failures. Combine it with the class a user would catch:
    ``class MyError(RuntimeError, PluginAbort)``."""


_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_CLASS_PATH = re.compile(rf"{_DOTTED}:{_DOTTED}")


def _compile_globs(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex matching any of the fnmatch ``patterns`` (case-sensitive); None if none."""
    if not patterns:
        return None
    return re.compile("|".join(translate(p) for p in patterns))


def _takes_tuple(annotation: Any) -> bool:
    """Whether a field's annotation is a tuple, or a union holding one (``tuple[str, ...] | None``)."""
    if get_origin(annotation) is tuple or annotation is tuple:
        return True
    return any(_takes_tuple(arg) for arg in get_args(annotation))


class _Selector:
    """The compiled form of ``modules`` / ``exclude`` / ``module_types``."""

    __slots__ = ("exclude", "modules", "types")

    def __init__(
        self, modules: tuple[str, ...], exclude: tuple[str, ...], types: tuple[str, ...]
    ) -> None:
        self.modules = _compile_globs(modules)
        self.exclude = _compile_globs(exclude)
        self.types = frozenset(types)

    def __call__(self, module_name: str, module_type: str) -> bool:
        if self.types and module_type not in self.types:
            return False
        if self.modules is None or self.modules.match(module_name) is None:
            return False
        return self.exclude is None or self.exclude.match(module_name) is None


# Keyed by the settings themselves rather than stored on the instance: a private attribute
# would survive ``model_copy(update=...)`` with stale globs.
_selector = lru_cache(maxsize=256)(_Selector)


class PluginConfig(BaseModel):
    """Base of every plugin's configuration model: subclass it and add the plugin's own fields.

    The fields below are common to all plugins and applied by the runtime, not by the plugin:
    a module event reaches a plugin only if :meth:`selects` accepts the module, and an error
    raised by the plugin is handled per ``on_error``. Unknown keys are rejected
    (``extra="forbid"``), so a typo in a config file fails and names the key; instances are
    frozen (the list settings are stored as tuples, so nothing can change after validation).
    Values are checked strictly, in subclasses too (``strict=True``): ``max_norm = "0.5"``,
    ``max_norm = true`` and ``enabled = "no"`` are errors, not coerced. Two conversions
    remain, both lossless: an int where a float is expected (``max_norm = 1``, as torch takes
    it) and a list where a tuple is expected (TOML and JSON have no tuples). A docstring under
    a field becomes its description in the JSON schema, in subclasses too.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True
    )

    enabled: bool = True
    """False turns the plugin off while keeping its settings."""

    modules: tuple[str, ...] = ("*",)
    """fnmatch globs on qualified module names ("" is the root): any match selects."""

    exclude: tuple[str, ...] = ()
    """Globs removing modules that `modules` selected; exclusion wins."""

    module_types: tuple[str, ...] = ()
    """Class names ("Linear"); a module is selected only if its class is listed. Empty: all."""

    on_error: OnError = "raise"
    """On an exception in a hook: "raise" it, "warn" (log, go on), "disable" (log, stop calling).
    A PluginAbort always propagates."""

    class_path: str | None = None
    """Activates a plugin that has no entry point: "package.module:Class"."""

    @field_validator("*", mode="before")
    @classmethod
    def _list_as_tuple(cls, value: Any, info: ValidationInfo) -> Any:
        """A list given for a tuple setting becomes that tuple (strict mode would refuse it)."""
        name = info.field_name
        if (
            type(value) is list
            and name is not None
            and _takes_tuple(cls.model_fields[name].annotation)
        ):
            return tuple(value)
        return value

    @field_validator("modules", "exclude")
    @classmethod
    def _globs_can_match(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        """A module name has no empty dotted part, so a glob with one (``"layers."``,
        ``"a..b"``) matches nothing ever. Whether a glob matches the modules of a given
        model is known only once the model runs, so that is not checked here."""
        for glob in value:
            if glob and "" in glob.split("."):
                raise ValueError(
                    f"{info.field_name} glob {glob!r} can match no module name: names are "
                    "dotted paths like 'layers.0.fc' (\"\" alone is the root)"
                )
        return value

    @field_validator("module_types")
    @classmethod
    def _class_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not name.isidentifier():
                raise ValueError(f"module_types holds class names like 'Linear', got {name!r}")
        return value

    @field_validator("class_path")
    @classmethod
    def _class_path_shape(cls, value: str | None) -> str | None:
        if value is not None and not _CLASS_PATH.fullmatch(value):
            raise ValueError(f"class_path must look like 'package.module:Class', got {value!r}")
        return value

    def selects(self, module_name: str, module_type: str) -> bool:
        """Whether this plugin hears events of the module ``module_name`` of class ``module_type``.

        A module is selected when all three hold:

        1. ``module_types`` is empty or contains ``module_type``;
        2. some glob in ``modules`` matches ``module_name`` (an empty ``modules`` selects none);
        3. no glob in ``exclude`` matches ``module_name``.

        Globs use :func:`fnmatch.fnmatchcase` rules on the whole name (case-sensitive):
        ``*`` matches any run of characters including dots and the empty string, so ``"*"``
        selects the root ``""`` and ``"layers.*"`` selects ``"layers.0"`` and ``"layers.0.act"``
        but not ``"layers"`` itself. ``""`` selects the root only. ``enabled`` is not
        consulted: it switches the whole plugin, not modules.
        """
        selector = _selector(self.modules, self.exclude, self.module_types)
        return selector(module_name, module_type)
