"""Shared fixtures: every test starts with grad mode on and a seeded default generator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import hookgrad


@pytest.fixture(autouse=True)
def _fresh_global_state() -> Iterator[None]:
    """Reset the process-wide state a test could leave behind (grad mode, RNG)."""
    hookgrad.manual_seed(0)
    previous = hookgrad.is_grad_enabled()
    hookgrad.set_grad_enabled(True)
    yield
    hookgrad.set_grad_enabled(previous)
