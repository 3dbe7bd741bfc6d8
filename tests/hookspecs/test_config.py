"""PluginConfig: the common fields, strict validation, subclassing and the module selector."""

from __future__ import annotations

from typing import Literal

import pydantic
import pytest

from hookgrad.hookspecs import PluginConfig


class ClipConfig(PluginConfig):
    """A plugin's own config: common fields plus its settings."""

    max_norm: float = 1.0
    mode: Literal["norm", "value"] = "norm"


def test_defaults_select_everything_and_raise() -> None:
    """The defaults: enabled, every module, no exclusion, every class, errors raise."""
    config = PluginConfig()
    assert config.model_dump() == {
        "enabled": True,
        "modules": ("*",),
        "exclude": (),
        "module_types": (),
        "on_error": "raise",
        "class_path": None,
    }


def test_unknown_key_is_rejected_by_name() -> None:
    """A misspelled key fails validation, and the error names that key."""
    with pytest.raises(pydantic.ValidationError) as info:
        PluginConfig.model_validate({"modles": ["layers.*"]})
    (error,) = info.value.errors()
    assert error["type"] == "extra_forbidden"
    assert error["loc"] == ("modles",)
    assert "modles" in str(info.value)


def test_subclass_validates_its_own_fields_and_the_common_ones() -> None:
    """A subclass accepts common and own keys, rejects unknown ones and bad values."""
    config = ClipConfig.model_validate(
        {"max_norm": 2.5, "modules": ["layers.*"], "on_error": "warn"}
    )
    assert (config.max_norm, config.modules, config.on_error) == (2.5, ("layers.*",), "warn")
    with pytest.raises(pydantic.ValidationError, match="max_norm"):
        ClipConfig.model_validate({"max_norm": "2.5"})  # strict, in subclasses too
    with pytest.raises(pydantic.ValidationError, match="max_nrom"):
        ClipConfig.model_validate({"max_nrom": 1.0})
    with pytest.raises(pydantic.ValidationError, match="mode"):
        ClipConfig.model_validate({"mode": "agc"})
    with pytest.raises(pydantic.ValidationError, match="on_error"):
        ClipConfig.model_validate({"on_error": "ignore"})


def test_config_is_frozen_and_hashable() -> None:
    """Assignment raises; list settings are stored as tuples, so the config hashes."""
    config = PluginConfig(modules=["a", "b"])
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        config.enabled = False  # type: ignore[misc]
    assert config.modules == ("a", "b")
    assert hash(config) == hash(PluginConfig(modules=["a", "b"]))


@pytest.mark.parametrize("path", ["pkg.mod:Class", "mod:Outer.Inner", "a_b.c9:D"], ids=lambda p: p)
def test_class_path_accepts_module_colon_object(path: str) -> None:
    """class_path takes "package.module:Class" (a dotted object path after the colon)."""
    assert PluginConfig(class_path=path).class_path == path


@pytest.mark.parametrize("path", ["pkg.mod.Class", "pkg.mod:", ":Class", "pkg mod:C", "1pkg:C"])
def test_class_path_rejects_other_shapes(path: str) -> None:
    """A class_path without exactly "module:object" fails, quoting the value."""
    with pytest.raises(pydantic.ValidationError, match=r"package\.module:Class"):
        PluginConfig(class_path=path)


def test_module_types_are_class_names() -> None:
    """module_types holds bare class names; a dotted name fails with a hint."""
    assert PluginConfig(module_types=["Linear", "Conv2d"]).module_types == ("Linear", "Conv2d")
    with pytest.raises(pydantic.ValidationError, match="class names like 'Linear'"):
        PluginConfig(module_types=["nn.Linear"])


@pytest.mark.parametrize("glob", ["layers.", ".fc", "layers..0", "*..norm"])
@pytest.mark.parametrize("field", ["modules", "exclude"])
def test_a_glob_no_module_name_can_match_is_rejected(field: str, glob: str) -> None:
    """A glob with an empty dotted part matches no module name ever: an error, not a no-op."""
    with pytest.raises(pydantic.ValidationError, match=f"{field}.*can match no module name"):
        PluginConfig.model_validate({field: ["fc", glob]})
    assert PluginConfig(modules=["", "*", "layers.*", "*.norm"]).modules[0] == ""


# (modules, exclude, module_types, module_name, module_type) -> selected
SELECTS = [
    # default: every module, the root "" included
    ((), (), (), "", "Sequential", True),
    ((), (), (), "layers.0", "Linear", True),
    # "" selects the root only
    (("",), (), (), "", "Sequential", True),
    (("",), (), (), "layers", "Sequential", False),
    # "layers.*": children and deeper descendants, not "layers" itself; * crosses dots
    (("layers.*",), (), (), "layers.0", "Linear", True),
    (("layers.*",), (), (), "layers.0.act", "ReLU", True),
    (("layers.*",), (), (), "layers", "Sequential", False),
    (("layers.*",), (), (), "head", "Linear", False),
    (("layers.*",), (), (), "", "Sequential", False),
    # character classes and ?, matched on the whole name, case-sensitive
    (("layers.[02]",), (), (), "layers.2", "Linear", True),
    (("layers.?",), (), (), "layers.10", "Linear", False),
    (("Layers.*",), (), (), "layers.0", "Linear", False),
    # several globs: any of them
    (("head", "layers.1"), (), (), "head", "Linear", True),
    (("head", "layers.1"), (), (), "layers.1", "Linear", True),
    (("head", "layers.1"), (), (), "layers.2", "Linear", False),
    # exclusion wins over modules
    (("layers.*",), ("layers.1",), (), "layers.1", "Linear", False),
    (("layers.*",), ("layers.1",), (), "layers.10", "Linear", True),
    (("*",), ("*.act",), (), "layers.0.act", "ReLU", False),
    (("*",), ("",), (), "", "Sequential", False),
    (("*",), ("",), (), "layers", "Sequential", True),
    # module_types restricts by class name; empty means every class
    (("*",), (), ("Linear",), "layers.0", "Linear", True),
    (("*",), (), ("Linear",), "layers.1", "ReLU", False),
    (("*",), (), ("Linear", "ReLU"), "layers.1", "ReLU", True),
    (("head",), (), ("Linear",), "layers.0", "Linear", False),
    (("*",), ("layers.0",), ("Linear",), "layers.0", "Linear", False),
]


@pytest.mark.parametrize(
    ("modules", "exclude", "module_types", "name", "type_", "expected"),
    SELECTS,
    ids=[f"{m}-{e}-{t}-{n!r}-{ty}" for m, e, t, n, ty, _ in SELECTS],
)
def test_selects_truth_table(
    modules: tuple[str, ...],
    exclude: tuple[str, ...],
    module_types: tuple[str, ...],
    name: str,
    type_: str,
    expected: bool,
) -> None:
    """selects(): module_types, then any modules glob, then no exclude glob (exclusion wins)."""
    settings: dict[str, tuple[str, ...]] = {}
    if modules:
        settings["modules"] = modules
    if exclude:
        settings["exclude"] = exclude
    if module_types:
        settings["module_types"] = module_types
    assert PluginConfig(**settings).selects(name, type_) is expected


def test_empty_modules_selects_nothing() -> None:
    """modules = [] selects no module, the root included."""
    config = PluginConfig(modules=[])
    assert not config.selects("", "Sequential")
    assert not config.selects("layers.0", "Linear")


def test_selects_ignores_enabled() -> None:
    """enabled switches the plugin, not modules: a disabled config still answers selects()."""
    assert PluginConfig(enabled=False).selects("layers.0", "Linear")


def test_selects_follows_model_copy_updates() -> None:
    """A copy with new globs selects by the new globs, not the original's."""
    config = PluginConfig(modules=["head"])
    assert config.selects("head", "Linear")
    narrowed = config.model_copy(update={"modules": ("layers.*",)})
    assert not narrowed.selects("head", "Linear")
    assert narrowed.selects("layers.0", "Linear")
    assert config.selects("head", "Linear")


def test_json_schema_describes_common_and_own_fields() -> None:
    """model_json_schema() works for the base and a subclass; every common field is described."""
    base = PluginConfig.model_json_schema()
    assert base["additionalProperties"] is False
    assert all(prop.get("description") for prop in base["properties"].values())
    assert set(ClipConfig.model_json_schema()["properties"]) == {
        *base["properties"],
        "max_norm",
        "mode",
    }
