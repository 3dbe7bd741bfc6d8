"""Shared fixtures: every test starts with grad mode on and a seeded default generator."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

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


@pytest.fixture(params=["hookgrad", "torch"])
def lib(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The library under test: hookgrad, and torch 2.13 as the oracle when it is installed.

    Tests written against ``lib`` assert literal expected values, so each one pins hookgrad's
    behaviour and, on the torch run, checks that the expectation is PyTorch's own.
    """
    if request.param == "torch":
        return pytest.importorskip("torch")
    return hookgrad


@dataclass
class _FakeDistribution:
    """The two things plugin discovery reads from a distribution."""

    metadata: dict[str, str]
    version: str


@dataclass
class _FakeEntryPoint:
    """A stand-in for importlib.metadata.EntryPoint with its distribution attached."""

    name: str
    value: str
    dist: _FakeDistribution

    def load(self) -> Any:
        module_name, _, attribute = self.value.partition(":")
        module = __import__(module_name, fromlist=["_"])
        return getattr(module, attribute) if attribute else module


@pytest.fixture
def entry_point() -> Callable[[str, str, str, str], _FakeEntryPoint]:
    """``entry_point(name, "module:Object", distribution, version)``: a hookgrad.plugins entry."""

    def make(name: str, value: str, distribution: str, version: str) -> _FakeEntryPoint:
        return _FakeEntryPoint(name, value, _FakeDistribution({"Name": distribution}, version))

    return make
