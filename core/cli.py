"""The ``hookgrad`` command (also ``python -m hookgrad``): plugins, config, and the demo run.

The commands use the services that exist without a ``Runtime``: ``load_config`` and the
``PluginCatalog``. What they take from the outside world sits in ``CliState``, click's context
object, so tests pass a fake catalog as ``obj``. A user error (a bad config, a bad option)
prints one message naming the culprit and exits non-zero, never a traceback: 2 for a config
hookgrad cannot use (as for a bad option), 1 for anything else.

``import hookgrad`` does not import this module, nor click.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import click
import pluggy

import hookgrad

from ._demo import StepRecord, train
from .hookspecs import PROJECT_NAME, specs
from .runtime import (
    ENTRY_POINT_GROUP,
    ConfigError,
    LoadedConfig,
    LoadedPlugin,
    PluginCatalog,
    PluginLoadError,
    PluginSource,
    RuntimeConfig,
    load_class_path,
    load_config,
)

__all__ = ["CliState", "ConfigFailure", "main"]

_HOOKSPECS: Final = frozenset(specs.__all__)
_NO_PLUGINS: Final = (
    f"no plugins installed: the entry-point group {ENTRY_POINT_GROUP!r} is empty. A plugin "
    f'package declares [project.entry-points."{ENTRY_POINT_GROUP}"] NAME = "pkg.module:Plugin" '
    "in its pyproject.toml; install it with pip into this environment."
)


@dataclass
class CliState:
    """What the commands take from the environment; tests pass their own as click's ``obj``."""

    catalog: PluginCatalog = field(default_factory=PluginCatalog)


class ConfigFailure(click.ClickException):
    """A config hookgrad cannot use: ``Error: <ConfigError message>`` on stderr, exit 2."""

    exit_code = 2


def _load(file: Path | None) -> LoadedConfig:
    """``load_config(file)`` (discovery in the current directory when None), for the CLI."""
    try:
        return load_config(file)
    except ConfigError as error:
        raise ConfigFailure(str(error)) from None


def _config_label(loaded: LoadedConfig) -> str:
    """The file layer as ``explain()`` names it (``hookgrad.toml``), or a note that none was."""
    for layer in loaded.layers:
        if layer.startswith("file "):
            return layer.removeprefix("file ")
    return "no config file (defaults)"


def _table_origin(loaded: LoadedConfig, name: str) -> str:
    """Where ``[plugins.NAME]`` was set, as error messages name it: a file or an env var."""
    prefix = f"plugins.{name}"
    for key, _, layer in loaded.explain():
        if key == prefix or key.startswith(prefix + "."):
            return layer.partition(" ")[2] or layer
    return "config"


# --------------------------------------------------------------------------------------------
# The command group
# --------------------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    hookgrad.__version__, "--version", "-V", prog_name="hookgrad", message="%(prog)s %(version)s"
)
@click.pass_context
def main(ctx: click.Context) -> None:
    """hookgrad: a numpy autograd engine whose hooks also go to pluggy plugins."""
    ctx.ensure_object(CliState)


# --------------------------------------------------------------------------------------------
# hookgrad plugins
# --------------------------------------------------------------------------------------------


def plugin_status(source: PluginSource, config: RuntimeConfig) -> tuple[bool, str]:
    """Whether ``config`` activates the installed plugin ``source``, and why (or why not)."""
    if source.name in config.disable:
        return False, "disabled (listed in disable)"
    if not source.builtin and not config.autoload:
        return False, "blocked (autoload off)"
    table = config.plugins.get(source.name)
    if table is None:
        return False, f"off (no [plugins.{source.name}] table)"
    if table.get("enabled", True) is False:
        return False, "disabled (enabled = false)"
    return True, "enabled"


def implemented_hooks(target: object) -> list[str]:
    """The hooks pluggy would register for ``target`` (a plugin class or module), sorted.

    A name that is no hookgrad hookspec is marked, as pluggy would only fail on it later.
    """
    pm = pluggy.PluginManager(PROJECT_NAME)
    hooks = []
    for attribute in dir(target):
        try:
            opts = pm.parse_hookimpl_opts(target, attribute)
        except Exception:  # a descriptor that raises on class access is not a hook
            continue
        if opts is not None:
            name = opts.get("specname") or attribute
            hooks.append(name if name in _HOOKSPECS else f"{name} (no such hookspec)")
    return sorted(hooks)


def _plugin_row(catalog: PluginCatalog, source: PluginSource, config: RuntimeConfig) -> list[str]:
    """NAME, SOURCE, KIND, STATUS, HOOKS of one installed plugin (imports it to find hooks)."""
    _, status = plugin_status(source, config)
    try:
        hooks = ", ".join(implemented_hooks(catalog.load(source.name).target)) or "(none)"
    except PluginLoadError as error:
        hooks = f"import failed: {error.reason}"
    dist = f"{source.distribution or '?'} {source.version or ''}".strip()
    kind = "built-in" if source.builtin else "third-party"
    return [source.name, dist, kind, status, hooks]


def _table(rows: list[list[str]]) -> Iterator[str]:
    """Rows as left-aligned columns; the last column is not padded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)]
        yield "  ".join([*cells, row[-1]])


def _unmatched_tables(sources: dict[str, PluginSource], loaded: LoadedConfig) -> Iterator[str]:
    """A line for each ``[plugins.NAME]`` table that names no installed plugin."""
    for name, table in loaded.config.plugins.items():
        if name in sources:
            continue
        where = f"{_table_origin(loaded, name)}: [plugins.{name}]"
        class_path = table.get("class_path")
        if class_path:
            yield f"{where} has no entry point; loaded from class_path {class_path}"
        else:
            available = ", ".join(sorted(sources)) or "none installed"
            yield f"{where} names no installed plugin (available: {available})"


@main.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="Config file (default: hookgrad.toml, [tool.hookgrad] in pyproject.toml, $HOOKGRAD_CONFIG).",
)
@click.pass_obj
def plugins(state: CliState, config_file: Path | None) -> None:
    """List installed plugins: source, built-in or not, enabled by the config, hooks.

    Like pytest --trace-config; every plugin is imported to find its hooks, and one that
    fails to import is shown with the error.
    """
    loaded = _load(config_file)
    sources = state.catalog.sources()
    click.echo(f"hookgrad {hookgrad.__version__}; config: {_config_label(loaded)}")
    if not sources:
        click.echo(_NO_PLUGINS)
    else:
        header = ["NAME", "SOURCE", "KIND", "STATUS", "HOOKS"]
        rows = [_plugin_row(state.catalog, sources[n], loaded.config) for n in sorted(sources)]
        for line in _table([header, *rows]):
            click.echo(line.rstrip())
    for line in _unmatched_tables(sources, loaded):
        click.echo(line)


# --------------------------------------------------------------------------------------------
# hookgrad config check / show
# --------------------------------------------------------------------------------------------


@main.group()
def config() -> None:
    """Check a config file, or show the merged configuration and where each value came from."""


_FILE_ARGUMENT = click.argument("file", required=False, type=click.Path(path_type=Path))


def _activated_plugin(
    catalog: PluginCatalog, name: str, loaded: LoadedConfig
) -> LoadedPlugin | None:
    """Import the plugin that ``[plugins.NAME]`` activates; None if the config leaves it off.

    Raises PluginLoadError on an import failure, ConfigFailure on an unknown name.
    """
    sources, config = catalog.sources(), loaded.config
    table = config.plugins[name]
    if name in sources:
        return catalog.load(name) if plugin_status(sources[name], config)[0] else None
    if table.get("enabled", True) is False or name in config.disable:
        return None
    if table.get("class_path"):
        return load_class_path(name, str(table["class_path"]))
    available = ", ".join(sorted(sources)) or "none installed"
    raise ConfigFailure(
        f"{_table_origin(loaded, name)}: unknown plugin {name!r} in [plugins.{name}]; "
        f"available: {available} "
        "(or set class_path = 'package.module:Class')"
    )


def _check_plugin_tables(catalog: PluginCatalog, loaded: LoadedConfig) -> list[str]:
    """Validate the table of every plugin the config activates; return import warnings.

    A bad key raises ConfigFailure naming the file and table, as does an enabled plugin that
    is neither installed nor given a ``class_path``. An import failure is a warning, or a
    ConfigFailure with ``strict = true``, as when the runtime activates plugins.
    """
    warnings: list[str] = []
    for name in loaded.config.plugins:
        try:
            plugin = _activated_plugin(catalog, name, loaded)
        except PluginLoadError as error:
            if loaded.config.strict:
                raise ConfigFailure(f"{error} (strict = true)") from None
            warnings.append(str(error))
            continue
        if plugin is not None:
            try:
                loaded.plugin_config(name, plugin.config_model)
            except ConfigError as error:
                raise ConfigFailure(str(error)) from None
    return warnings


@config.command()
@_FILE_ARGUMENT
@click.pass_obj
def check(state: CliState, file: Path | None) -> None:
    """Validate FILE (default: the config found in the current directory).

    Also validates the [plugins.NAME] table of each plugin the config enables against that
    plugin's own settings. Exit 0 with one OK line, or 2 with the error on stderr.
    """
    loaded = _load(file)
    for warning in _check_plugin_tables(state.catalog, loaded):
        click.echo(f"warning: {warning}", err=True)
    extra = [layer for layer in loaded.layers if not layer.startswith("file ")]
    also = f" (with {', '.join(extra)})" if extra else ""
    if loaded.path is None:
        click.echo(f"OK: no config file found in {Path.cwd()}; defaults apply{also}")
    else:
        click.echo(f"OK: {_config_label(loaded)} is a valid hookgrad config{also}")


@config.command()
@_FILE_ARGUMENT
def show(file: Path | None) -> None:
    """Print every effective setting with the layer that set it.

    Layers, lowest first: default < file < environment (HOOKGRAD_PLUGINS,
    HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD) < code.
    """
    loaded = _load(file)
    click.echo(f"layers, lowest first: default < {' < '.join(loaded.layers) or '(none set)'}")
    rows = [[key, repr(value), layer] for key, value, layer in loaded.explain()]
    for line in _table([["KEY", "VALUE", "FROM"], *rows]):
        click.echo(line)


# --------------------------------------------------------------------------------------------
# hookgrad demo
# --------------------------------------------------------------------------------------------


@contextmanager
def _loss_log(out: Path | None) -> Iterator[Callable[[StepRecord], None] | None]:
    """A step callback writing ``out/loss.csv`` row by row (flushed, so a crash keeps rows)."""
    if out is None:
        yield None
        return
    path = out / "loss.csv"
    try:
        out.mkdir(parents=True, exist_ok=True)
        f = path.open("w", newline="", encoding="utf-8")
    except OSError as error:
        raise click.ClickException(f"cannot write {path}: {error.strerror}") from None
    with f:
        writer = csv.writer(f)
        writer.writerow(["step", "loss", "accuracy"])

        def write(record: StepRecord) -> None:
            writer.writerow([record.step, record.loss, record.accuracy])
            f.flush()

        yield write
    click.echo(f"wrote {path}")


@main.command()
@click.option("--steps", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--log-every", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Data and weight-init seed.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for loss.csv (step, loss, accuracy after the step); created if missing.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="Config file to validate; a bad one fails before training.",
)
def demo(steps: int, log_every: int, seed: int, out: Path | None, config_file: Path | None) -> None:
    """Train a 2-64-64-1 MLP on two generated spirals (no download), printing loss and accuracy.

    Plugins from the config are not applied yet: that comes with the built-in plugins.
    """
    if config_file is not None:
        loaded = _load(config_file)
        click.echo(f"config {_config_label(loaded)}: valid (the demo applies no plugins yet)")
    with _loss_log(out) as on_step:
        train(steps, log_every, seed, on_step=on_step, echo=click.echo)
