"""load_config: where the file is found, how file < environment < code merge, and explain()."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from hookgrad.hookspecs import PluginConfig
from hookgrad.runtime import ConfigError, EventsConfig, LoadedConfig, RuntimeConfig, load_config


class ClipConfig(PluginConfig):
    """A sample plugin config: the common fields and one setting."""

    max_norm: float = 1.0


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------------------------


def test_nothing_found_gives_the_defaults(tmp_path: Path) -> None:
    """No file and no environment: the model's defaults, no path, no layer."""
    loaded = load_config(cwd=tmp_path)
    assert loaded.config == RuntimeConfig()
    assert (loaded.path, loaded.layers) == (None, ())
    assert loaded.config.model_dump() == {
        "autoload": True,
        "strict": False,
        "disable": [],
        "plugins": {},
        "events": {
            "jsonl": None,
            "durability": "step",
            "memory": False,
            "tensorboard": None,
            "histogram_every": 100,
        },
        "log_level": "warning",
        "engine": "auto",
    }


def test_hookgrad_toml_beats_pyproject_and_hookgrad_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With all three present, hookgrad.toml in cwd is the one read."""
    write(tmp_path / "hookgrad.toml", 'log_level = "debug"\n')
    write(tmp_path / "pyproject.toml", '[tool.hookgrad]\nlog_level = "info"\n')
    monkeypatch.setenv(
        "HOOKGRAD_CONFIG", str(write(tmp_path / "elsewhere.toml", "strict = true\n"))
    )
    loaded = load_config(cwd=tmp_path)
    assert loaded.config.log_level == "debug"
    assert loaded.config.strict is False
    assert loaded.path == tmp_path / "hookgrad.toml"
    assert loaded.layers == ("file hookgrad.toml",)


def test_pyproject_tool_hookgrad_beats_hookgrad_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without hookgrad.toml, [tool.hookgrad] of cwd/pyproject.toml wins over HOOKGRAD_CONFIG."""
    write(
        tmp_path / "pyproject.toml", '[project]\nname = "x"\n[tool.hookgrad]\nlog_level = "info"\n'
    )
    monkeypatch.setenv("HOOKGRAD_CONFIG", str(write(tmp_path / "other.toml", "strict = true\n")))
    loaded = load_config(cwd=tmp_path)
    assert (loaded.config.log_level, loaded.config.strict) == ("info", False)
    assert loaded.path == tmp_path / "pyproject.toml"
    assert loaded.layers == ("file pyproject.toml [tool.hookgrad]",)


def test_pyproject_without_tool_hookgrad_falls_through_to_hookgrad_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pyproject.toml with no [tool.hookgrad] is skipped; HOOKGRAD_CONFIG (relative to cwd) is read."""
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')
    write(tmp_path / "conf" / "run.toml", "strict = true\n")
    monkeypatch.setenv("HOOKGRAD_CONFIG", "conf/run.toml")
    loaded = load_config(cwd=tmp_path)
    assert loaded.config.strict is True
    assert loaded.path == tmp_path / "conf" / "run.toml"


def test_explicit_path_skips_discovery(tmp_path: Path) -> None:
    """A source path is read instead of hookgrad.toml in cwd, relative paths from cwd."""
    write(tmp_path / "hookgrad.toml", 'log_level = "debug"\n')
    write(tmp_path / "configs" / "a.toml", 'log_level = "error"\n')
    loaded = load_config("configs/a.toml", cwd=tmp_path)
    assert loaded.config.log_level == "error"
    assert loaded.path == tmp_path / "configs" / "a.toml"


def test_explicit_pyproject_contributes_its_tool_hookgrad_table(tmp_path: Path) -> None:
    """A pyproject.toml given as source is read for [tool.hookgrad]; without it, defaults."""
    project = write(tmp_path / "p" / "pyproject.toml", "[tool.hookgrad.events]\nmemory = true\n")
    assert load_config(project, cwd=tmp_path).config.events.memory is True
    bare = write(tmp_path / "q" / "pyproject.toml", '[project]\nname = "x"\n')
    assert load_config(bare, cwd=tmp_path).config == RuntimeConfig()


def test_dict_source_is_the_file_layer(tmp_path: Path) -> None:
    """A dict source replaces discovery and is named "dict" in explain()."""
    write(tmp_path / "hookgrad.toml", 'log_level = "debug"\n')
    loaded = load_config({"events": {"memory": True}}, cwd=tmp_path)
    assert loaded.config.events == EventsConfig(memory=True)
    assert loaded.config.log_level == "warning"
    assert loaded.path is None
    assert ("events.memory", True, "dict") in loaded.explain()


def test_source_of_another_type_is_a_type_error(tmp_path: Path) -> None:
    """A source that is neither path, dict nor None raises TypeError naming its type."""
    with pytest.raises(TypeError, match="got list"):
        load_config(["hookgrad.toml"], cwd=tmp_path)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Environment
# --------------------------------------------------------------------------------------------


def test_hookgrad_plugins_enables_each_named_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HOOKGRAD_PLUGINS="a, ,b" adds enabled tables for a and b (blanks ignored)."""
    monkeypatch.setenv("HOOKGRAD_PLUGINS", " a, ,b ")
    loaded = load_config(cwd=tmp_path)
    assert loaded.config.plugins == {"a": {"enabled": True}, "b": {"enabled": True}}
    assert loaded.layers == ("env HOOKGRAD_PLUGINS",)


def test_hookgrad_plugins_turns_on_a_plugin_the_file_switched_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The environment sets enabled = true over the file's false and keeps its settings."""
    write(tmp_path / "hookgrad.toml", "[plugins.clip]\nenabled = false\nmax_norm = 0.5\n")
    monkeypatch.setenv("HOOKGRAD_PLUGINS", "clip")
    loaded = load_config(cwd=tmp_path)
    assert loaded.config.plugins == {"clip": {"enabled": True, "max_norm": 0.5}}
    assert loaded.plugin_config("clip", ClipConfig) == ClipConfig(max_norm=0.5)


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_disable_autoload_variable_turns_autoload_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD set to a true value overrides the file's autoload."""
    write(tmp_path / "hookgrad.toml", "autoload = true\n")
    monkeypatch.setenv("HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD", value)
    loaded = load_config(cwd=tmp_path)
    assert loaded.config.autoload is False
    assert ("autoload", False, "env HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD") in loaded.explain()


@pytest.mark.parametrize("value", ["0", "", "false", "off"])
def test_disable_autoload_variable_false_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """A false or empty HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD leaves autoload on and adds no layer."""
    monkeypatch.setenv("HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD", value)
    loaded = load_config(cwd=tmp_path)
    assert (loaded.config.autoload, loaded.layers) == (True, ())


def test_environ_argument_replaces_os_environ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An explicit environ mapping is read instead of os.environ."""
    monkeypatch.setenv("HOOKGRAD_PLUGINS", "ignored")
    loaded = load_config(cwd=tmp_path, environ={"HOOKGRAD_PLUGINS": "used"})
    assert list(loaded.config.plugins) == ["used"]


# --------------------------------------------------------------------------------------------
# Merge order and provenance
# --------------------------------------------------------------------------------------------


def test_file_then_environment_then_code_with_provenance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each layer overrides the one below key by key; explain() names who set every value."""
    write(
        tmp_path / "hookgrad.toml",
        'log_level = "info"\ndisable = ["noisy"]\n'
        '[events]\njsonl = "events.jsonl"\n'
        "[plugins.clip]\nenabled = false\nmax_norm = 1.0\n",
    )
    monkeypatch.setenv("HOOKGRAD_PLUGINS", "clip,guard")
    monkeypatch.setenv("HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("HOOKGRAD_ENGINE", "hookgrad")
    overrides = {"log_level": "debug", "plugins": {"clip": {"max_norm": 2.0}}}
    loaded = load_config(cwd=tmp_path, overrides=overrides)
    file, plugins_env = "file hookgrad.toml", "env HOOKGRAD_PLUGINS"
    assert loaded.explain() == [
        ("autoload", False, "env HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD"),
        ("strict", False, "default"),
        ("disable", ["noisy"], file),
        ("plugins.clip.enabled", True, plugins_env),
        ("plugins.clip.max_norm", 2.0, "code"),
        ("plugins.guard.enabled", True, plugins_env),
        ("events.jsonl", "events.jsonl", file),
        ("events.durability", "step", "default"),
        ("events.memory", False, "default"),
        ("events.tensorboard", None, "default"),
        ("events.histogram_every", 100, "default"),
        ("log_level", "debug", "code"),
        ("engine", "hookgrad", "env HOOKGRAD_ENGINE"),
    ]
    assert loaded.layers == (
        file,
        plugins_env,
        "env HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD",
        "env HOOKGRAD_ENGINE",
        "code",
    )


def test_lists_and_scalars_replace_tables_merge(tmp_path: Path) -> None:
    """A list from code replaces the file's list whole; a table merges with the file's table."""
    write(
        tmp_path / "hookgrad.toml",
        'disable = ["a", "b"]\n[plugins.clip]\nmodules = ["x.*"]\nmax_norm = 1.0\n',
    )
    overrides = {"disable": ["c"], "plugins": {"clip": {"modules": ["y"]}}}
    config = load_config(cwd=tmp_path, overrides=overrides).config
    assert config.disable == ["c"]
    assert config.plugins == {"clip": {"modules": ["y"], "max_norm": 1.0}}


def test_a_value_replacing_a_table_takes_over_its_keys(tmp_path: Path) -> None:
    """An empty table from code merges (file keys stay the file's); a non-table replaces all."""
    write(tmp_path / "hookgrad.toml", "[plugins.clip]\nmax_norm = 1.0\n")
    merged = load_config(cwd=tmp_path, overrides={"plugins": {"clip": {}}})
    assert ("plugins.clip.max_norm", 1.0, "file hookgrad.toml") in merged.explain()
    with pytest.raises(ConfigError, match=r"^overrides: \[plugins.clip\] must be a table") as info:
        load_config(cwd=tmp_path, overrides={"plugins": {"clip": None}})
    assert info.value.path is None


def test_overrides_and_dict_sources_are_not_mutated(tmp_path: Path) -> None:
    """Merging copies tables: the caller's dicts are unchanged afterwards."""
    source = {"plugins": {"clip": {"max_norm": 1.0}}}
    overrides = {"plugins": {"clip": {"modules": ["a"]}, "guard": {}}}
    load_config(source, cwd=tmp_path, overrides=overrides)
    assert source == {"plugins": {"clip": {"max_norm": 1.0}}}
    assert overrides == {"plugins": {"clip": {"modules": ["a"]}, "guard": {}}}


def test_empty_plugin_table_is_listed_by_explain(tmp_path: Path) -> None:
    """[plugins.guard] with no key shows up as an empty table from the file."""
    write(tmp_path / "hookgrad.toml", "[plugins.guard]\n")
    loaded = load_config(cwd=tmp_path)
    assert ("plugins.guard", {}, "file hookgrad.toml") in loaded.explain()


def test_plugin_config_validates_the_merged_table(tmp_path: Path) -> None:
    """plugin_config() builds the plugin's model from all layers; an absent table gives defaults."""
    write(tmp_path / "hookgrad.toml", '[plugins.clip]\nmodules = ["layers.*"]\n')
    loaded = load_config(cwd=tmp_path, overrides={"plugins": {"clip": {"max_norm": 0.5}}})
    clip = loaded.plugin_config("clip", ClipConfig)
    assert (clip.modules, clip.max_norm) == (("layers.*",), 0.5)
    assert loaded.plugin_config("absent", ClipConfig) == ClipConfig()


def test_jsonl_accepts_a_path_object(tmp_path: Path) -> None:
    """events.jsonl set from code as a Path is stored as its string."""
    target = tmp_path / "run" / "events.jsonl"
    loaded = load_config(cwd=tmp_path, overrides={"events": {"jsonl": target}})
    assert loaded.config.events.jsonl == str(target)


def test_loaded_config_is_frozen(tmp_path: Path) -> None:
    """The validated config cannot be assigned to; build a new one through overrides."""
    loaded: LoadedConfig = load_config(cwd=tmp_path)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        loaded.config.autoload = False
