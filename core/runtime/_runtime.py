"""``Runtime``: the one object that wires config, plugins, sinks, logging and the hook points.

A runtime is built in two steps. Constructing it reads the config, loads, validates,
constructs and registers the active plugins, opens the sinks and builds the logger; nothing
global changes yet. :meth:`Runtime.start` configures the plugins and installs the hooks (the
bridge's module hooks and the training-loop points); :meth:`Runtime.close` undoes all of it.
``with Runtime(...) as rt:`` does both. :func:`configure` keeps one *default* runtime, the
only state this module holds (:data:`_DEFAULT`).

Which plugins are active is decided by :func:`._activation.check_config`, the path
``hookgrad config check`` follows too: a ``[plugins.NAME]`` table activates the plugin NAME
unless ``enabled = false`` or NAME is in ``disable``; a name that matches nothing is a
ConfigError. A third-party plugin is skipped with a PluginImportWarning while ``autoload`` is
off (config or ``HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD``), and a plugin that fails to load warns
and is skipped (``strict = true``: both raise PluginLoadError).
Installed plugins without a table are never activated: a gradient plugin changes training,
so it runs only when named.
"""

from __future__ import annotations

import os
import threading
import types
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any

import pluggy
from structlog.typing import FilteringBoundLogger

from ..engines import Engine, available_engines, engine_named, process_rank
from ..hookspecs import PROJECT_NAME, PluginConfig, PluginRecord, call_order, specs
from ._activation import check_config, plugin_settings, unmatched_selection
from ._bridge import HookBridge
from ._config import EngineChoice, LoadedConfig, load_config, validate_plugin_table
from ._discovery import LoadedPlugin, PluginCatalog, PluginImportWarning, PluginLoadError
from ._logfile import LogFileError
from ._logging import make_logger
from ._loop import LoopHooks
from ._sinks import JsonLinesSink, MemorySink, SinkSet
from ._tensorboard import TensorBoardSink
from ._threads import ThreadPolicy

__all__ = ["EventLogPathWarning", "Runtime", "configure"]

Source = str | os.PathLike[str] | Mapping[str, Any] | None


class EventLogPathWarning(UserWarning):
    """A relative ``events.jsonl`` leads outside the folder the runtime works in (``../x``);
    the message says where the log goes."""


class Runtime:
    """Wires the services: config, plugins (pluggy), sinks, logger, hook bridge, loop points.

    Args:
        source: a config file, a dict, or None to look for ``hookgrad.toml``, then
            ``[tool.hookgrad]`` in ``pyproject.toml``, then ``HOOKGRAD_CONFIG``.
        overrides: code-level config, above the file and the environment.
        environ: the environment to read (default ``os.environ``).
        cwd: where config files and a relative ``events.jsonl`` path are looked up
            (default: the current directory).
        catalog: the installed plugins (default: the process-wide catalog, scanned once).
        threads: whose work the runtime acts on: ``"starter"`` (default), the module calls,
            backward passes and optimizer steps of the thread that calls :meth:`start` only;
            ``"all"``, every thread's, each thread with its own calls in progress.
        engine: the ``engine`` key in the code layer (as ``overrides={"engine": ...}``):
            ``"auto"``, ``"hookgrad"`` or ``"torch"``. The engines are chosen by :meth:`start`.

    Raises:
        ConfigError: a bad config value, a bad key in a plugin table, an unknown plugin name
            (in a table or ``disable``), a name two distributions register.
        PluginLoadError: a plugin failed to load and ``strict = true``.
        pluggy.PluginValidationError: a plugin implements a hook that is no hookspec.
    """

    def __init__(
        self,
        source: Source = None,
        *,
        overrides: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        catalog: PluginCatalog | None = None,
        threads: ThreadPolicy = "starter",
        engine: EngineChoice | None = None,
    ) -> None:
        if engine is not None:
            overrides = {**(overrides or {}), "engine": engine}
        self._config = load_config(source, overrides=overrides, environ=environ, cwd=cwd)
        self._pm = pluggy.PluginManager(PROJECT_NAME)
        self._pm.add_hookspecs(specs)
        self._plugins: dict[str, object] = {}
        self._configs: dict[str, PluginConfig] = {}
        base = Path.cwd() if cwd is None else Path(cwd)
        for loaded in _active_plugins(self._config, catalog or _DEFAULT.catalog(), base):
            config = plugin_settings(self._config, loaded)
            self._add(loaded.source.name, loaded.create(config), config)
        self._sinks, self._memory = _build_sinks(self._config, base)
        self._rank = process_rank()[0]  # the rank the event log's path was chosen for
        self._log: FilteringBoundLogger = make_logger(self._config.config.log_level, self._sinks)
        self._bridge = HookBridge(
            self._pm, self._configs, on_error_log=self._log_plugin_error, threads=threads
        )
        buffered = self._config.config.events.durability == "buffered"
        self._loop = LoopHooks(
            self._pm,
            self._configs,
            self._bridge,
            on_step_end=None if buffered else self._sinks.flush,
            on_models_known=self._check_selections,
        )
        self._state = "built"  # -> "started" -> "closed"
        self._configured: set[str] = set()

    # ------------------------------------------------------------------ properties
    @property
    def pm(self) -> pluggy.PluginManager:
        """The plugin manager (project ``"hookgrad"``, specs added)."""
        return self._pm

    @property
    def config(self) -> LoadedConfig:
        """The merged, validated configuration and where each value came from."""
        return self._config

    @property
    def plugins(self) -> Mapping[str, object]:
        """Registered plugin objects by name, in registration order (read-only view)."""
        return MappingProxyType(self._plugins)

    @property
    def plugin_configs(self) -> Mapping[str, PluginConfig]:
        """Each registered plugin's validated settings, by name (read-only view)."""
        return MappingProxyType(self._configs)

    @property
    def sinks(self) -> SinkSet:
        """Where records go; a plugin may ``add`` its own sink in ``hookgrad_configure``."""
        return self._sinks

    @property
    def memory(self) -> MemorySink | None:
        """The in-memory sink of ``events.memory = true``, else None."""
        return self._memory

    @property
    def log(self) -> FilteringBoundLogger:
        """The runtime's structlog logger; entries go to the sinks."""
        return self._log

    @property
    def bridge(self) -> HookBridge:
        """The module hook bridge (engine module hooks -> plugins)."""
        return self._bridge

    @property
    def engines(self) -> tuple[Engine, ...]:
        """The engines whose models the runtime drives, chosen by :meth:`start` (``engine``)."""
        return self._bridge.engines

    @property
    def step(self) -> int:
        """The training step: advances after each optimizer step, taken or vetoed."""
        return self._bridge.step

    @property
    def started(self) -> bool:
        return self._state == "started"

    @property
    def closed(self) -> bool:
        return self._state == "closed"

    # ------------------------------------------------------------------ plugins
    def register(
        self,
        plugin: object,
        *,
        name: str | None = None,
        config: PluginConfig | Mapping[str, Any] | None = None,
    ) -> str:
        """Activate a plugin object from code; returns the name it is registered under.

        ``name`` defaults to the module's name or the class name. ``config`` is its settings
        (a table is validated against the plugin's ``Config``); by default the plugin's own
        ``config`` attribute if it is a PluginConfig, else its ``Config()`` defaults. On a
        started runtime the plugin is configured at once and hears events from then on.
        """
        if name is None:
            name = (
                plugin.__name__ if isinstance(plugin, types.ModuleType) else type(plugin).__name__
            )
        self._add(name, plugin, _settings_of(name, plugin, config))
        if self.started:
            self._configure_plugins([name])
            self._refresh()
        return name

    def unregister(self, name: str) -> object:
        """Deactivate the plugin ``name`` (unconfigured first if configured); returns it."""
        if name not in self._plugins:
            raise KeyError(f"no plugin named {name!r}; registered: {', '.join(self._plugins)}")
        if name in self._configured:
            self._unconfigure_plugins([name])
        plugin = self._pm.unregister(name=name)
        del self._plugins[name], self._configs[name]
        self._refresh()
        return plugin

    def watch(self, *modules: Any) -> None:
        """Name optimizer parameters after these models (held weakly): ``fc.weight``.

        Needed only when no plugin implements a module hook (then the bridge sees no model
        called) and the optimizer was not built from ``named_parameters()``.
        """
        for module in modules:
            self._loop.watch(module)

    def _add(self, name: str, plugin: object, config: PluginConfig) -> None:
        if name in self._plugins:
            raise ValueError(f"a plugin named {name!r} is already registered")
        self._pm.register(plugin, name=name)
        try:
            self._pm.check_pending()  # a misspelled hookgrad_* hook name fails here
        except pluggy.PluginValidationError:
            self._pm.unregister(name=name)
            raise
        self._plugins[name] = plugin
        self._configs[name] = config

    def _refresh(self) -> None:
        self._bridge.refresh()
        self._loop.refresh()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Runtime:
        """Choose the engines (``engine``), configure every plugin (call order), attach the
        bridge, install the loop points.

        Idempotent. A plugin's ``hookgrad_configure`` failing follows its ``on_error``; under
        "raise" the runtime closes and the PluginError propagates. A closed runtime cannot
        start again (RuntimeError). The calling thread becomes the one whose work the runtime
        acts on (unless ``threads="all"``).
        """
        if self._state == "started":
            return self
        if self._state == "closed":
            raise RuntimeError("this Runtime is closed; build a new one")
        self._state = "started"
        try:
            engines = _chosen_engines(self._config)
            self._bridge.engines = self._loop.engines = engines
            self._configure_plugins(self._plugins)
            self._bridge.attach()
            self._loop.attach()
        except BaseException as error:
            self._close(propagating=error)
            raise
        _STARTED.append(self)
        return self

    def close(self) -> None:
        """Remove every hook, unconfigure the plugins (reverse order), close the sinks.

        Idempotent. Every step runs whatever a plugin's ``hookgrad_unconfigure`` does; a
        failure there follows the plugin's ``on_error``, and under "raise" the first
        PluginError is raised at the end.
        """
        self._close(propagating=None)

    def _close(self, propagating: BaseException | None) -> None:
        """:meth:`close`; while ``propagating`` is on its way out (a Ctrl-C, a crash), a
        plugin failing to unconfigure is logged and never replaces it."""
        if self._state == "closed":
            return
        self._state = "closed"
        if self in _STARTED:
            _STARTED.remove(self)
        self._loop.detach()
        self._bridge.detach()
        try:
            self._unconfigure_plugins(self._configured, raise_first=propagating is None)
        finally:
            self._sinks.flush()
            self._sinks.close()
            _DEFAULT.forget(self)

    def _configure_plugins(self, names: Iterable[str]) -> None:
        wanted = set(names)
        for impl in call_order(self._pm, "hookgrad_configure"):
            if impl.plugin_name in wanted:
                self._configured.add(impl.plugin_name)
                self._call_lifecycle(impl, "configure")
        self._configured |= wanted

    def _unconfigure_plugins(self, names: Iterable[str], *, raise_first: bool = True) -> None:
        wanted = set(names)
        first: Exception | None = None
        for impl in reversed(call_order(self._pm, "hookgrad_unconfigure")):
            if impl.plugin_name in wanted:
                try:
                    self._call_lifecycle(impl, "unconfigure")
                except Exception as error:  # on_error="raise": a PluginError
                    self._log.error(
                        "unconfigure_error",
                        plugin=impl.plugin_name,
                        error=repr(error.__cause__ or error),
                    )
                    first = first or error
        self._configured -= wanted
        if first is not None and raise_first:
            raise first

    def _call_lifecycle(self, impl: pluggy.HookImpl, phase: str) -> None:
        """``hookgrad_<phase>`` of one plugin; a failure follows its ``on_error``. A plugin
        disabled by its ``on_error`` is not called again, not even to unconfigure."""
        name = impl.plugin_name
        failures = self._bridge.failures
        if name in failures.disabled:
            return
        try:
            _call(impl, runtime=self)
        except Exception as error:
            on_error = self._configs[name].on_error if name in self._configs else "raise"
            failures.failed(name, on_error, error, hook=f"hookgrad_{phase}", phase=phase)

    def __enter__(self) -> Runtime:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None and not self.closed:
            self._log.error("exception", error=repr(exc), exc_info=(exc_type, exc, tb))
        self._close(propagating=exc)

    # ------------------------------------------------------------------ records
    def emit(self, record: PluginRecord | Mapping[str, Any], *, trusted: bool = False) -> None:
        """Write a plugin's record to the sinks (a dict is validated as a PluginRecord).

        ``step`` defaults to the runtime's step. Raises pydantic's ValidationError on a
        record that is not PluginRecord-shaped.

        ``trusted=True`` skips the checks, for a plugin that emits dozens of records per step
        and builds them right by construction: the record must already be the JSON form, a
        dict with exactly the keys ``plugin``, ``kind``, ``step``, ``module_name`` and
        ``data`` (a dict of JSON values). A sink still refuses what it cannot write, naming
        the key (:class:`~hookgrad.runtime.JsonLinesSink`).

        Every record written carries ``rank``: this process's rank in a distributed run, 0
        outside one (:func:`hookgrad.engines.process_rank` when the runtime was built, as for
        the path of its event log), whatever the plugin put there.
        """
        if trusted:
            self._sinks.write({**record, "rank": self._rank})  # type: ignore[dict-item]
        elif isinstance(record, PluginRecord):
            self._sinks.write({**record.summary(), "rank": self._rank})
        else:
            self._sinks.write(PluginRecord.json_of(record, step=self.step, rank=self._rank))

    def _check_selections(self, roots: tuple[Any, ...]) -> None:
        """ConfigError if a plugin's ``modules`` or ``module_types`` selects nothing in these
        models (a typo would otherwise silently switch the plugin off)."""
        modules = [
            (name, type(module).__name__) for root in roots for name, module in root.named_modules()
        ]
        for plugin, config in self._configs.items():
            error = unmatched_selection(self._config, plugin, config, modules)
            if error is not None:
                raise error

    def _log_plugin_error(
        self, *, plugin: str, hook: str, module: str, phase: str, error: BaseException
    ) -> None:
        self._log.error(
            "plugin_error",
            plugin=plugin,
            hook=hook,
            module=module,
            phase=phase,
            step=self.step,
            error=repr(error),
        )

    def __repr__(self) -> str:
        return f"<Runtime {self._state} plugins={list(self._plugins)} step={self.step}>"


# ---------------------------------------------------------------------- the started runtimes
_STARTED: list[Runtime] = []
"""The runtimes started and not yet closed, in the order they started."""


def running_runtime() -> Runtime | None:
    """The started runtime acting on the calling thread's work (its owner check passes), the
    latest started if several do; None when none does. What scoped taps count steps with."""
    for runtime in reversed(tuple(_STARTED)):
        if runtime.bridge.acts_here():
            return runtime
    return None


# ---------------------------------------------------------------------- the default runtime
class _DefaultRuntime:
    """The default runtime of :func:`configure` and the process-wide plugin catalog."""

    __slots__ = ("_catalog", "lock", "runtime")

    def __init__(self) -> None:
        self.runtime: Runtime | None = None
        self._catalog: PluginCatalog | None = None
        self.lock = threading.RLock()  # one configure() at a time: one default runtime

    def catalog(self) -> PluginCatalog:
        """The installed plugins; the entry points are scanned on first use only."""
        if self._catalog is None:
            self._catalog = PluginCatalog()
        return self._catalog

    def forget(self, runtime: Runtime) -> None:
        with self.lock:
            if self.runtime is runtime:
                self.runtime = None


_DEFAULT = _DefaultRuntime()


def configure(
    source: Source = None, *, threads: ThreadPolicy = "starter", **overrides: Any
) -> Runtime:
    """Set up the default runtime: build it, close the previous default one, start it.

    ``source`` as for :class:`Runtime`; keyword arguments are code overrides
    (``configure(plugins={"grad_clip": {"max_norm": 1.0}})``). The returned runtime also
    works as a context manager that undoes everything on exit. If building fails, the
    previous default runtime stays as it was. The runtime acts on the calling thread's work
    (``threads="all"``: every thread's, see :class:`Runtime`). Calls from several threads
    take turns, so exactly one default runtime is left started.
    """
    with _DEFAULT.lock:
        runtime = Runtime(source, overrides=overrides or None, threads=threads)
        previous = _DEFAULT.runtime
        if previous is not None:
            previous.close()
        runtime.start()
        _DEFAULT.runtime = runtime
        return runtime


# ---------------------------------------------------------------------- helpers
def _call(impl: pluggy.HookImpl, **kwargs: Any) -> Any:
    """Call one implementation with the keyword arguments it names (as pluggy does)."""
    return impl.function(**{name: kwargs[name] for name in impl.argnames if name in kwargs})


def _chosen_engines(loaded: LoadedConfig) -> tuple[Engine, ...]:
    """The engines whose models the runtime drives, as the ``engine`` key says: ``"auto"``,
    every engine already imported now (never importing torch); else the one named."""
    choice = loaded.config.engine
    return tuple(available_engines()) if choice == "auto" else (engine_named(choice),)


def _settings_of(
    name: str, plugin: object, config: PluginConfig | Mapping[str, Any] | None
) -> PluginConfig:
    """A code-registered plugin's settings (see :meth:`Runtime.register`)."""
    model = getattr(plugin, "Config", None)
    if not (isinstance(model, type) and issubclass(model, PluginConfig)):
        model = PluginConfig
    if config is None:
        own = getattr(plugin, "config", None)
        return own if isinstance(own, PluginConfig) else model()
    if isinstance(config, PluginConfig):
        return config
    return validate_plugin_table(name, config, model)


def _build_sinks(loaded: LoadedConfig, base: Path) -> tuple[SinkSet, MemorySink | None]:
    """The sinks ``[events]`` asks for; ConfigError if the log cannot be written where asked."""
    events = loaded.config.events
    sinks = SinkSet()
    memory = None
    path = loaded.event_log_path(base)
    if path is not None:
        if not Path(events.jsonl or "").expanduser().is_absolute() and not _inside(path, base):
            warnings.warn(
                f"the event log goes to {str(path.resolve())!r}, outside {str(base.resolve())!r}",
                EventLogPathWarning,
                stacklevel=4,
            )
        try:
            sinks.add(JsonLinesSink(path, durability=events.durability))
        except (OSError, LogFileError) as error:
            reason = error.strerror if isinstance(error, OSError) else str(error)
            raise loaded.event_log_error(path, reason or repr(error)) from error
    if events.memory:
        memory = MemorySink()
        sinks.add(memory)
    logdir = loaded.tensorboard_dir(base)
    if logdir is not None:
        try:
            sinks.add(TensorBoardSink(logdir, events.histogram_every))
        except OSError as error:
            sinks.close()
            raise loaded.events_error("tensorboard", error.strerror or repr(error)) from error
    return sinks, memory


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def _active_plugins(loaded: LoadedConfig, catalog: PluginCatalog, base: Path) -> list[LoadedPlugin]:
    """The plugins to activate, loaded, in config order (rules in :mod:`._activation`)."""
    active = []
    for planned in check_config(loaded, catalog, base):
        try:
            active.append(planned.load(catalog))
        except PluginLoadError as error:
            if loaded.config.strict:
                raise
            warnings.warn(str(error), PluginImportWarning, stacklevel=4)
    return active
