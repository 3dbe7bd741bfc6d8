"""ModuleNamer: qualified names from the outermost call, call indices, structure changes."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from hookgrad import nn
from hookgrad.runtime._naming import CallStack, ModuleNamer


def _call(namer: CallStack, module: Any) -> tuple[str, int]:
    """A call of ``module`` that begins and ends (no children)."""
    named = namer.enter(module)
    assert namer.exit(module) == named
    return named


def test_names_come_from_the_outermost_call():
    """The outermost module is "" and submodules get their dotted path from it."""
    inner = nn.Sequential(nn.Linear(1, 1), nn.Tanh())
    model = nn.Sequential(nn.Linear(1, 1), inner)
    namer = ModuleNamer().calls()
    assert namer.enter(model) == ("", 0)
    assert namer.enter(inner) == ("1", 0)
    assert _call(namer, inner[1]) == ("1.1", 0)
    namer.exit(inner)
    namer.exit(model)
    assert namer.depth == 0
    assert _call(namer, inner) == ("", 0)  # called on its own, it is a root


def test_added_and_moved_modules_are_renamed():
    """A module added or moved after the names were cached gets its current name."""
    model = nn.Sequential(nn.Linear(1, 1))
    namer = ModuleNamer().calls()
    extra = nn.Tanh()
    namer.enter(model)
    namer.exit(model)
    model.add_module("extra", extra)
    namer.enter(model)
    assert _call(namer, extra) == ("extra", 0)
    namer.exit(model)
    del model.extra
    model.add_module("moved", extra)
    namer.enter(model)
    assert _call(namer, extra) == ("moved", 0)
    namer.exit(model)


def test_module_outside_the_structure_is_its_own_root():
    """Called inside a forward but not a submodule: named "" with its children relative to it."""
    model = nn.Linear(1, 1)
    helper = nn.Sequential(nn.Tanh())
    namer = ModuleNamer().calls()
    namer.enter(model)
    assert namer.enter(helper) == ("", 0)
    assert _call(namer, helper[0]) == ("0", 0)
    namer.exit(helper)
    assert _call(namer, helper) == ("", 1)
    namer.exit(model)


def test_unmatched_exit_is_ignored():
    """An end whose start was not seen leaves the calls in progress alone."""
    model = nn.Sequential(nn.Tanh())
    namer = ModuleNamer().calls()
    namer.enter(model)
    assert namer.exit(model[0]) is None
    assert namer.depth == 1


def test_cache_does_not_keep_models_alive():
    """The per-root name cache holds roots weakly."""
    model = nn.Sequential(nn.Linear(1, 1), nn.Tanh())
    namer = ModuleNamer().calls()
    _call(namer, model)
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None
