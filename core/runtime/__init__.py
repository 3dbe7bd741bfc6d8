"""Runtime services: config loading, event sinks and logging, each usable on its own.

Nothing here is imported by ``import hookgrad`` and nothing happens at import: no file is
read, no logger is configured (structlog's global configuration is never touched).

- Config: ``load_config`` merges the file (or dict), the environment and code overrides, in
  that order, into a validated ``RuntimeConfig``; ``LoadedConfig.explain()`` says where each
  value came from; a bad key raises ``ConfigError`` naming the file, table and valid keys.
- Sinks: ``EventSink`` protocol, ``JsonLinesSink`` (loses nothing on crash), ``MemorySink``,
  ``SinkSet`` (fan-out that survives a failing sink).
- Logging: ``make_logger`` (per-runtime structlog logger, to stderr or to sinks) and
  ``capture_logs`` for tests.
"""

from __future__ import annotations

from ._config import (
    EventsConfig,
    LoadedConfig,
    LogLevel,
    RuntimeConfig,
    load_config,
    validate_plugin_table,
)
from ._errors import ConfigError
from ._logging import LogCapture, capture_logs, make_logger
from ._sinks import EventSink, JsonLinesSink, MemorySink, SinkSet, SinkWarning

__all__ = [
    "ConfigError",
    "EventSink",
    "EventsConfig",
    "JsonLinesSink",
    "LoadedConfig",
    "LogCapture",
    "LogLevel",
    "MemorySink",
    "RuntimeConfig",
    "SinkSet",
    "SinkWarning",
    "capture_logs",
    "load_config",
    "make_logger",
    "validate_plugin_table",
]
