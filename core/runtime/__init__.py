"""Runtime services: config, plugin discovery, the hook bridge, event sinks, logging.

Each service is usable on its own; ``Runtime`` wires them (``hookgrad.Runtime``), and
``configure`` sets up the default runtime (``hookgrad.configure``).

Nothing here is imported by ``import hookgrad`` and nothing happens at import: no file is
read, no logger is configured (structlog's global configuration is never touched).

- Config: ``load_config`` merges the file (or dict), the environment and code overrides, in
  that order, into a validated ``RuntimeConfig``; ``LoadedConfig.explain()`` says where each
  value came from; a bad key raises ``ConfigError`` naming the file, table and valid keys.
- Sinks: ``EventSink`` protocol, ``JsonLinesSink`` (loses nothing on crash), ``MemorySink``,
  ``SinkSet`` (fan-out that survives a failing sink); ``read_events`` reads a JSON-lines log
  back, non-finite numbers as floats (``LogFormatError`` names a bad line).
- Discovery: ``PluginCatalog`` reads the ``hookgrad.plugins`` entry points once, lazily;
  ``load_class_path`` imports a plugin named by ``class_path``; a broken plugin is reported
  with its entry point and distribution (``PluginLoadError``, ``PluginImportWarning``).
- Bridge: ``HookBridge`` turns the engine's module hook points into pluggy calls, registering
  global module hooks only for specs that have implementations.
- Logging: ``make_logger`` (per-runtime structlog logger, to stderr or to sinks) and
  ``capture_logs`` for tests.
"""

from __future__ import annotations

from ..hookspecs import PluginError
from ._bridge import HookBridge
from ._config import (
    EventsConfig,
    LoadedConfig,
    LogLevel,
    RuntimeConfig,
    load_config,
    validate_plugin_table,
)
from ._discovery import (
    ENTRY_POINT_GROUP,
    LoadedPlugin,
    PluginCatalog,
    PluginImportWarning,
    PluginLoadError,
    PluginSource,
    load_class_path,
)
from ._errors import ConfigError
from ._failures import PluginHookWarning
from ._logging import LogCapture, capture_logs, make_logger
from ._loop import LoopHooks
from ._records import LogFormatError, LogLineWarning, read_events
from ._runtime import Runtime, configure
from ._sinks import EventSink, JsonLinesSink, MemorySink, SinkSet, SinkWarning

__all__ = [
    "ENTRY_POINT_GROUP",
    "ConfigError",
    "EventSink",
    "EventsConfig",
    "HookBridge",
    "JsonLinesSink",
    "LoadedConfig",
    "LoadedPlugin",
    "LogCapture",
    "LogFormatError",
    "LogLineWarning",
    "LogLevel",
    "LoopHooks",
    "MemorySink",
    "PluginCatalog",
    "PluginError",
    "PluginHookWarning",
    "PluginImportWarning",
    "PluginLoadError",
    "PluginSource",
    "Runtime",
    "RuntimeConfig",
    "SinkSet",
    "SinkWarning",
    "capture_logs",
    "configure",
    "load_class_path",
    "load_config",
    "make_logger",
    "read_events",
    "validate_plugin_table",
]
