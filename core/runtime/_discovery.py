"""Plugin discovery: the ``hookgrad.plugins`` entry-point group, scanned lazily once.

Built-in and third-party plugins come from the same group (hookgrad's own ``pyproject.toml``
lists the built-ins), as pytest does with ``pytest11``. An entry point names either a plugin
class, constructed as ``cls(config)`` with its validated ``Config``, or a module of hookimpls.
Nothing is imported until a plugin is activated, and a plugin that fails to import is reported
with its entry point and distribution instead of taking the others down.
"""

from __future__ import annotations

import importlib
import types
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from pydantic import BaseModel

__all__ = [
    "ENTRY_POINT_GROUP",
    "LoadedPlugin",
    "PluginCatalog",
    "PluginImportWarning",
    "PluginLoadError",
    "PluginSource",
    "load_class_path",
]

ENTRY_POINT_GROUP = "hookgrad.plugins"
_OWN_DISTRIBUTION = "hookgrad"


class PluginLoadError(RuntimeError):
    """A plugin could not be imported or is not a plugin; names the culprit and its source."""

    def __init__(self, name: str, source: str, reason: str) -> None:
        super().__init__(f"plugin {name!r} ({source}) could not be loaded: {reason}")
        self.name = name
        self.source = source
        self.reason = reason


class PluginImportWarning(UserWarning):
    """A plugin failed to load and was skipped (set ``strict = true`` to make it an error)."""


@dataclass(frozen=True, slots=True)
class PluginSource:
    """Where a plugin comes from, for activation and for ``hookgrad plugins``."""

    name: str
    value: str
    distribution: str | None
    version: str | None

    @property
    def builtin(self) -> bool:
        """Shipped with hookgrad itself (autoload settings never block these)."""
        return self.distribution == _OWN_DISTRIBUTION

    def describe(self) -> str:
        dist = self.distribution or "no distribution"
        version = f" {self.version}" if self.version else ""
        return f"entry point {self.name} = {self.value} in {dist}{version}"


@dataclass(frozen=True, slots=True)
class LoadedPlugin:
    """An imported plugin: a class (instantiated with its Config) or a module of hookimpls."""

    source: PluginSource
    target: type | types.ModuleType
    config_model: type[BaseModel]

    def create(self, config: BaseModel) -> object:
        """The object to register with pluggy: ``cls(config)``, or the module itself."""
        if isinstance(self.target, types.ModuleType):
            return self.target
        return self.target(config)


def _plugin_config_base() -> type[BaseModel]:
    from hookgrad.hookspecs import PluginConfig

    return PluginConfig


def _inspect(source: PluginSource, target: Any) -> LoadedPlugin:
    """Check that ``target`` is a usable plugin and find its Config model."""
    base = _plugin_config_base()
    if isinstance(target, types.ModuleType):
        model = getattr(target, "Config", base)
    elif isinstance(target, type):
        model = getattr(target, "Config", None)
        if model is None:
            raise PluginLoadError(
                source.name, source.describe(), f"class {target.__qualname__} has no Config model"
            )
    else:
        raise PluginLoadError(
            source.name,
            source.describe(),
            f"expected a plugin class or module, got {type(target).__name__}",
        )
    if not (isinstance(model, type) and issubclass(model, base)):
        raise PluginLoadError(
            source.name, source.describe(), "its Config does not subclass hookgrad PluginConfig"
        )
    return LoadedPlugin(source, target, model)


def load_class_path(name: str, class_path: str) -> LoadedPlugin:
    """Import ``"pkg.mod:Class"`` (a plugin without an entry point, from ``class_path``)."""
    source = PluginSource(name, class_path, None, None)
    module_name, _, attribute = class_path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split(".") if attribute else ():
            target = getattr(target, part)
    except Exception as error:  # any import-time failure of user code
        raise PluginLoadError(name, f"class_path {class_path}", repr(error)) from error
    return _inspect(source, target)


class PluginCatalog:
    """The plugins installed in this environment, by name; entry points are read once."""

    def __init__(
        self, entry_points: Callable[[], Iterable[metadata.EntryPoint]] | None = None
    ) -> None:
        self._entry_points = entry_points or (
            lambda: metadata.entry_points(group=ENTRY_POINT_GROUP)
        )
        self._sources: dict[str, PluginSource] | None = None
        self._by_name: dict[str, metadata.EntryPoint] = {}
        self._loaded: dict[str, LoadedPlugin] = {}

    def sources(self) -> dict[str, PluginSource]:
        """Every installed plugin's source, by name (scanned on first use, then cached)."""
        if self._sources is None:
            sources: dict[str, PluginSource] = {}
            for ep in self._entry_points():
                dist = ep.dist
                sources[ep.name] = PluginSource(
                    ep.name,
                    ep.value,
                    None if dist is None else dist.metadata["Name"],
                    None if dist is None else dist.version,
                )
                self._by_name[ep.name] = ep
            self._sources = sources
        return self._sources

    def load(self, name: str) -> LoadedPlugin:
        """Import the plugin ``name``; raises PluginLoadError naming the entry point."""
        if name in self._loaded:
            return self._loaded[name]
        sources = self.sources()
        if name not in sources:
            available = ", ".join(sorted(sources)) or "none installed"
            raise PluginLoadError(name, "no entry point", f"unknown plugin; available: {available}")
        source = sources[name]
        try:
            target = self._by_name[name].load()
        except Exception as error:  # a broken third-party package must not take us down
            raise PluginLoadError(name, source.describe(), repr(error)) from error
        loaded = self._loaded[name] = _inspect(source, target)
        return loaded

    def load_many(
        self, names: Iterable[str], *, strict: bool
    ) -> tuple[list[LoadedPlugin], list[PluginLoadError]]:
        """Load ``names``; a failure warns and is skipped unless ``strict`` (then it raises)."""
        loaded, failed = [], []
        for name in names:
            try:
                loaded.append(self.load(name))
            except PluginLoadError as error:
                if strict:
                    raise
                warnings.warn(str(error), PluginImportWarning, stacklevel=2)
                failed.append(error)
        return loaded, failed
