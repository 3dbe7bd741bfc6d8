"""Plugin discovery from the hookgrad.plugins entry-point group, and class_path loading."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hookgrad.hookspecs import PluginConfig
from hookgrad.runtime import ConfigError, Runtime
from hookgrad.runtime._discovery import (
    PluginCatalog,
    PluginImportWarning,
    PluginLoadError,
    load_class_path,
)

PLUGINS = """
from hookgrad.hookspecs import PluginConfig, hookimpl

class Scaler:
    class Config(PluginConfig):
        factor: float = 2.0

    def __init__(self, config):
        self.config = config

class NoConfig:
    pass

@hookimpl
def hookgrad_backward_end(event):
    return None
"""


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh importable module of sample plugins; returns its name."""
    name = f"sample_plugins_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(PLUGINS))
    (tmp_path / "broken_plugin.py").write_text("raise ImportError('missing dependency: scipy')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
    sys.modules.pop("broken_plugin", None)


def _catalog(entry_point: Any, plugin_module: str, calls: list[int] | None = None) -> PluginCatalog:
    entries = [
        entry_point("scaler", f"{plugin_module}:Scaler", "gradtools", "1.4"),
        entry_point("ends", plugin_module, "hookgrad", "0.1.0"),
        entry_point("noconfig", f"{plugin_module}:NoConfig", "gradtools", "1.4"),
        entry_point("broken", "broken_plugin:Plugin", "gradtools", "1.4"),
    ]

    def scan() -> list[Any]:
        if calls is not None:
            calls.append(1)
        return entries

    return PluginCatalog(scan)  # type: ignore[arg-type]


def test_entry_points_are_scanned_once_and_lazily(plugin_module, entry_point):
    """Creating a catalog reads nothing; the first lookup scans, later ones use the cache."""
    calls: list[int] = []
    catalog = _catalog(entry_point, plugin_module, calls)
    assert calls == []
    assert sorted(catalog.sources()) == ["broken", "ends", "noconfig", "scaler"]
    catalog.sources()
    catalog.load("scaler")
    assert calls == [1]


def test_sources_know_distribution_version_and_builtin(plugin_module, entry_point):
    """A source names its distribution and version; hookgrad's own plugins are built-in."""
    sources = _catalog(entry_point, plugin_module).sources()
    assert (sources["scaler"].distribution, sources["scaler"].version) == ("gradtools", "1.4")
    assert sources["ends"].builtin and not sources["scaler"].builtin


def test_class_plugin_is_built_with_its_validated_config(plugin_module, entry_point):
    """A class entry point is constructed as cls(config) with its own Config model."""
    loaded = _catalog(entry_point, plugin_module).load("scaler")
    config = loaded.config_model(factor=0.5)
    plugin = loaded.create(config)
    assert plugin.config.factor == 0.5
    assert issubclass(loaded.config_model, PluginConfig)


def test_module_plugin_registers_the_module_itself(plugin_module, entry_point):
    """A module entry point is registered as is, configured by the plain PluginConfig."""
    loaded = _catalog(entry_point, plugin_module).load("ends")
    assert loaded.create(PluginConfig()) is sys.modules[plugin_module]
    assert loaded.config_model is PluginConfig


def test_class_without_config_is_rejected_naming_the_entry_point(plugin_module, entry_point):
    """A class with no Config is not a plugin; the error names entry point and distribution."""
    with pytest.raises(
        PluginLoadError, match=r"noconfig = .*:NoConfig in gradtools 1\.4.*no Config"
    ):
        _catalog(entry_point, plugin_module).load("noconfig")


def test_import_failure_names_entry_point_distribution_and_cause(plugin_module, entry_point):
    """A plugin that fails to import raises PluginLoadError with the original cause."""
    with pytest.raises(
        PluginLoadError, match=r"broken_plugin:Plugin in gradtools 1\.4.*scipy"
    ) as info:
        _catalog(entry_point, plugin_module).load("broken")
    assert isinstance(info.value.__cause__, ImportError)


def test_load_many_warns_and_keeps_going_unless_strict(plugin_module, entry_point):
    """Non-strict loading warns about the broken plugin and loads the rest; strict raises."""
    catalog = _catalog(entry_point, plugin_module)
    with pytest.warns(PluginImportWarning, match="broken"):
        loaded, failed = catalog.load_many(["scaler", "broken", "ends"], strict=False)
    assert [p.source.name for p in loaded] == ["scaler", "ends"]
    assert [e.name for e in failed] == ["broken"]
    with pytest.raises(PluginLoadError):
        catalog.load_many(["broken"], strict=True)


def test_unknown_plugin_lists_the_available_ones(plugin_module, entry_point):
    """Asking for a plugin that is not installed names every available plugin."""
    with pytest.raises(PluginLoadError, match="available: broken, ends, noconfig, scaler"):
        _catalog(entry_point, plugin_module).load("grad_clipp")


def test_class_path_loads_a_plugin_without_entry_point(plugin_module):
    """class_path = "module:Class" imports the class directly."""
    loaded = load_class_path("mine", f"{plugin_module}:Scaler")
    assert loaded.create(loaded.config_model()).config.factor == 2.0
    with pytest.raises(PluginLoadError, match=r"class_path nowhere\.at_all:Thing"):
        load_class_path("missing", "nowhere.at_all:Thing")


def test_real_environment_scan_works():
    """The default catalog reads this environment's entry points without importing them."""
    sources = PluginCatalog().sources()
    assert all(source.name == name for name, source in sources.items())


def test_sys_exit_at_import_is_a_plugin_failure_not_the_end(tmp_path: Path) -> None:
    """A class_path module calling sys.exit(3) at import: Runtime() warns and the process goes on."""
    (tmp_path / "exiting_plugin.py").write_text("import sys\nsys.exit(3)\n")
    script = textwrap.dedent(
        """
        import hookgrad
        table = {"class_path": "exiting_plugin:Plugin"}
        runtime = hookgrad.Runtime({"plugins": {"quits": table}}, environ={})
        print("still running; plugins:", list(runtime.plugins))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "still running; plugins: []\n"
    assert (
        "plugin 'quits' (class_path exiting_plugin:Plugin) could not be loaded: SystemExit(3)"
        in (done.stderr)
    )


def test_keyboard_interrupt_at_import_propagates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Ctrl-C while a plugin imports stops the program: it is no plugin failure to isolate."""
    (tmp_path / "interrupted_plugin.py").write_text("raise KeyboardInterrupt\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        load_class_path("slow", "interrupted_plugin:Plugin")


def test_an_object_that_is_no_plugin_is_named_by_its_entry_point(plugin_module, entry_point):
    """An entry point naming neither a class nor a module: group, name, value, distribution."""
    __import__(plugin_module).NOT_A_PLUGIN = _Loud()
    catalog = PluginCatalog(
        lambda: [entry_point("odd", f"{plugin_module}:NOT_A_PLUGIN", "gradtools", "1.4")]
    )
    with pytest.raises(PluginLoadError) as info:
        catalog.load("odd")
    assert str(info.value) == (
        f"plugin 'odd' (entry point odd = {plugin_module}:NOT_A_PLUGIN in gradtools 1.4 "
        "(hookgrad.plugins)) could not be loaded: expected a plugin class or module, got _Loud"
    )


class _Loud:
    """An object whose repr would flood an error message."""

    def __repr__(self) -> str:
        return "<" + "loud " * 100 + ">"


def test_a_name_two_distributions_register_is_ambiguous(install_distribution: Any) -> None:
    """Two installed distributions registering 'clip': activating it names both."""
    install_distribution("cliptools", "1.0", {"clip": "cliptools_plugin:Clip"}, {})
    install_distribution("otherclip", "2.1", {"clip": "otherclip_plugin:Clip"}, {})
    catalog = PluginCatalog()
    assert [s.distribution for s in catalog.clashes()["clip"]] == ["cliptools", "otherclip"]
    with pytest.raises(ConfigError) as info:
        Runtime({"plugins": {"clip": {}}}, environ={}, catalog=catalog)
    assert str(info.value) == (
        "config dict: plugin 'clip' ([plugins.clip]) is ambiguous: 2 distributions register "
        "it: entry point clip = cliptools_plugin:Clip in cliptools 1.0 (hookgrad.plugins); "
        "entry point clip = otherclip_plugin:Clip in otherclip 2.1 (hookgrad.plugins). "
        "Uninstall one, or give the table a class_path to choose"
    )
