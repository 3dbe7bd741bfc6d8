"""Fixtures for the hook bridge: isolated plugin managers and bridges that are always detached."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pluggy
import pytest

from hookgrad import testing
from hookgrad.hookspecs import PROJECT_NAME, PluginConfig, hookimpl, specs
from hookgrad.runtime._bridge import HookBridge


def global_hook_counts() -> list[int]:
    """How many entries each global module hook table holds (forward pre ... backward)."""
    return list(testing.global_hook_counts().values())


class Recorder:
    """Records (phase, module_name, call_index, module_type) of every module event it hears."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int, str]] = []

    def _record(self, event: Any) -> None:
        self.events.append((event.phase, event.module_name, event.call_index, event.module_type))

    @hookimpl
    def hookgrad_forward_pre(self, event: Any) -> None:
        self._record(event)

    @hookimpl
    def hookgrad_forward(self, event: Any) -> None:
        self._record(event)

    @hookimpl
    def hookgrad_backward_pre(self, event: Any) -> None:
        self._record(event)

    @hookimpl
    def hookgrad_full_backward(self, event: Any) -> None:
        self._record(event)


@pytest.fixture
def pm() -> pluggy.PluginManager:
    """An isolated plugin manager for project "hookgrad" with the specs added."""
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(specs)
    return manager


@pytest.fixture
def make_bridge(
    pm: pluggy.PluginManager,
) -> Iterator[Callable[..., HookBridge]]:
    """``make_bridge(configs, **options)``: an attached bridge, detached after the test."""
    bridges: list[HookBridge] = []

    def make(configs: Mapping[str, PluginConfig] | None = None, **options: Any) -> HookBridge:
        bridge = HookBridge(pm, configs or {}, **options)
        bridges.append(bridge)
        return bridge.attach()

    yield make
    for bridge in bridges:
        bridge.detach()
    assert global_hook_counts() == [0] * 6
