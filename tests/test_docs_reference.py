"""The reference pages match the code: docs/events.md is generated, docs/config.md is accurate."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from hookgrad.cli import CliState, main
from hookgrad.hookspecs import PluginConfig
from hookgrad.runtime import (
    ENTRY_POINT_GROUP,
    ConfigError,
    EventsConfig,
    PluginCatalog,
    PluginLoadError,
    Runtime,
    RuntimeConfig,
    load_class_path,
    load_config,
)
from hookgrad.runtime._config import ENV_CONFIG, ENV_DISABLE_AUTOLOAD, ENV_ENGINE, ENV_PLUGINS

DOCS = Path(__file__).resolve().parents[1] / "docs"
CONFIG_DOC = DOCS / "config.md"
CONFIG_TEXT = CONFIG_DOC.read_text(encoding="utf-8")
TOML_BLOCKS = re.findall(r"```toml\n(.*?)```", CONFIG_TEXT, re.S)
BUILTINS = (
    "event_log",
    "grad_clip",
    "grad_scale",
    "grad_stats",
    "nan_guard",
    "param_health",
    "spike_guard",
)


@pytest.fixture(autouse=True)
def _no_hookgrad_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No HOOKGRAD_* variable from the shell reaches the examples."""
    for name in list(os.environ):
        if name.startswith("HOOKGRAD_"):
            monkeypatch.delenv(name)


def _generator(name: str = "_generate_events") -> ModuleType:
    """docs/_generate_events.py (or another generator), imported from its path (docs/ is no
    package)."""
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _builtin_catalog() -> PluginCatalog:
    """The plugins hookgrad itself ships, whatever else this environment has installed."""
    return PluginCatalog(
        lambda: [
            ep
            for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
            if ep.dist is not None and ep.dist.metadata["Name"] == "hookgrad"
        ]
    )


def _write_config(directory: Path, block: str) -> Path:
    """``block`` as the file it is an example of: pyproject.toml if it uses [tool.hookgrad]."""
    path = directory / ("pyproject.toml" if "[tool.hookgrad" in block else "hookgrad.toml")
    path.write_text(block, encoding="utf-8")
    return path


def _loads(name: str, table: Mapping[str, Any], catalog: PluginCatalog) -> bool:
    """Whether the plugin a ``[plugins.NAME]`` table names can be imported here."""
    try:
        if "class_path" in table:
            load_class_path(name, table["class_path"])
        else:
            catalog.load(name)
    except PluginLoadError:
        return False
    return True


# ---------------------------------------------------------------------- events.md
def test_events_md_is_what_the_generator_writes() -> None:
    """The committed docs/events.md equals the generator's output."""
    generator = _generator()
    committed = (DOCS / "events.md").read_text(encoding="utf-8")
    assert committed == generator.render(), (
        f"docs/events.md is out of date: run `{generator.COMMAND}` and commit the result"
    )


def test_api_md_is_what_the_generator_writes() -> None:
    """The committed docs/api.md (the supported torch API by module) equals the generator's
    output, so the page lists exactly the public names the code has."""
    generator = _generator("_generate_api")
    committed = (DOCS / "api.md").read_text(encoding="utf-8")
    assert committed == generator.render(), (
        f"docs/api.md is out of date: run `{generator.COMMAND}` and commit the result"
    )


def test_api_md_names_exist_and_hookgrad_services_are_left_out() -> None:
    """Every listed name resolves in its module; the runtime and plugins are not torch's API."""
    generator = _generator("_generate_api")
    modules = generator.torch_modules()
    names = {module.__name__ for module in modules}
    assert {"hookgrad", "hookgrad.nn.functional", "hookgrad.utils.data"} <= names
    assert not any(name.startswith(("hookgrad.runtime", "hookgrad.plugins")) for name in names)
    for module in modules:
        for name in generator.public_names(module):
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_events_md_schemas_are_the_models_schemas() -> None:
    """Each json block is a schema: the eight payloads, PluginRecord, then TensorSummary."""
    from hookgrad.hookspecs import HOOK_EVENTS, TENSOR_SUMMARY_SCHEMA, PluginRecord

    text = (DOCS / "events.md").read_text(encoding="utf-8")
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", text, re.S)]
    models: list[type[BaseModel]] = [*HOOK_EVENTS.values(), PluginRecord]
    assert blocks == [m.model_json_schema() for m in models] + [TENSOR_SUMMARY_SCHEMA]


# ---------------------------------------------------------------------- config.md: examples
def test_config_md_has_toml_examples() -> None:
    """The examples below are found at all (a changed fence would silently test nothing)."""
    assert len(TOML_BLOCKS) >= 6


@pytest.mark.parametrize(
    "block", TOML_BLOCKS, ids=[f"{i}:{b.splitlines()[0]}" for i, b in enumerate(TOML_BLOCKS)]
)
def test_config_md_toml_block_is_a_valid_config(block: str, tmp_path: Path) -> None:
    """Each ```toml block loads; one naming only importable plugins builds a Runtime."""
    path = _write_config(tmp_path, block)
    loaded = load_config(path, environ={}, cwd=tmp_path)
    assert any(layer != "default" for _, _, layer in loaded.explain()), "nothing was set"
    catalog = _builtin_catalog()
    if all(_loads(n, t, catalog) for n, t in loaded.config.plugins.items()):
        Runtime(path, environ={}, cwd=tmp_path, catalog=catalog).close()


# event_log hooks the full backward of every module; the first one's input needs no grad.
@pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")
def test_config_md_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The python blocks run in order beside the first example's hookgrad.toml."""
    _write_config(tmp_path, TOML_BLOCKS[0])
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in re.findall(r"```python\n(.*?)```", CONFIG_TEXT, re.S):
            exec(compile(block, str(CONFIG_DOC), "exec"), namespace)
    assert out.getvalue() == "[0, 1, 2]\n"
    records = (tmp_path / "runs" / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert any(json.loads(line).get("plugin") == "event_log" for line in records)


def test_config_show_example_is_real_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `hookgrad config show` transcript is what the command prints for the first example."""
    command = "$ HOOKGRAD_PLUGINS=nan_guard hookgrad config show\n"
    shown = CONFIG_TEXT[CONFIG_TEXT.index(command) + len(command) :].split("```")[0]
    _write_config(tmp_path, TOML_BLOCKS[0])
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["config", "show"], env={ENV_PLUGINS: "nan_guard"})
    assert result.exit_code == 0, result.output
    assert result.output == shown


# ---------------------------------------------------------------------- config.md: coverage
def test_config_md_documents_every_key_and_variable() -> None:
    """Each top-level, [events] and common plugin key has a table row; each variable too."""
    keys = [*RuntimeConfig.model_fields, *EventsConfig.model_fields, *PluginConfig.model_fields]
    for key in keys:
        assert f"| `{key}` |" in CONFIG_TEXT, key
    for variable in (ENV_CONFIG, ENV_PLUGINS, ENV_DISABLE_AUTOLOAD, ENV_ENGINE):
        assert f"| `{variable}` |" in CONFIG_TEXT, variable


def test_config_md_links_every_builtin_plugin_page() -> None:
    """Each plugin hookgrad ships has a row linking docs/plugins/<name>.md."""
    assert sorted(_builtin_catalog().sources()) == sorted(BUILTINS)
    for name in BUILTINS:
        assert f"(plugins/{name}.md)" in CONFIG_TEXT, name


# ---------------------------------------------------------------------- config.md: errors
BAD_CONFIGS = {
    "top-level typo": ("hookgrad.toml", "autolaod = false\n"),
    "events typo": ("hookgrad.toml", '[events]\njsnl = "e.jsonl"\n'),
    "plugin key typo": ("hookgrad.toml", "[plugins.event_log]\nevery_n_step = 10\n"),
    "pyproject typo": ("pyproject.toml", "[tool.hookgrad.events]\nmemroy = true\n"),
    "not coerced": ("hookgrad.toml", 'autoload = "yes"\n'),
    "bad choice": ("hookgrad.toml", '[plugins.event_log]\nhooks = ["full_backward"]\n'),
    "unknown plugin": ("hookgrad.toml", "[plugins.evnt_log]\n"),
}


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_config_md_error_messages_are_real(case: str, tmp_path: Path) -> None:
    """Each error message config.md shows is, verbatim, the one the Runtime raises."""
    name, text = BAD_CONFIGS[case]
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        Runtime(environ={}, cwd=tmp_path, catalog=_builtin_catalog())
    assert f"\n{info.value}\n" in CONFIG_TEXT


@pytest.mark.parametrize(
    ("variable", "value"), [(ENV_DISABLE_AUTOLOAD, "maybe"), (ENV_ENGINE, "jax")]
)
def test_config_md_environment_error_is_real(variable: str, value: str) -> None:
    """A bad HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD or HOOKGRAD_ENGINE value fails as shown."""
    with pytest.raises(ConfigError) as info:
        load_config({}, environ={variable: value})
    assert f"\n{info.value}\n" in CONFIG_TEXT


def test_config_md_cli_unknown_plugin_message_is_real(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hookgrad config check` reports an unknown plugin as shown."""
    (tmp_path / "hookgrad.toml").write_text("[plugins.evnt_log]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["config", "check"], obj=CliState(_builtin_catalog()))
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ")
    assert f"\n{result.stderr.removeprefix('Error: ')}" in CONFIG_TEXT
