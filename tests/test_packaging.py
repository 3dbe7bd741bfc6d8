"""The wheel ships every package folder, and ``import hookgrad`` changes no global state.

A package missing from ``[tool.setuptools] packages`` still imports in an editable install but is
silently left out of the wheel, so the list is compared with the folders on disk.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Source folder -> the dotted package it installs as.
SOURCE_ROOTS = {
    "core": "hookgrad",
    "hookspecs": "hookgrad.hookspecs",
    "plugins": "hookgrad.plugins",
}

_IMPORT_PROBE = """
import json, logging, sys
import hookgrad
import structlog
print(json.dumps({
    "structlog_configured": structlog.is_configured(),
    "plugin_modules": sorted(m for m in sys.modules if m.startswith("hookgrad.plugins")),
    "cli_modules": sorted(
        m for m in sys.modules if m.split(".")[0] == "click" or m in {"hookgrad.cli", "hookgrad._demo"}
    ),
    "root_handlers": [repr(h) for h in logging.getLogger().handlers],
    "root_level": logging.getLogger().level,
}))
"""


def _setuptools_config() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        config: dict[str, Any] = tomllib.load(f)["tool"]["setuptools"]
    return config


def _package_folders() -> set[str]:
    """Dotted names of every folder with an ``__init__.py`` under the source roots."""
    names = set()
    for folder, dotted in SOURCE_ROOTS.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                names.add(".".join((dotted, *init.parent.relative_to(base).parts)))
    return names


@pytest.fixture(scope="module")
def import_probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What a fresh interpreter's global state looks like right after ``import hookgrad``."""
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE],
        capture_output=True,
        text=True,
        cwd=tmp_path_factory.mktemp("import_probe"),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    probe: dict[str, Any] = json.loads(result.stdout)
    return probe


def test_setuptools_packages_match_package_folders() -> None:
    """[tool.setuptools] packages lists exactly the package folders, each once."""
    listed = _setuptools_config()["packages"]
    assert len(listed) == len(set(listed)), f"duplicates in packages: {listed!r}"
    folders = _package_folders()
    assert set(listed) == folders, (
        f"missing from pyproject: {sorted(folders - set(listed))!r}; "
        f"listed without a package folder: {sorted(set(listed) - folders)!r}"
    )


def test_package_dir_maps_every_source_root() -> None:
    """package-dir maps hookgrad -> core and each other existing source root to its folder."""
    package_dir = _setuptools_config()["package-dir"]
    assert package_dir.get("hookgrad") == "core"
    for folder, dotted in SOURCE_ROOTS.items():
        if (ROOT / folder / "__init__.py").is_file():
            assert package_dir.get(dotted) == folder, f"{dotted!r} is not mapped to {folder!r}"


def test_py_typed_ships() -> None:
    """core/py.typed exists and is declared as package data, so type checkers trust hookgrad."""
    assert (ROOT / "core" / "py.typed").is_file()
    assert "py.typed" in _setuptools_config()["package-data"]["hookgrad"]


def test_import_does_not_configure_structlog(import_probe: dict[str, Any]) -> None:
    """import hookgrad leaves structlog unconfigured: logging set-up is the application's call."""
    assert import_probe["structlog_configured"] is False


def test_import_loads_no_plugins(import_probe: dict[str, Any]) -> None:
    """import hookgrad imports no hookgrad.plugins module: plugins load lazily."""
    assert import_probe["plugin_modules"] == []


def test_import_does_not_load_the_command_line(import_probe: dict[str, Any]) -> None:
    """import hookgrad imports neither click nor hookgrad.cli: only the command needs them."""
    assert import_probe["cli_modules"] == []


def test_import_adds_no_logging_handlers(import_probe: dict[str, Any]) -> None:
    """import hookgrad adds no handler to the root logger and keeps its level at WARNING."""
    assert import_probe["root_handlers"] == []
    assert import_probe["root_level"] == 30
