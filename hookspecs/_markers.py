"""The pluggy markers for the project name ``"hookgrad"``."""

from __future__ import annotations

from typing import Final

import pluggy

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec"]

PROJECT_NAME: Final = "hookgrad"
"""The pluggy project name: ``pluggy.PluginManager(PROJECT_NAME)`` accepts hookgrad's specs."""

hookspec: Final = pluggy.HookspecMarker(PROJECT_NAME)
"""Marks a function in :mod:`hookgrad.hookspecs.specs` as a hook specification."""

hookimpl: Final = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a plugin's method or function as the implementation of the spec of the same name."""
