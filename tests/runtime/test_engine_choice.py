"""The ``engine`` key: which engines' models a runtime drives, from file, environment or code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import hookgrad
from hookgrad.cli import main
from hookgrad.runtime import ConfigError, Runtime


def _names(runtime: Runtime) -> tuple[str, ...]:
    return tuple(engine.name for engine in runtime.engines)


def test_code_beats_environment_beats_file(tmp_path: Path) -> None:
    """engine: Runtime(engine=...) > HOOKGRAD_ENGINE > hookgrad.toml, each naming its layer."""
    (tmp_path / "hookgrad.toml").write_text('engine = "torch"\n')
    from_file = Runtime(environ={}, cwd=tmp_path)
    from_env = Runtime(environ={"HOOKGRAD_ENGINE": "hookgrad"}, cwd=tmp_path)
    from_code = Runtime(environ={"HOOKGRAD_ENGINE": "torch"}, cwd=tmp_path, engine="hookgrad")
    assert [r.config.explain()[-1] for r in (from_file, from_env, from_code)] == [
        ("engine", "torch", "file hookgrad.toml"),
        ("engine", "hookgrad", "env HOOKGRAD_ENGINE"),
        ("engine", "hookgrad", "code"),
    ]


def test_configure_takes_the_engine_as_a_code_override() -> None:
    """configure(engine="hookgrad") sets the key in the code layer."""
    with hookgrad.configure({}, engine="hookgrad") as runtime:
        assert runtime.config.explain()[-1] == ("engine", "hookgrad", "code")
        assert _names(runtime) == ("hookgrad",)


def test_an_empty_environment_variable_changes_nothing() -> None:
    """HOOKGRAD_ENGINE="" leaves the engine at its default, "auto"."""
    runtime = Runtime({}, environ={"HOOKGRAD_ENGINE": ""})
    assert runtime.config.explain()[-1] == ("engine", "auto", "default")


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("hookgrad", ("hookgrad",)), ("torch", ("torch",)), ("auto", ("hookgrad", "torch"))],
)
def test_start_chooses_the_engines(choice: str, expected: tuple[str, ...]) -> None:
    """start() drives the engines the key names; "auto" both once torch is imported."""
    pytest.importorskip("torch")
    with Runtime({}, environ={}, engine=choice) as runtime:
        assert _names(runtime) == expected


def test_auto_never_imports_torch() -> None:
    """engine="auto" without torch imported drives hookgrad's engine only, importing no torch."""
    program = (
        "import sys, hookgrad\n"
        "with hookgrad.Runtime({}, environ={}) as rt:\n"
        "    print([e.name for e in rt.engines], 'torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout == "['hookgrad'] False\n"


def test_auto_is_decided_at_start() -> None:
    """ "auto" takes the engines imported when the runtime starts, not when it is built."""
    program = (
        "import hookgrad\n"
        "rt = hookgrad.Runtime({}, environ={})\n"
        "import torch\n"
        "with rt:\n"
        "    print([e.name for e in rt.engines])\n"
    )
    pytest.importorskip("torch")
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout == "['hookgrad', 'torch']\n"


def test_torch_without_torch_installed_names_the_key_and_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """engine = "torch" where torch cannot be imported: ConfigError naming file, key, extra."""
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch fails, as if not installed
    (tmp_path / "pyproject.toml").write_text('[tool.hookgrad]\nengine = "torch"\n')
    with pytest.raises(ConfigError) as info:
        Runtime(environ={}, cwd=tmp_path)
    assert str(info.value) == (
        "pyproject.toml: tool.hookgrad.engine = 'torch' but torch is not installed; "
        "pip install 'hookgrad[torch]'"
    )
    assert (info.value.table, info.value.key) == ("", "engine")


def test_config_check_reports_torch_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hookgrad config check` fails on engine = "torch" where torch is not installed."""
    monkeypatch.setitem(sys.modules, "torch", None)
    (tmp_path / "hookgrad.toml").write_text('engine = "torch"\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["config", "check"])
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: hookgrad.toml: engine = 'torch' but torch is not installed; "
        "pip install 'hookgrad[torch]'\n"
    )


def test_config_check_reports_a_bad_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`hookgrad config check` fails on engine = "jax" with the usual key-path message."""
    (tmp_path / "hookgrad.toml").write_text('engine = "jax"\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["config", "check"])
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: hookgrad.toml: invalid value for 'engine' at the top level: Input should be "
        "'auto', 'hookgrad' or 'torch' (got str 'jax')\n"
    )
