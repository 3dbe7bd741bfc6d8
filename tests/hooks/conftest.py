"""Fixtures for module-hook tests: registering global hooks that are always removed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture
def global_hooks(lib: Any) -> Iterator[Callable[..., Any]]:
    """``global_hooks("forward", hook, **options)`` registers a global hook for this test only."""
    registry = lib.nn.modules.module
    functions = {
        "forward_pre": registry.register_module_forward_pre_hook,
        "forward": registry.register_module_forward_hook,
        "backward_pre": registry.register_module_full_backward_pre_hook,
        "backward": registry.register_module_full_backward_hook,
    }
    handles: list[Any] = []

    def register(kind: str, hook: Callable[..., Any], **options: Any) -> Any:
        handle = functions[kind](hook, **options)
        handles.append(handle)
        return handle

    yield register
    for handle in handles:
        handle.remove()
