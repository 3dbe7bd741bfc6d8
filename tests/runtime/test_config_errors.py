"""ConfigError: every bad config names the file, the table, the key and the valid keys."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Literal

import pydantic
import pytest

from hookgrad.hookspecs import PluginConfig
from hookgrad.runtime import ConfigError, load_config, validate_plugin_table

RUNTIME_KEYS = ("autoload", "strict", "disable", "plugins", "events", "log_level", "engine")
COMMON_KEYS = ("enabled", "modules", "exclude", "module_types", "on_error", "class_path")


class GradClipConfig(PluginConfig):
    """A sample plugin config with two settings of its own."""

    max_norm: float = 1.0
    norm_type: Literal["l2", "inf"] = "l2"


def load_file(tmp_path: Path, text: str, name: str = "hookgrad.toml") -> ConfigError:
    """The ConfigError that loading ``text`` as cwd/``name`` raises."""
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(cwd=tmp_path)
    return info.value


def test_config_error_is_a_value_error_that_pickles() -> None:
    """ConfigError subclasses ValueError and keeps its attributes through pickle."""
    error = ConfigError("m", path=Path("a.toml"), table="events", key="k", valid_keys=["x"])
    assert isinstance(error, ValueError)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.path, copy.table, copy.key, copy.valid_keys) == (
        "m",
        Path("a.toml"),
        "events",
        "k",
        ("x",),
    )


# --------------------------------------------------------------------------------------------
# Unknown keys
# --------------------------------------------------------------------------------------------


def test_unknown_key_in_events_table(tmp_path: Path) -> None:
    """A typo in [events]: file, table, key, a did-you-mean and the valid keys."""
    error = load_file(tmp_path, '[events]\njsnl = "e.jsonl"\n')
    assert str(error) == (
        "hookgrad.toml: unknown key 'jsnl' in [events]; did you mean 'jsonl'? "
        "valid keys: jsonl, durability, memory, tensorboard, histogram_every"
    )
    assert (error.path, error.table, error.key) == (tmp_path / "hookgrad.toml", "events", "jsnl")
    assert error.valid_keys == ("jsonl", "durability", "memory", "tensorboard", "histogram_every")


def test_unknown_key_at_top_level(tmp_path: Path) -> None:
    """A typo at the top of hookgrad.toml is reported "at the top level" with table ""."""
    error = load_file(tmp_path, "autolaod = false\n")
    assert str(error) == (
        "hookgrad.toml: unknown key 'autolaod' at the top level; did you mean 'autoload'? "
        "valid keys: autoload, strict, disable, plugins, events, log_level, engine"
    )
    assert (error.table, error.key, error.valid_keys) == ("", "autolaod", RUNTIME_KEYS)


def test_unknown_key_with_nothing_close_has_no_guess(tmp_path: Path) -> None:
    """A key resembling no valid key gets the valid keys and no did-you-mean."""
    error = load_file(tmp_path, "[events]\nwebhook = true\n")
    assert str(error) == (
        "hookgrad.toml: unknown key 'webhook' in [events]; valid keys: jsonl, durability, memory, tensorboard, histogram_every"
    )


def test_unknown_key_in_pyproject_names_the_tool_table(tmp_path: Path) -> None:
    """In pyproject.toml the table is shown as written there: [tool.hookgrad.events]."""
    error = load_file(tmp_path, "[tool.hookgrad.events]\nmemroy = true\n", name="pyproject.toml")
    assert str(error) == (
        "pyproject.toml: unknown key 'memroy' in [tool.hookgrad.events]; did you mean "
        "'memory'? valid keys: jsonl, durability, memory, tensorboard, histogram_every"
    )
    assert (error.path, error.table) == (tmp_path / "pyproject.toml", "events")


def test_unknown_key_from_code_names_overrides(tmp_path: Path) -> None:
    """A typo in the code layer is blamed on "overrides", with no file path."""
    (tmp_path / "hookgrad.toml").write_text('log_level = "info"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(cwd=tmp_path, overrides={"events": {"memori": True}})
    assert str(info.value).startswith("overrides: unknown key 'memori' in [events]; did you mean")
    assert info.value.path is None


# --------------------------------------------------------------------------------------------
# Bad values
# --------------------------------------------------------------------------------------------


def test_values_are_not_coerced(tmp_path: Path) -> None:
    """autoload = "yes" is an error naming the key and the value, not a silent True."""
    error = load_file(tmp_path, 'autoload = "yes"\n')
    assert str(error) == (
        "hookgrad.toml: invalid value for 'autoload' at the top level: "
        "Input should be a valid boolean (got str 'yes')"
    )
    assert (error.table, error.key, error.valid_keys) == ("", "autoload", ())


def test_bad_log_level_lists_the_levels(tmp_path: Path) -> None:
    """log_level outside the four levels names them."""
    error = load_file(tmp_path, 'log_level = "verbose"\n')
    assert "'log_level'" in str(error)
    assert "'debug', 'info', 'warning' or 'error' (got str 'verbose')" in str(error)


def test_plugin_entry_must_be_a_table(tmp_path: Path) -> None:
    """plugins.grad_clip = 3 is reported as a table that is not one."""
    error = load_file(tmp_path, "[plugins]\ngrad_clip = 3\n")
    assert str(error) == "hookgrad.toml: [plugins.grad_clip] must be a table, got int 3"
    assert (error.table, error.key) == ("plugins", "grad_clip")


def test_list_item_of_wrong_type_names_its_index(tmp_path: Path) -> None:
    """A non-string in disable is reported as disable[1]; further problems are counted."""
    error = load_file(tmp_path, 'disable = ["a", 3]\nlog_level = 1\n')
    assert str(error) == (
        "hookgrad.toml: invalid value for 'disable[1]' at the top level: "
        "Input should be a valid string (got int 3) (and 1 more problem)"
    )
    assert error.key == "disable[1]"


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    """Broken TOML: the file and tomllib's line and column, no table or key."""
    error = load_file(tmp_path, 'log_level = "info"\n[events]\njsonl = \n')
    assert str(error) == "hookgrad.toml: invalid TOML: Invalid value (at line 3, column 9)"
    assert (error.path, error.table, error.key) == (tmp_path / "hookgrad.toml", None, None)


def test_non_utf8_file_names_the_file_line_and_key(tmp_path: Path) -> None:
    """A Latin-1 byte in a value: a ConfigError naming the file, the line, the table and key."""
    (tmp_path / "hookgrad.toml").write_bytes(b'log_level = "info"\n[events]\njsonl = "caf\xe9"\n')
    with pytest.raises(ConfigError) as info:
        load_config(cwd=tmp_path)
    assert str(info.value) == (
        "hookgrad.toml: not UTF-8 text (TOML files are UTF-8): byte 0xe9 at line 3, column 13, "
        "in the value of 'jsonl' in [events]"
    )
    assert (info.value.path, info.value.table, info.value.key) == (
        tmp_path / "hookgrad.toml",
        "events",
        "jsonl",
    )


@pytest.mark.parametrize("opening", ["[", "{a = "], ids=["arrays", "inline_tables"])
def test_deeply_nested_toml_is_a_config_error(tmp_path: Path, opening: str) -> None:
    """Nesting past what the parser can recurse into is a ConfigError naming the file."""
    closing = "]" if opening == "[" else "}"
    text = "[plugins.grad_clip]\nk = " + opening * 3000 + "1" + closing * 3000 + "\n"
    error = load_file(tmp_path, text)
    assert str(error).startswith("hookgrad.toml: nested too deeply")
    assert error.path == tmp_path / "hookgrad.toml"


def test_deeply_nested_dict_source_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    """A dict source nested past the limit names the key where the limit is crossed."""
    value: object = 1
    for _ in range(200):
        value = {"a": value}
    with pytest.raises(ConfigError) as info:
        load_config({"plugins": {"grad_clip": {"k": value}}}, cwd=tmp_path)
    assert str(info.value).startswith("config dict: nested too deeply: plugins.grad_clip.k.a.a.a")
    assert info.value.path is None and info.value.key == "a"


def test_missing_hookgrad_config_file_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HOOKGRAD_CONFIG naming a missing file is an error naming the file and the variable."""
    monkeypatch.setenv("HOOKGRAD_CONFIG", "missing.toml")
    with pytest.raises(ConfigError) as info:
        load_config(cwd=tmp_path)
    assert str(info.value) == (
        "missing.toml: cannot read config file (named by HOOKGRAD_CONFIG): No such file or directory"
    )
    assert info.value.path == tmp_path / "missing.toml"


def test_file_outside_cwd_is_shown_with_its_full_path(tmp_path: Path) -> None:
    """A config file outside cwd is named by its absolute path."""
    config = tmp_path / "conf" / "hookgrad.toml"
    config.parent.mkdir()
    config.write_text("strict = 2\n", encoding="utf-8")
    (tmp_path / "work").mkdir()
    with pytest.raises(ConfigError, match=f"^{config}: invalid value for 'strict'"):
        load_config(config, cwd=tmp_path / "work")


def test_bad_disable_autoload_value_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD=maybe is rejected, naming the variable."""
    monkeypatch.setenv("HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD", "maybe")
    with pytest.raises(ConfigError, match=r"^HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD: expected 1") as info:
        load_config(cwd=tmp_path)
    assert info.value.key == "HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD"


# --------------------------------------------------------------------------------------------
# Plugin tables
# --------------------------------------------------------------------------------------------


def test_validate_plugin_table_returns_the_model() -> None:
    """A good table becomes the plugin's validated config."""
    table = {"max_norm": 0.5, "modules": ["layers.*"]}
    config = validate_plugin_table("grad_clip", table, GradClipConfig, path="hookgrad.toml")
    assert config == GradClipConfig(max_norm=0.5, modules=("layers.*",))


def test_validate_plugin_table_unknown_key() -> None:
    """A typo in [plugins.grad_clip]: file, table, did-you-mean, common and own keys."""
    with pytest.raises(ConfigError) as info:
        validate_plugin_table("grad_clip", {"max_nrom": 2}, GradClipConfig, path="hookgrad.toml")
    assert str(info.value) == (
        "hookgrad.toml: unknown key 'max_nrom' in [plugins.grad_clip]; did you mean "
        "'max_norm'? valid keys: enabled, modules, exclude, module_types, on_error, "
        "class_path, max_norm, norm_type"
    )
    error = info.value
    assert (error.path, error.table, error.key) == (
        Path("hookgrad.toml"),
        "plugins.grad_clip",
        "max_nrom",
    )
    assert error.valid_keys == (*COMMON_KEYS, "max_norm", "norm_type")


def test_validate_plugin_table_in_pyproject() -> None:
    """From a pyproject.toml the table is [tool.hookgrad.plugins.NAME]; table stays plugins.NAME."""
    with pytest.raises(ConfigError) as info:
        validate_plugin_table(
            "grad_clip", {"norm_type": "l1"}, GradClipConfig, path="pyproject.toml"
        )
    assert str(info.value) == (
        "pyproject.toml: invalid value for 'norm_type' in [tool.hookgrad.plugins.grad_clip]: "
        "Input should be 'l2' or 'inf' (got str 'l1')"
    )
    assert info.value.table == "plugins.grad_clip"


def test_validate_plugin_table_keeps_a_validators_message() -> None:
    """A field validator's own message is shown once, without pydantic's prefix."""
    with pytest.raises(ConfigError) as info:
        validate_plugin_table("grad_clip", {"class_path": "nope"}, GradClipConfig, path="h.toml")
    assert str(info.value) == (
        "h.toml: invalid value for 'class_path' in [plugins.grad_clip]: "
        "class_path must look like 'package.module:Class', got 'nope'"
    )


def test_validate_plugin_table_rejects_a_non_table() -> None:
    """A plugin entry that is not a table is an error naming [plugins.NAME]."""
    with pytest.raises(ConfigError) as info:
        validate_plugin_table("grad_clip", [1], GradClipConfig, path="hookgrad.toml")
    assert str(info.value) == "hookgrad.toml: [plugins.grad_clip] must be a table, got list [1]"
    assert (info.value.table, info.value.key) == ("plugins", "grad_clip")


def test_plugin_config_blames_the_layer_that_set_the_key(tmp_path: Path) -> None:
    """LoadedConfig.plugin_config names the file for file keys, "overrides" for code keys."""
    (tmp_path / "hookgrad.toml").write_text("[plugins.grad_clip]\nmax_nrom = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^hookgrad.toml: unknown key 'max_nrom' in \[plugins"):
        load_config(cwd=tmp_path).plugin_config("grad_clip", GradClipConfig)
    (tmp_path / "hookgrad.toml").write_text("[plugins.grad_clip]\nmax_norm = 1\n", encoding="utf-8")
    loaded = load_config(cwd=tmp_path, overrides={"plugins": {"grad_clip": {"on_eror": "warn"}}})
    with pytest.raises(ConfigError, match=r"^overrides: unknown key 'on_eror'.*'on_error'\?"):
        loaded.plugin_config("grad_clip", GradClipConfig)


def test_plugin_config_blames_hookgrad_plugins_for_its_enabled_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin model without ``enabled`` rejects HOOKGRAD_PLUGINS' key, naming the variable."""

    class Bare(pydantic.BaseModel):
        """A config that does not derive from PluginConfig (no common keys)."""

        model_config = pydantic.ConfigDict(extra="forbid")

    monkeypatch.setenv("HOOKGRAD_PLUGINS", "bare")
    with pytest.raises(
        ConfigError, match=r"^HOOKGRAD_PLUGINS: unknown key 'enabled' in \[plugins.bare\]"
    ):
        load_config(cwd=tmp_path).plugin_config("bare", Bare)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"max_norm": True}, "'max_norm' in [plugins.grad_clip]: Input should be a valid number"),
        ({"max_norm": "0.5"}, "'max_norm' in [plugins.grad_clip]: Input should be a valid number"),
        ({"enabled": "no"}, "'enabled' in [plugins.grad_clip]: Input should be a valid boolean"),
        ({"modules": "layers.*"}, "'modules' in [plugins.grad_clip]: Input should be a valid"),
        ({"modules": [1]}, "'modules[0]' in [plugins.grad_clip]: Input should be a valid string"),
    ],
)
def test_plugin_tables_are_not_coerced(table: dict[str, object], message: str) -> None:
    """A plugin table is as strict as the top level: a bool, str or int of the wrong type fails."""
    with pytest.raises(ConfigError) as info:
        validate_plugin_table("grad_clip", table, GradClipConfig, path="hookgrad.toml")
    assert str(info.value).startswith(f"hookgrad.toml: invalid value for {message}")


def test_plugin_tables_take_an_int_for_a_float_and_lists_for_tuples() -> None:
    """max_norm = 1 is 1.0, as torch takes it; TOML arrays fill the tuple settings."""
    config = validate_plugin_table(
        "grad_clip", {"max_norm": 1, "modules": ["a", "b"]}, GradClipConfig, path="h.toml"
    )
    assert (config.max_norm, type(config.max_norm), config.modules) == (1.0, float, ("a", "b"))
