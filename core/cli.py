"""The ``hookgrad`` command (also ``python -m hookgrad``): plugins, config, the demo and its report.

``plugins`` and ``config`` use the services that exist without a ``Runtime``: ``load_config``
and the ``PluginCatalog``; ``demo`` trains under a ``Runtime`` with the config's plugins, and
``report`` redraws a saved event log (:mod:`hookgrad._report`). What they take from the
outside world sits in ``CliState``, click's context object, so tests pass a fake catalog as
``obj``. A user error (a bad config, a bad option, a malformed event log) prints one message
naming the culprit and exits non-zero, never a traceback: 2 for a config hookgrad cannot use
(as for a bad option), 1 for anything else.

``import hookgrad`` does not import this module, nor click.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import click
import pluggy

import hookgrad

from ._demo import (
    MODELS,
    NanInjection,
    SpikeInjection,
    StepRecord,
    Task,
    final_line,
    make_task,
    run,
)
from ._plot import PlotUnavailable, picture_format, render
from ._report import findings, gradient_flow
from ._report_records import Entry, RecordError, plugin_entries, read_entries
from .engines import ENGINE_NAMES
from .runtime import (
    ENTRY_POINT_GROUP,
    ConfigError,
    LoadedConfig,
    LogFormatError,
    PluginCatalog,
    PluginLoadError,
    PluginSource,
    Runtime,
    RuntimeConfig,
    load_config,
    read_events,
)
from .runtime._activation import (
    Planned,
    check_config,
    hooks_of,
    plugin_settings,
    unknown_hooks,
)
from .runtime._tensorboard import TensorBoardSink

__all__ = ["CliState", "ConfigFailure", "main"]

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


def _hooks_cell(catalog: PluginCatalog, source: PluginSource, config: RuntimeConfig) -> str:
    """The hooks of an installed plugin, imported to find them unless autoload blocks it.

    A hook that is no hookgrad hookspec is marked when the runtime would refuse it.
    """
    if len(catalog.clashes().get(source.name, ())) > 1:
        return "(not imported: the name is ambiguous)"
    if not source.builtin and not config.autoload:
        return "(not imported: autoload off)"
    try:
        target = catalog.load(source.name).target
    except PluginLoadError as error:
        return f"import failed: {error.reason}"
    unknown = unknown_hooks(target)
    marked = [
        f"{hook} (no such hookspec)" if hook in unknown else hook for hook in hooks_of(target)
    ]
    return ", ".join(marked) or "(none)"


def _plugin_rows(catalog: PluginCatalog, config: RuntimeConfig) -> Iterator[list[str]]:
    """NAME, SOURCE, KIND, STATUS, HOOKS of each installed plugin, by name.

    A name that several distributions register gets a row per distribution, marked
    ambiguous: the runtime refuses to activate it.
    """
    sources, clashes = catalog.sources(), catalog.clashes()
    for name in sorted(sources):
        for source in clashes.get(name, [sources[name]]):
            _, status = plugin_status(source, config)
            if name in clashes:
                others = [s.distribution or "?" for s in clashes[name] if s is not source]
                status = f"ambiguous (also registered by {', '.join(others)})"
            dist = f"{source.distribution or '?'} {source.version or ''}".strip()
            kind = "built-in" if source.builtin else "third-party"
            yield [name, dist, kind, status, _hooks_cell(catalog, source, config)]


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
    fails to import is shown with the error. While autoload is off (autoload = false,
    HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD=1) no third-party plugin is imported.
    """
    loaded = _load(config_file)
    sources = state.catalog.sources()
    click.echo(f"hookgrad {hookgrad.__version__}; config: {_config_label(loaded)}")
    if not sources:
        click.echo(_NO_PLUGINS)
    else:
        header = ["NAME", "SOURCE", "KIND", "STATUS", "HOOKS"]
        rows = list(_plugin_rows(state.catalog, loaded.config))
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


def _check_plugins(catalog: PluginCatalog, loaded: LoadedConfig, execute: bool) -> list[str]:
    """Check the plugins ``loaded`` activates as the runtime would; return warnings and notes.

    The runtime's own checks (:mod:`hookgrad.runtime._activation`): a name that matches
    nothing and a bad key raise ConfigFailure, as does a plugin hook that is no hookspec; a
    plugin that fails to load is a warning, or a ConfigFailure with ``strict = true``. Only
    hookgrad's own plugins are imported unless ``execute``; the others are found without
    running them, and a note says what was therefore not checked.
    """
    lines: list[str] = []
    try:
        planned = check_config(loaded, catalog, Path.cwd())
    except ConfigError as error:
        raise ConfigFailure(str(error)) from None
    for plugin in planned:
        try:
            lines.extend(_check_plugin(catalog, loaded, plugin, execute))
        except PluginLoadError as error:
            if loaded.config.strict:
                raise ConfigFailure(f"{error} (strict = true)") from None
            lines.append(f"warning: {error}")
    return lines


def _check_plugin(
    catalog: PluginCatalog, loaded: LoadedConfig, plugin: Planned, execute: bool
) -> list[str]:
    if not (execute or plugin.own):
        return [f"not checked without --import: [plugins.{plugin.name}] ({plugin.locate()})"]
    try:
        plugin_settings(loaded, plugin.load(catalog))
    except (ConfigError, pluggy.PluginValidationError) as error:
        raise ConfigFailure(str(error)) from None
    return []


@config.command()
@_FILE_ARGUMENT
@click.option(
    "--import",
    "execute",
    is_flag=True,
    help="Also import the third-party and class_path plugins the config activates, to check "
    "their tables (this runs their code).",
)
@click.pass_obj
def check(state: CliState, file: Path | None, execute: bool) -> None:
    """Validate FILE (default: the config found in the current directory) as the runtime does.

    Accepts exactly what building a Runtime accepts: names of plugins, the [plugins.NAME]
    table of each plugin the config enables against that plugin's own settings, its hook
    names. It runs no code but hookgrad's: a third-party or class_path plugin is found
    without being imported, and its table is checked only with --import (a note says so).
    With autoload off no third-party plugin is imported, --import or not. Exit 0 with one
    OK line, or 2 with the error on stderr.
    """
    loaded = _load(file)
    for line in _check_plugins(state.catalog, loaded, execute):
        click.echo(line, err=line.startswith("warning: "))
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

EVENTS_FILE: Final = "events.jsonl"
PICTURE_FILE: Final = "gradient_flow.svg"
LOSS_FILE: Final = "loss.csv"
_NO_DEMO_PLUGINS: Final = (
    "no gradient plugin is active (no config, or one without [plugins.NAME] tables): training "
    "plainly; from a checkout, add --config examples/hookgrad.toml to see them at work"
)


class InjectionType(click.ParamType):
    """``--inject-nan STEP:MODULE`` or ``--inject-spike STEP:FACTOR`` as the injection
    ``kind`` parses; bad syntax is a usage error."""

    def __init__(self, kind: type[NanInjection] | type[SpikeInjection], name: str) -> None:
        self.kind = kind
        self.name = name

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> NanInjection | SpikeInjection:
        if isinstance(value, self.kind):
            return value
        try:
            return self.kind.parse(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


def _prepare_out(out: Path) -> None:
    """Create ``out``; drop an old event log there (the sink appends; a log holds one run).

    An error names the path that failed: ``out`` (or a parent), or the event log in it.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / EVENTS_FILE).unlink(missing_ok=True)
    except OSError as error:
        culprit = error.filename if error.filename is not None else out
        raise click.ClickException(f"cannot write {culprit}: {error.strerror}") from None


def _demo_runtime(config_file: Path | None, out: Path | None, engine: str) -> Runtime | None:
    """A runtime on ``engine`` with the config's plugins, events to memory and to
    ``out/events.jsonl``.

    The config is ``config_file`` or found as the runtime finds it. None, after a hint line,
    when no plugin is active: the demo then trains plainly.
    """
    events: dict[str, object] = {"memory": True}
    if out is not None:
        events["jsonl"] = str(out / EVENTS_FILE)
    try:
        runtime = Runtime(config_file, overrides={"events": events, "engine": engine})
    except ConfigError as error:
        raise ConfigFailure(str(error)) from None
    except PluginLoadError as error:
        raise click.ClickException(str(error)) from None
    if runtime.plugins:
        return runtime
    runtime.close()
    if out is not None:
        (out / EVENTS_FILE).unlink(missing_ok=True)
    click.echo(_NO_DEMO_PLUGINS)
    return None


@contextmanager
def _loss_log(path: Path | None) -> Iterator[Callable[[StepRecord], None]]:
    """A step callback writing ``path`` (loss.csv) row by row, flushed so a crash keeps rows.

    Without a path the callback does nothing. The accuracy cell is empty on steps where it
    was not measured.
    """
    if path is None:
        yield lambda record: None
        return
    try:
        f = path.open("w", newline="", encoding="utf-8")
    except OSError as error:
        raise click.ClickException(f"cannot write {path}: {error.strerror}") from None
    with f:
        writer = csv.writer(f)
        writer.writerow(["step", "loss", "accuracy"])

        def write(record: StepRecord) -> None:
            accuracy = "" if record.accuracy is None else record.accuracy
            writer.writerow([record.step, record.loss, accuracy])
            f.flush()

        yield write


@contextmanager
def _progress(records: Iterator[StepRecord], steps: int) -> Iterator[Iterable[StepRecord]]:
    """On a terminal, a progress bar with step and loss; elsewhere, a line per logged step."""
    if not sys.stdout.isatty():
        yield (_echo_logged(record, steps) for record in records)
        return

    def show(record: StepRecord | None) -> str | None:
        return None if record is None else f"step {record.step}/{steps}  loss {record.loss:.4f}"

    with click.progressbar(
        records, length=steps, label="training", show_eta=False, item_show_func=show
    ) as bar:
        yield bar


def _echo_logged(record: StepRecord, steps: int) -> StepRecord:
    if record.accuracy is not None:
        click.echo(record.line(steps))
    return record


@contextmanager
def _quiet() -> Iterator[None]:
    """Hide torch's warning that full backward hooks fire for a module whose inputs need no
    gradient: in the demo that is the first layer (its input is the data), as expected."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Full backward hook is firing", category=UserWarning
        )
        yield


def _write_picture(entries: list[Entry], path: Path) -> bool:
    """The gradient-flow picture of ``entries`` at ``path``, SVG or PNG by its suffix.

    Without matplotlib (the ``plot`` extra) a warning says how to install it instead, and the
    command goes on: False.
    """
    try:
        picture = render(gradient_flow(entries), picture_format(path))
    except PlotUnavailable as error:
        click.echo(f"warning: no {path}: {error}", err=True)
        return False
    try:
        path.write_bytes(picture)
    except OSError as error:
        raise click.ClickException(f"cannot write {path}: {error.strerror}") from None
    return True


def _after_run(runtime: Runtime | None, out: Path | None) -> None:
    """What the plugins found, the picture, and the files written."""
    records = runtime.memory.records if runtime is not None and runtime.memory else None
    try:
        entries = None if records is None else plugin_entries(records)
    except RecordError as error:  # a third-party plugin's skip_step record, say
        raise click.ClickException(f"cannot summarise the run: {error}") from None
    if entries is not None:
        for line in findings(entries):
            click.echo(line)
    if out is None:
        if entries is not None:
            click.echo("(--out DIR saves the event log, the gradient-flow picture and loss.csv)")
        return
    written = [out / LOSS_FILE]
    if entries is not None:
        drawn = _write_picture(entries, out / PICTURE_FILE)
        written = [out / EVENTS_FILE, *([out / PICTURE_FILE] if drawn else []), *written]
    for path in written:
        click.echo(f"wrote {path}")


def _train(
    task: Task,
    steps: int,
    log_every: int,
    runtime: Runtime | None,
    injections: tuple[NanInjection | None, SpikeInjection | None],
    loss_csv: Path | None,
) -> None:
    """Train inside the runtime (closed at the end), showing progress, writing loss.csv."""
    start = time.perf_counter()
    inject_nan, inject_spike = injections
    with runtime or nullcontext(), _loss_log(loss_csv) as on_step, _quiet():
        records = run(
            task,
            steps,
            log_every,
            runtime=runtime,
            inject_nan=inject_nan,
            inject_spike=inject_spike,
        )
        with _progress(records, steps) as progress:
            for record in progress:
                on_step(record)
        click.echo(final_line(task.accuracy(), steps, time.perf_counter() - start))


@main.command()
@click.option("--steps", type=click.IntRange(min=1), default=200, show_default=True)
@click.option(
    "--log-every",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Measure the accuracy (and print a line, when not on a terminal) every N steps.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Data and weight-init seed.")
@click.option(
    "--model",
    "model_name",
    type=click.Choice(sorted(MODELS)),
    default="mlp",
    show_default=True,
    help="mlp: a 2-64-64-1 MLP on two spirals; cnn: a small CNN on noisy 8x8 digit glyphs.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help=f"Directory for {EVENTS_FILE}, {PICTURE_FILE} and {LOSS_FILE} (created; replaced).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="Config with the plugins to run, e.g. examples/hookgrad.toml (default: as the "
    "runtime finds one: hookgrad.toml, [tool.hookgrad] in pyproject.toml, $HOOKGRAD_CONFIG).",
)
@click.option(
    "--engine",
    type=click.Choice(ENGINE_NAMES),
    default="hookgrad",
    show_default=True,
    help="Train with hookgrad's numpy engine or with PyTorch (pip install 'hookgrad[torch]'): "
    "same data, same initial weights, same plugins.",
)
@click.option(
    "--inject-nan",
    type=InjectionType(NanInjection, "STEP:MODULE"),
    help="Put a NaN into the backward of MODULE (a name from model.named_modules(), e.g. 2) "
    "at step STEP, to see nan_guard name it.",
)
@click.option(
    "--inject-spike",
    type=InjectionType(SpikeInjection, "STEP:FACTOR"),
    help="Multiply the loss of step STEP (and so its gradients) by FACTOR, to see spike_guard "
    "skip or roll back that step.",
)
def demo(
    steps: int,
    log_every: int,
    seed: int,
    model_name: str,
    out: Path | None,
    config_file: Path | None,
    engine: str,
    inject_nan: NanInjection | None,
    inject_spike: SpikeInjection | None,
) -> None:
    """Train a small model on generated data (no download) under the config's plugins.

    Shows a progress bar; prints the per-layer gradient table (grad_stats) and what the
    plugins did (nan_guard's findings, clipping, loss scaling). With --out it writes the event
    log, the picture of gradient flow over training and the loss per step.
    """
    try:
        task = make_task(model_name, seed, engine)
    except ImportError as error:
        raise click.ClickException(f"--engine {engine}: {error}") from None
    for injection, option in ((inject_nan, "--inject-nan"), (inject_spike, "--inject-spike")):
        try:
            if injection is not None:
                injection.check(task, steps)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint=f"'{option}'") from None
    if out is not None:
        _prepare_out(out)
    runtime = _demo_runtime(config_file, out, engine)
    if runtime is not None:
        label = _config_label(runtime.config)
        click.echo(f"config: {label}; plugins: {', '.join(runtime.plugins)}")
    click.echo(task.describe())
    from .plugins.nan_guard import NonFiniteGradientError  # a plugin module: imported when needed
    from .plugins.spike_guard import SpikeError

    try:
        _train(task, steps, log_every, runtime, (inject_nan, inject_spike), out and out / LOSS_FILE)
    except NonFiniteGradientError as error:  # its action "raise": the run stops, as asked
        _after_run(runtime, out)
        raise click.ClickException(f"nan_guard stopped training: {error}") from None
    except SpikeError as error:  # its action "stop", or too many spikes in a row
        _after_run(runtime, out)
        raise click.ClickException(str(error)) from None
    _after_run(runtime, out)


# --------------------------------------------------------------------------------------------
# hookgrad report
# --------------------------------------------------------------------------------------------


def _picture_path(ctx: click.Context, param: click.Parameter, path: Path | None) -> Path | None:
    """``report --out``: a path whose suffix names a picture format, else a usage error."""
    if path is not None:
        try:
            picture_format(path)
        except ValueError as error:
            raise click.BadParameter(str(error)) from None
    return path


@main.command()
@click.argument("events", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=_picture_path,
    help=f"The picture to write, .svg or .png (default: {PICTURE_FILE} next to EVENTS).",
)
@click.option(
    "--tensorboard",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write the log's values as TensorBoard event files into this directory, with "
    "the tags a run's [events] tensorboard writes (pip install 'hookgrad[tensorboard]').",
)
@click.option(
    "--histogram-every",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="With --tensorboard: a gradient histogram every N steps, as [events] histogram_every.",
)
def report(events: Path, out: Path | None, tensorboard: Path | None, histogram_every: int) -> None:
    """Redraw the per-layer table and the gradient-flow picture from a saved EVENTS.jsonl.

    A cut last line (a killed run) is skipped with a warning naming it; any other line that
    is not a JSON object, or a record of the wrong shape, stops with an error naming the line.
    """
    from .plugins.grad_stats import per_layer_table  # a plugin module: imported when needed

    try:
        log = read_entries(events, warn=lambda message: click.echo(f"warning: {message}", err=True))
    except LogFormatError as error:
        raise click.ClickException(str(error)) from None
    except OSError as error:
        raise click.ClickException(f"cannot read {events}: {error.strerror}") from None
    if not log.records:
        raise click.ClickException(f"{events}: no event records")
    click.echo(per_layer_table(entry.record() for entry in log.entries))
    for line in findings(log.entries):
        click.echo(line)
    picture = out if out is not None else events.with_name(PICTURE_FILE)
    if _write_picture(log.entries, picture):
        click.echo(f"wrote {picture}")
    if tensorboard is not None:
        _write_tensorboard(events, tensorboard, histogram_every)
        click.echo(f"wrote {tensorboard}")


def _write_tensorboard(events: Path, logdir: Path, histogram_every: int) -> None:
    """Every record of the log at ``events`` through a TensorBoard sink into ``logdir``."""
    if importlib.util.find_spec("tensorboardX") is None:
        raise click.ClickException(
            "--tensorboard needs tensorboardX: pip install 'hookgrad[tensorboard]'"
        )
    try:
        sink = TensorBoardSink(logdir, histogram_every)
    except OSError as error:
        raise click.ClickException(f"cannot write {logdir}: {error.strerror}") from None
    with contextlib.closing(sink):
        for _, record in read_events(events, warn=lambda message: None):  # warned above
            sink.write(record)
