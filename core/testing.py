"""Test helpers for plugin and op authors: ``capture_events``, ``gradcheck`` and ``as_torch``.

``capture_events`` runs a plugin on an isolated runtime: no config file, no environment, no
entry point, only the plugins given, and an in-memory sink whose records the test reads::

    from hookgrad.testing import capture_events

    with capture_events(ClampGradInput(ClampGradInput.Config(limit=0.5))) as capture:
        model(x).sum().backward()
    assert capture.records == []  # nothing logged, nothing emitted

``as_torch`` runs torch code unchanged on hookgrad, its own ``import torch`` lines included::

    with as_torch():
        runpy.run_path("train.py")
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ._torch_alias import as_torch
from .autograd import gradcheck
from .hookspecs import PluginConfig
from .nn.modules import module as _registry
from .runtime import MemorySink, PluginCatalog, Runtime
from .runtime._config import EngineChoice

__all__ = ["EventCapture", "as_torch", "capture_events", "global_hook_counts", "gradcheck"]


class EventCapture:
    """What ``capture_events`` yields: the ``runtime`` and the sink's ``records``."""

    __slots__ = ("runtime", "sink")

    def __init__(self, runtime: Runtime, sink: MemorySink) -> None:
        self.runtime = runtime
        self.sink = sink

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every record written to the runtime's sinks: plugin records and log entries."""
        return self.sink.records

    def of_plugin(self, name: str) -> list[dict[str, Any]]:
        """The records plugin ``name`` emitted (``runtime.emit``), in order."""
        return [r for r in self.sink.records if r.get("plugin") == name and "kind" in r]


@contextmanager
def capture_events(
    *plugins: object | tuple[str, object],
    config: Mapping[str, PluginConfig | Mapping[str, Any]] | None = None,
    engine: EngineChoice = "auto",
) -> Iterator[EventCapture]:
    """Run ``plugins`` on an isolated, started runtime; close it when the block ends.

    Each plugin is an object (registered under its class or module name) or a
    ``(name, plugin)`` pair. Its settings are ``config[name]`` (a PluginConfig or a table
    validated against the plugin's ``Config``), else as :meth:`Runtime.register` picks them.
    Nothing is read from files, the environment or entry points; the logger logs every level
    to the capture's sink. ``engine`` is the runtime's ``engine`` key: ``"hookgrad"`` keeps a
    torch model trained beside as an oracle out of the events.
    """
    runtime = Runtime(
        {"log_level": "debug"}, environ={}, catalog=PluginCatalog(tuple), engine=engine
    )
    sink = MemorySink()
    runtime.sinks.add(sink)
    settings = config or {}
    try:
        for item in plugins:
            name, plugin = item if isinstance(item, tuple) else (None, item)
            key = name or _default_name(plugin)
            runtime.register(plugin, name=key, config=settings.get(key))
        with runtime:
            yield EventCapture(runtime, sink)
    finally:
        runtime.close()


def _default_name(plugin: object) -> str:
    return getattr(plugin, "__name__", None) or type(plugin).__name__


def global_hook_counts() -> dict[str, int]:
    """How many global module hooks of each kind are registered right now.

    For plugin authors checking that a hook their config switches off costs nothing (no global
    hook, so module calls keep the fast path). ``forward_with_kwargs`` and
    ``forward_always_called`` count the forward hooks registered with those flags.
    """
    return {
        "forward_pre": len(_registry._global_forward_pre_hooks),
        "forward": len(_registry._global_forward_hooks),
        "forward_with_kwargs": len(_registry._global_forward_hooks_with_kwargs),
        "forward_always_called": len(_registry._global_forward_hooks_always_called),
        "backward_pre": len(_registry._global_backward_pre_hooks),
        "backward": len(_registry._global_backward_hooks),
    }
