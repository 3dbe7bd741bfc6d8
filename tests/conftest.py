"""Shared fixtures: every test starts with grad mode on and a seeded default generator."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
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


@pytest.fixture
def torch_host_syncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``tolist``/``item`` of a torch tensor from now on: where kernels sync the host."""
    torch = pytest.importorskip("torch")
    calls: list[str] = []
    for name in ("tolist", "item"):
        real = getattr(torch.Tensor, name)

        def counted(self: Any, *args: Any, _real: Any = real, _name: str = name) -> Any:
            calls.append(_name)
            return _real(self, *args)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return calls


@pytest.fixture
def in_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in an empty directory with no HOOKGRAD_* variable from the shell."""
    for name in list(os.environ):
        if name.startswith("HOOKGRAD_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def fails_like_torch() -> Callable[[Callable[[Any], object]], None]:
    """``check(action)``: ``action(hookgrad)`` raises what ``action(torch)`` raises, the same
    class with the same text (``torch.`` read as ``hookgrad.``)."""
    torch = pytest.importorskip("torch")

    def check(action: Callable[[Any], object]) -> None:
        with pytest.raises(Exception) as expected:
            action(torch)
        with pytest.raises(Exception) as got:
            action(hookgrad)
        assert type(got.value) is type(expected.value)
        assert str(got.value) == str(expected.value).replace("torch.", "hookgrad.")

    return check


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


@pytest.fixture
def install_distribution(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``install_distribution(dist, version, {name: "mod:Obj"}, {"mod.py": source})``.

    Installs a throwaway distribution into ``tmp_path/site`` as pip would leave it (a
    ``.dist-info`` folder with METADATA and ``entry_points.txt`` in the ``hookgrad.plugins``
    group, beside its modules; the folder named with the escaped name, ``a_b-1.0.dist-info``
    for ``a-b``, else importlib.metadata reads ``a-b-1.0`` as a distribution ``a`` that
    shadows an installed ``a``, hookgrad's built-ins for ``hookgrad-x``), puts that folder on ``sys.path`` for this test and returns
    it: give it to a subprocess as ``PYTHONPATH``. No build, no network.
    """
    site = tmp_path / "site"

    def install(
        dist: str, version: str, entry_points: dict[str, str], files: dict[str, str]
    ) -> Any:
        info = site / f"{re.sub(r'[-_.]+', '_', dist)}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
        )
        lines = [f"{name} = {value}" for name, value in entry_points.items()]
        (info / "entry_points.txt").write_text(
            "[hookgrad.plugins]\n" + "\n".join(lines) + "\n", encoding="utf-8"
        )
        for relative, source in files.items():
            (site / relative).parent.mkdir(parents=True, exist_ok=True)
            (site / relative).write_text(source, encoding="utf-8")
        return site

    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return install
