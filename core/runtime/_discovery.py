"""Plugin discovery: the ``hookgrad.plugins`` entry-point group, scanned lazily once.

Built-in and third-party plugins come from the same group (hookgrad's own ``pyproject.toml``
lists the built-ins), as pytest does with ``pytest11``. An entry point names either a plugin
class, constructed as ``cls(config)`` with its validated ``Config``, or a module of hookimpls.
Nothing is imported until a plugin is activated, and a plugin that fails to import is reported
with its entry point and distribution instead of taking the others down: whatever it raises,
``SystemExit`` (``sys.exit()`` at import) included. Only ``KeyboardInterrupt`` goes through, as
a user's Ctrl-C is no plugin failure. :func:`find_module` finds a plugin's module without
running any of it, for ``hookgrad config check``.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from importlib.machinery import ModuleSpec
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = [
    "ENTRY_POINT_GROUP",
    "LoadedPlugin",
    "PluginCatalog",
    "PluginImportWarning",
    "PluginLoadError",
    "PluginSource",
    "find_module",
    "load_class_path",
]

T = TypeVar("T")

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

    @property
    def module(self) -> str:
        """The module the entry point names (``pkg.mod`` of ``"pkg.mod:Class"``)."""
        return self.value.partition(":")[0].strip()

    def describe(self) -> str:
        """``entry point NAME = VALUE in DIST VERSION (group hookgrad.plugins)``."""
        dist = self.distribution or "no distribution"
        version = f" {self.version}" if self.version else ""
        return f"entry point {self.name} = {self.value} in {dist}{version} ({ENTRY_POINT_GROUP})"


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


def _isolated(name: str, source: str, load: Callable[[], T]) -> T:
    """``load()``, any failure of the plugin's code (SystemExit too) as a PluginLoadError.

    KeyboardInterrupt propagates: the user stopped the program, the plugin did not fail.
    """
    try:
        return load()
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # sys.exit() at import is a plugin failure too
        raise PluginLoadError(name, source, repr(error)) from error


def _import_object(class_path: str) -> Any:
    module_name, _, attribute = class_path.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split(".") if attribute else ():
        target = getattr(target, part)
    return target


def load_class_path(name: str, class_path: str) -> LoadedPlugin:
    """Import ``"pkg.mod:Class"`` (a plugin without an entry point, from ``class_path``)."""
    source = PluginSource(name, class_path, None, None)
    target = _isolated(name, f"class_path {class_path}", lambda: _import_object(class_path))
    return _inspect(source, target)


def find_module(module_name: str) -> ModuleSpec | None:
    """The spec of ``module_name`` as ``import`` would find it, without running any module.

    ``importlib.util.find_spec("a.b")`` imports ``a`` to read its ``__path__``; here each
    parent's spec gives the folders to search for the next part instead, asking the finders
    of ``sys.meta_path`` (editable installs included) as the import system does. A module
    already imported gives its own spec. None when some part is not found, or a parent is a
    plain module. A package that changes its ``__path__`` when it runs is not followed.
    """
    spec: ModuleSpec | None = None
    parts = module_name.split(".")
    for end in range(1, len(parts) + 1):
        name = ".".join(parts[:end])
        module = sys.modules.get(name)
        if module is not None:
            spec = getattr(module, "__spec__", None)
        elif spec is None and end == 1:
            spec = _find_spec(name, None)
        elif spec is not None and spec.submodule_search_locations is not None:
            spec = _find_spec(name, list(spec.submodule_search_locations))
        else:
            return None
        if spec is None:
            return None
    return spec


def _find_spec(name: str, path: list[str] | None) -> ModuleSpec | None:
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = None if find is None else find(name, path)
        if spec is not None:
            return spec
    return None


class PluginCatalog:
    """The plugins installed in this environment, by name; entry points are read once."""

    def __init__(
        self, entry_points: Callable[[], Iterable[metadata.EntryPoint]] | None = None
    ) -> None:
        self._entry_points = entry_points or (
            lambda: metadata.entry_points(group=ENTRY_POINT_GROUP)
        )
        self._sources: dict[str, PluginSource] | None = None
        self._clashes: dict[str, list[PluginSource]] = {}
        self._by_name: dict[str, metadata.EntryPoint] = {}
        self._loaded: dict[str, LoadedPlugin] = {}

    def sources(self) -> dict[str, PluginSource]:
        """Every installed plugin's source, by name (scanned on first use, then cached).

        A name registered by several distributions maps to the first one found; see
        :meth:`clashes`.
        """
        if self._sources is None:
            sources: dict[str, PluginSource] = {}
            for ep in self._entry_points():
                dist = ep.dist
                source = PluginSource(
                    ep.name,
                    ep.value,
                    None if dist is None else dist.metadata["Name"],
                    None if dist is None else dist.version,
                )
                first = sources.setdefault(ep.name, source)
                if first is source:
                    self._by_name[ep.name] = ep
                elif first != source:
                    self._clashes.setdefault(ep.name, [first]).append(source)
            for clashing in self._clashes.values():
                clashing.sort(key=lambda s: (s.distribution or "", s.version or "", s.value))
            self._sources = sources
        return self._sources

    def clashes(self) -> dict[str, list[PluginSource]]:
        """The names that more than one entry point registers, with all their sources
        (sorted by distribution)."""
        self.sources()
        return self._clashes

    def load(self, name: str) -> LoadedPlugin:
        """Import the plugin ``name``; raises PluginLoadError naming the entry point."""
        if name in self._loaded:
            return self._loaded[name]
        sources = self.sources()
        if name not in sources:
            available = ", ".join(sorted(sources)) or "none installed"
            raise PluginLoadError(name, "no entry point", f"unknown plugin; available: {available}")
        source = sources[name]
        target = _isolated(name, source.describe(), self._by_name[name].load)
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
