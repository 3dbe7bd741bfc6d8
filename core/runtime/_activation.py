"""Which plugins a config activates, and the checks of each: one path for ``Runtime`` and
``hookgrad config check``, so the check accepts exactly what the runtime accepts.

:func:`check_config` reads the config and the catalog and imports nothing: it names the plugin
each enabled ``[plugins.NAME]`` table asks for, or raises ConfigError for a name that matches
nothing (in a table, in ``disable``, in ``HOOKGRAD_PLUGINS``) or that two distributions
register. :meth:`Planned.load` imports a plugin; :meth:`Planned.locate` finds its module
without running it, for a check that must not execute code it was not asked to.
:func:`plugin_settings` validates an imported plugin's table and hook names.

The rules, per table in config order (``HOOKGRAD_PLUGINS=a,b`` adds tables ``{enabled = true}``):

* a table with ``enabled = false`` is skipped without importing anything;
* a table with ``class_path`` imports that class, entry point or not, autoload or not;
* otherwise the name must be an entry point of ``hookgrad.plugins`` registered by one
  distribution; a third-party one is blocked while ``autoload`` is off;
* a name listed in ``disable`` is then skipped, whatever its table says; every name in
  ``disable`` must name an installed plugin or a table with a ``class_path``.
"""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Final, cast

import pluggy

from ..hookspecs import PROJECT_NAME, PluginConfig, specs
from ._config import LoadedConfig
from ._discovery import (
    LoadedPlugin,
    PluginCatalog,
    PluginLoadError,
    PluginSource,
    find_module,
    load_class_path,
)
from ._errors import ConfigError, Origin, validate_model

__all__ = [
    "Planned",
    "Unmatched",
    "check_config",
    "hooks_of",
    "plugin_settings",
    "unknown_hooks",
    "unknown_plugin_error",
    "unmatched_in",
]

_HOOKSPECS: Final = frozenset(specs.__all__)
_OWN_PACKAGE: Final = "hookgrad"


@dataclass(frozen=True, slots=True)
class Planned:
    """A plugin the config activates: an entry point, or a ``class_path``."""

    name: str
    source: PluginSource
    """The entry point; for a ``class_path``, a source with that value and no distribution."""
    class_path: str | None
    blocked: str | None
    """Why it is not loaded (autoload is off), or None."""

    @property
    def own(self) -> bool:
        """Whether it is hookgrad's own code: a built-in, or a ``class_path`` into hookgrad."""
        if self.class_path is not None:
            return self.source.module.partition(".")[0] == _OWN_PACKAGE
        return self.source.builtin

    def _where(self) -> str:
        return f"class_path {self.class_path}" if self.class_path else self.source.describe()

    def load(self, catalog: PluginCatalog) -> LoadedPlugin:
        """Import the plugin (PluginLoadError if it fails or is blocked)."""
        if self.blocked is not None:
            raise PluginLoadError(self.name, self._where(), self.blocked)
        if self.class_path is not None:
            return load_class_path(self.name, self.class_path)
        return catalog.load(self.name)

    def locate(self) -> str:
        """Find the plugin's module without running it: ``"module found at PATH"``.

        Raises PluginLoadError, as :meth:`load` would, when it is blocked or its module does
        not exist. Whether the module imports and holds a plugin is left unknown.
        """
        if self.blocked is not None:
            raise PluginLoadError(self.name, self._where(), self.blocked)
        spec = find_module(self.source.module)
        if spec is None:
            raise PluginLoadError(
                self.name, self._where(), f"ModuleNotFoundError: no module {self.source.module!r}"
            )
        found = spec.origin if spec.has_location and spec.origin else "(a namespace package)"
        return f"{self._where()}, module found at {found}"


def check_config(loaded: LoadedConfig, catalog: PluginCatalog, base: Path) -> list[Planned]:
    """Check ``loaded`` as far as it can be without importing a plugin; return the plugins it
    activates, in config order.

    ``Runtime`` calls this before it imports or builds anything, and ``hookgrad config check``
    calls it too: a check of the config against this machine belongs here, so both make it.
    Raises ConfigError for an unknown plugin name (a table, ``disable``), an ambiguous one,
    a malformed ``class_path``, an ``events.jsonl`` path (relative to ``base``) that the
    event log cannot be written to, an ``events.tensorboard`` directory that is a file or
    needs tensorboardX where it is missing, or ``engine = "torch"`` where torch is not
    installed.
    """
    loaded.event_log_path(base)
    loaded.tensorboard_dir(base)
    _check_engine(loaded)
    config = loaded.config
    sources = catalog.sources()
    planned = []
    for name, table in config.plugins.items():
        if table.get("enabled", True) is False:
            continue
        class_path = _class_path(loaded, name, table)
        if class_path is None and name not in sources:
            raise unknown_plugin_error(loaded, name, sorted(sources))
        if name in config.disable:
            continue
        if class_path is not None:
            source = PluginSource(name, class_path, None, None)
            planned.append(Planned(name, source, class_path, None))
            continue
        if name in catalog.clashes():
            raise _ambiguous_error(loaded, name, catalog.clashes()[name])
        planned.append(Planned(name, sources[name], None, _blocked(loaded, sources[name])))
    _check_disable(loaded, sources)  # after the tables: an unknown table name is named first
    return planned


def plugin_settings(loaded: LoadedConfig, plugin: LoadedPlugin) -> PluginConfig:
    """Validate ``[plugins.NAME]`` against the plugin's Config, and its hooks' names.

    Raises ConfigError naming the key and its layer, or pluggy.PluginValidationError naming
    the entry point and a hook that is no hookgrad hookspec (pluggy would refuse it later).
    """
    name = plugin.source.name
    unknown = unknown_hooks(plugin.target)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(_HOOKSPECS), n=1)
        guess = f"; did you mean {close[0]!r}?" if close else ""
        where = plugin.source.describe() if plugin.source.distribution else "class_path"
        raise pluggy.PluginValidationError(
            plugin.target,
            f"plugin {name!r} ({where} {plugin.source.value}): unknown hook {unknown[0]!r}"
            f"{guess} (hooks are listed in hookgrad.hookspecs.specs)",
        )
    model = cast(type[PluginConfig], plugin.config_model)
    return loaded.plugin_config(name, model)


def hooks_of(target: object) -> list[str]:
    """The hook names pluggy would register for ``target`` (a plugin class or module), sorted."""
    return sorted(_hookimpls(target))


def unknown_hooks(target: object) -> list[str]:
    """The hooks of ``target`` that are no hookgrad hookspec and not marked ``optionalhook``
    (pluggy's ``check_pending`` refuses exactly these), sorted."""
    impls = _hookimpls(target)
    return sorted(n for n, optional in impls.items() if n not in _HOOKSPECS and not optional)


def _hookimpls(target: object) -> dict[str, bool]:
    """Each hook ``target`` implements, and whether it is marked ``optionalhook``."""
    pm = pluggy.PluginManager(PROJECT_NAME)
    impls: dict[str, bool] = {}
    for attribute in dir(target):
        try:
            opts = pm.parse_hookimpl_opts(target, attribute)
        except Exception:  # a descriptor that raises on class access is not a hook
            continue
        if opts is not None:
            impls[opts.get("specname") or attribute] = bool(opts.get("optionalhook"))
    return impls


def unknown_plugin_error(loaded: LoadedConfig, name: str, available: list[str]) -> ConfigError:
    """The error for ``[plugins.NAME]`` naming no installed plugin: where, a guess, the choices."""
    origin = loaded._origin(("plugins", name))
    header = ".".join((*origin.prefix, "plugins", name))
    return _unknown_name(
        origin,
        name,
        f"([{header}])",
        available,
        " (a plugin without entry point needs a class_path)",
        table="plugins",
        key=name,
    )


def _unknown_name(
    origin: Origin,
    name: str,
    where: str,
    available: list[str],
    hint: str = "",
    *,
    table: str,
    key: str,
) -> ConfigError:
    """``FILE: unknown plugin 'x' WHERE; did you mean 'y'? available plugins: ...HINT``."""
    close = difflib.get_close_matches(name, available, n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    listing = ", ".join(available) if available else "none installed"
    return ConfigError(
        f"{origin.where}: unknown plugin {name!r} {where}; {guess}available plugins: "
        f"{listing}{hint}",
        path=origin.path,
        table=table,
        key=key,
        valid_keys=available,
    )


@dataclass(frozen=True, slots=True)
class Unmatched:
    """A ``modules`` glob or ``module_types`` name (``key``, ``value``) selecting none of the
    modules, whose names or classes are ``choices``."""

    key: str
    value: str
    choices: list[str]
    what: str
    """``"module name"`` or ``"module class"``."""

    def describe(self, models: str) -> str:
        """``matches no module name of MODELS; did you mean 'x'? (module names: ...)``."""
        close = difflib.get_close_matches(self.value, self.choices, n=1)
        guess = f"; did you mean {close[0]!r}?" if close else ""
        shown = ", ".join(repr(choice) for choice in self.choices[:12])
        more = f" and {len(self.choices) - 12} more" if len(self.choices) > 12 else ""
        plural = f"{self.what}es" if self.what.endswith("s") else f"{self.what}s"
        return f"matches no {self.what} of {models}{guess} ({plural}: {shown}{more})"


def unmatched_in(config: PluginConfig, modules: Sequence[tuple[str, str]]) -> Unmatched | None:
    """The first ``modules`` glob or ``module_types`` name of ``config`` that matches none of
    ``modules`` ((qualified name, class name) pairs), or None when each matches some module."""
    names = sorted({name for name, _ in modules})
    for glob in config.modules:
        if not any(fnmatchcase(name, glob) for name in names):
            return Unmatched("modules", glob, names, "module name")
    types = sorted({kind for _, kind in modules})
    for kind in config.module_types:
        if kind not in types:
            return Unmatched("module_types", kind, types, "module class")
    return None


def unmatched_selection(
    loaded: LoadedConfig, plugin: str, config: PluginConfig, modules: Sequence[tuple[str, str]]
) -> ConfigError | None:
    """The error for a ``modules`` glob or ``module_types`` name of ``plugin`` that matches
    none of ``modules`` ((qualified name, class name) of every module of the models trained),
    with a did-you-mean; None when each matches some module.

    Only the models tell whether a selection can ever select anything, so the runtime checks
    this once it knows them (at the first optimizer step, or when a model is watched).
    """
    unmatched = unmatched_in(config, modules)
    if unmatched is None:
        return None
    origin = loaded._origin(("plugins", plugin, unmatched.key))
    where = ".".join((*origin.prefix, "plugins", plugin, unmatched.key))
    return ConfigError(
        f"{origin.where}: {where} = [{unmatched.value!r}] "
        f"{unmatched.describe('the models trained')}",
        path=origin.path,
        table=f"plugins.{plugin}",
        key=unmatched.key,
    )


def _check_disable(loaded: LoadedConfig, sources: Mapping[str, PluginSource]) -> None:
    """Every name in ``disable`` names an installed plugin or a table with a class_path."""
    config = loaded.config
    known = sorted({*sources, *(n for n, t in config.plugins.items() if t.get("class_path"))})
    for index, name in enumerate(config.disable):
        if name in known:
            continue
        origin = loaded._origin(("disable",))
        raise _unknown_name(origin, name, "in disable", known, table="", key=f"disable[{index}]")


def _check_engine(loaded: LoadedConfig) -> None:
    """``engine = "torch"`` needs torch installed (found without importing it)."""
    if loaded.config.engine != "torch" or importlib.util.find_spec("torch") is not None:
        return
    origin = loaded._origin(("engine",))
    key = ".".join((*origin.prefix, "engine"))
    raise ConfigError(
        f"{origin.where}: {key} = 'torch' but torch is not installed; "
        "pip install 'hookgrad[torch]'",
        path=origin.path,
        table="",
        key="engine",
    )


def _class_path(loaded: LoadedConfig, name: str, table: Mapping[str, Any]) -> str | None:
    """The table's ``class_path``, checked for shape (ConfigError naming its layer)."""
    if "class_path" not in table:
        return None
    checked = validate_model(
        PluginConfig, {"class_path": table["class_path"]}, loaded._origin, ("plugins", name)
    )
    return checked.class_path


def _blocked(loaded: LoadedConfig, source: PluginSource) -> str | None:
    if source.builtin or loaded.config.autoload:
        return None
    setter = loaded._origin(("autoload",)).label
    return (
        f"third-party plugins are not loaded: autoload is off (set by {setter}); "
        "give its table a class_path to load it anyway"
    )


def _ambiguous_error(loaded: LoadedConfig, name: str, sources: list[PluginSource]) -> ConfigError:
    origin = loaded._origin(("plugins", name))
    header = ".".join((*origin.prefix, "plugins", name))
    listing = "; ".join(source.describe() for source in sources)
    return ConfigError(
        f"{origin.where}: plugin {name!r} ([{header}]) is ambiguous: {len(sources)} "
        f"distributions register it: {listing}. Uninstall one, or give the table a "
        "class_path to choose",
        path=origin.path,
        table="plugins",
        key=name,
    )
