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


@pytest.fixture(params=["hookgrad", "torch"])
def lib(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The library under test: hookgrad, and torch 2.13 as the oracle when it is installed.

    Tests written against ``lib`` assert literal expected values, so each one pins hookgrad's
    behaviour and, on the torch run, checks that the expectation is PyTorch's own.
    """
    if request.param == "torch":
        return pytest.importorskip("torch")
    return hookgrad
