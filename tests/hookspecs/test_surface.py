"""The contract package's public surface, packaging and import behaviour."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import hookgrad.hookspecs

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import json, sys
import hookgrad
after_engine = "hookgrad.hookspecs" in sys.modules
import hookgrad.hookspecs
import structlog
print(json.dumps({
    "after_engine": after_engine,
    "structlog_configured": structlog.is_configured(),
    "plugins": sorted(m for m in sys.modules if m.startswith("hookgrad.plugins")),
}))
"""


def test_all_names_exist_and_are_unique() -> None:
    """Every name in __all__ is defined, once."""
    names = hookgrad.hookspecs.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(hookgrad.hookspecs, name), name


def test_import_order_and_side_effects(tmp_path: Path) -> None:
    """import hookgrad does not import the contract; importing it loads no plugin, no logging."""
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "after_engine": False,
        "structlog_configured": False,
        "plugins": [],
    }


def test_py_typed_ships_for_the_contract() -> None:
    """hookspecs/py.typed exists and is package data of hookgrad.hookspecs."""
    assert (ROOT / "hookspecs" / "py.typed").is_file()
    with (ROOT / "pyproject.toml").open("rb") as f:
        setuptools = tomllib.load(f)["tool"]["setuptools"]
    assert "py.typed" in setuptools["package-data"]["hookgrad.hookspecs"]
    assert setuptools["package-dir"]["hookgrad.hookspecs"] == "hookspecs"


@pytest.mark.parametrize("module", ["_config", "_markers", "_order", "_stats", "events", "specs"])
def test_contract_imports_nothing_else_from_the_engine(module: str) -> None:
    """Contract modules import from hookgrad only the Tensor type and the engine interface's
    registry (summaries of another engine's tensors)."""
    source = (ROOT / "hookspecs" / f"{module}.py").read_text()
    engine_imports = [
        line.strip()
        for line in source.splitlines()
        if line.startswith(("from hookgrad", "import hookgrad"))
    ]
    allowed = {"from hookgrad._tensor import Tensor", "from hookgrad.engines import engine_of"}
    assert set(engine_imports) <= allowed, engine_imports
