"""Fixtures for the runtime services: no HOOKGRAD_* variable leaks in from the shell."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_hookgrad_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove every HOOKGRAD_* variable, so each test sets exactly the environment it needs."""
    for name in list(os.environ):
        if name.startswith("HOOKGRAD_"):
            monkeypatch.delenv(name)
