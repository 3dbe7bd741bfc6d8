"""Runtime configuration: a file (or dict), the environment and code overrides, merged and validated.

Layers, lowest first: the model's defaults < the source (``hookgrad.toml``, ``[tool.hookgrad]`` in
``pyproject.toml``, the file named by ``HOOKGRAD_CONFIG``, or a dict) < the environment
(``HOOKGRAD_PLUGINS``, ``HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD``, ``HOOKGRAD_ENGINE``) < code overrides. Tables merge key by
key at every depth; any other value (lists included) replaces the lower layer's value whole.
``LoadedConfig`` remembers which layer set each key, so errors name the right file and
``explain()`` can show where every effective value came from.
"""

from __future__ import annotations

import importlib.util
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..engines import process_rank
from ._errors import ConfigError, Loc, Origin, dotted, split_loc, validate_model
from ._logfile import Durability, refusal

__all__ = [
    "EngineChoice",
    "EventsConfig",
    "LoadedConfig",
    "LogLevel",
    "RuntimeConfig",
    "load_config",
    "validate_plugin_table",
]

M = TypeVar("M", bound=BaseModel)

LogLevel: TypeAlias = Literal["debug", "info", "warning", "error"]
EngineChoice: TypeAlias = Literal["auto", "hookgrad", "torch"]
"""The ``engine`` key: which engines' models the runtime drives (see ``RuntimeConfig.engine``)."""

CONFIG_FILE: Final = "hookgrad.toml"
PYPROJECT: Final = "pyproject.toml"
PYPROJECT_TABLE: Final = ("tool", "hookgrad")
ENV_CONFIG: Final = "HOOKGRAD_CONFIG"
ENV_PLUGINS: Final = "HOOKGRAD_PLUGINS"
ENV_DISABLE_AUTOLOAD: Final = "HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD"
ENV_ENGINE: Final = "HOOKGRAD_ENGINE"

MAX_DEPTH: Final = 32
"""How deep tables and arrays may nest in a config; a real config needs five levels at most."""

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"", "0", "false", "no", "off"})

_DEFAULT: Final = Origin("default", "defaults")
_CODE: Final = Origin("code", "overrides")
_DICT: Final = Origin("dict", "config dict")

Table: TypeAlias = dict[str, Any]
Provenance: TypeAlias = dict[tuple[str, ...], Origin]


# --------------------------------------------------------------------------------------------
# The models
# --------------------------------------------------------------------------------------------


class EventsConfig(BaseModel):
    """``[events]``: where event records go."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True
    )

    jsonl: str | None = Field(default=None, min_length=1)
    """Path of a JSON-lines event log (appended to); None writes no file."""

    durability: Durability = "step"
    """When the log reaches the OS: at the end of every step ("step"), the same plus fsync
    ("fsync"), or in 64 KiB pieces ("buffered")."""

    memory: bool = False
    """Keep event records in memory (for tests and notebooks)."""

    tensorboard: str | None = Field(default=None, min_length=1)
    """Directory of TensorBoard event files written from the plugins' records (the extra
    ``hookgrad[tensorboard]``); relative paths as ``jsonl``'s. None writes none."""

    histogram_every: int = Field(default=100, ge=1)
    """TensorBoard: a gradient histogram every N steps (from grad_stats' histograms)."""

    @field_validator("jsonl", "tensorboard", mode="before")
    @classmethod
    def _path_to_str(cls, value: Any) -> Any:
        return os.fspath(value) if isinstance(value, os.PathLike) else value


class RuntimeConfig(BaseModel):
    """The whole hookgrad runtime configuration (the top level of ``hookgrad.toml``).

    Values are checked strictly, nothing is coerced (``autoload = "yes"`` is an error), and an
    unknown key is an error that names it.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True
    )

    autoload: bool = True
    """Load third-party plugins from the ``hookgrad.plugins`` entry-point group."""

    strict: bool = False
    """A plugin that fails to import is an error, not a warning."""

    disable: list[str] = []
    """Plugin names that are never activated."""

    plugins: dict[str, dict[str, Any]] = {}
    """``[plugins.NAME]`` tables, validated later against each plugin's own Config."""

    events: EventsConfig = EventsConfig()
    """``[events]``: event sinks."""

    log_level: LogLevel = "warning"
    """The least severe level the runtime's logger emits."""

    engine: EngineChoice = "auto"
    """Whose models the runtime drives: "auto", every engine already imported when the runtime
    starts (hookgrad's, and torch if imported; torch is never imported for it); "torch", torch
    (imported then); "hookgrad", hookgrad's numpy engine only."""


# --------------------------------------------------------------------------------------------
# The loaded result
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedConfig:
    """A validated ``RuntimeConfig`` with the file it came from and where each value was set."""

    config: RuntimeConfig
    path: Path | None
    """The config file read, if any (absolute)."""
    layers: tuple[str, ...]
    """The layers applied above the defaults, lowest first (``"file hookgrad.toml"``, ...)."""
    _provenance: Provenance = field(repr=False, compare=False)

    def explain(self) -> list[tuple[str, Any, str]]:
        """Every effective value as (dotted key, value, layer that set it), in model order.

        The layer is ``"default"``, ``"file hookgrad.toml"`` (``"file pyproject.toml
        [tool.hookgrad]"``), ``"dict"``, ``"env HOOKGRAD_PLUGINS"``,
        ``"env HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD"``, ``"env HOOKGRAD_ENGINE"`` or ``"code"``.
        """
        return [
            (".".join(key), value, self._provenance.get(key, _DEFAULT).label)
            for key, value in _leaves(self.config.model_dump(), ())
        ]

    def plugin_config(self, name: str, config_model: type[M]) -> M:
        """Validate ``[plugins.NAME]`` (an empty table if absent) against ``config_model``.

        A bad key raises ConfigError naming the layer that set it: the file, the environment
        variable or ``overrides``.
        """
        table = self.config.plugins.get(name, {})
        return validate_model(config_model, table, self._origin, ("plugins", name))

    def event_log_path(self, base: Path) -> Path | None:
        """Where ``events.jsonl`` writes (``~`` expanded, relative to ``base``), if anywhere.

        In a distributed run each rank writes its own log: ``{rank}`` in the path is replaced
        by the rank, and without it, when the world size is above 1, ``.rankN`` goes before the
        suffix (``events.jsonl`` -> ``events.rank1.jsonl``; :func:`hookgrad.engines.process_rank`).

        Raises ConfigError naming the key and the layer that set it when hookgrad would not
        write there (:func:`~hookgrad.runtime._logfile.refusal`: a folder, a file that is not a
        hookgrad log, a place it may not write to). Nothing is created or opened for writing.
        """
        value = self.config.events.jsonl
        if value is None:
            return None
        path = base / Path(_per_rank(value)).expanduser()
        try:
            reason = refusal(path)
        except OSError as error:
            reason = f"it cannot be read ({error.strerror or error})"
        if reason is not None:
            raise self.event_log_error(path, reason)
        return path

    def tensorboard_dir(self, base: Path) -> Path | None:
        """Where the TensorBoard event files go (``~`` expanded, relative to ``base``), if
        anywhere. In a distributed run ``{rank}`` in the path is replaced by the rank, and
        without it, when the world size is above 1, each rank writes into ``rankN`` below it.

        Raises ConfigError naming the key when the path is a file, or when the writer
        (tensorboardX) is not installed. Nothing is created, and tensorboardX is not imported.
        """
        value = self.config.events.tensorboard
        if value is None:
            return None
        rank, world = process_rank()
        if "{rank}" in value:
            path = base / Path(value.replace("{rank}", str(rank))).expanduser()
        else:
            path = base / Path(value).expanduser()
            path = path / f"rank{rank}" if world > 1 else path
        if path.exists() and not path.is_dir():
            raise self.events_error("tensorboard", f"{str(path)!r} is a file, not a directory")
        if importlib.util.find_spec("tensorboardX") is None:
            raise self.events_error(
                "tensorboard",
                "writing TensorBoard files needs tensorboardX: pip install 'hookgrad[tensorboard]'",
            )
        return path

    def events_error(self, key: str, reason: str) -> ConfigError:
        """The ConfigError for ``[events] key``, naming where it was set and ``reason``."""
        origin = self._origin(("events", key))
        where = ".".join((*origin.prefix, "events", key))
        value = getattr(self.config.events, key)
        return ConfigError(
            f"{origin.where}: {where} = {value!r}: {reason}",
            path=origin.path,
            table="events",
            key=key,
        )

    def event_log_error(self, path: Path, reason: str) -> ConfigError:
        """The ConfigError for an ``events.jsonl`` path hookgrad cannot write its log to."""
        origin = self._origin(("events", "jsonl"))
        key = ".".join((*origin.prefix, "events", "jsonl"))
        return ConfigError(
            f"{origin.where}: {key} = {self.config.events.jsonl!r} ({str(path)!r}): {reason}; "
            "hookgrad will not write its event log there",
            path=origin.path,
            table="events",
            key="jsonl",
        )

    def _origin(self, loc: Loc) -> Origin:
        return _origin_at(self._provenance, loc)


def _per_rank(path: str) -> str:
    """``path`` for this process's rank (see :meth:`LoadedConfig.event_log_path`)."""
    rank, world = process_rank()
    if "{rank}" in path:
        return path.replace("{rank}", str(rank))
    if world == 1:
        return path
    stem, dot, suffix = path.rpartition(".")
    if not dot or "/" in suffix or not stem:
        return f"{path}.rank{rank}"
    return f"{stem}.rank{rank}.{suffix}"


def _origin_at(provenance: Provenance, loc: Loc) -> Origin:
    """The layer that set ``loc``, or the table enclosing it (the defaults if none did)."""
    parts = tuple(p for p in loc if isinstance(p, str))
    for end in range(len(parts), 0, -1):
        origin = provenance.get(parts[:end])
        if origin is not None:
            return origin
    return _DEFAULT


def validate_plugin_table(
    name: str,
    table: Any,
    config_model: type[M],
    *,
    path: str | os.PathLike[str] | None = None,
) -> M:
    """Validate one ``[plugins.NAME]`` table against a plugin's Config model.

    ``path`` is the file the table came from; errors name it and the table
    (``[tool.hookgrad.plugins.NAME]`` in a ``pyproject.toml``). ``ConfigError.table`` is
    ``"plugins.NAME"``. Prefer ``LoadedConfig.plugin_config``, which knows each key's layer.
    """
    origin = _file_origin(Path(path), Path.cwd()) if path is not None else Origin("dict", "config")
    if not isinstance(table, Mapping):
        header = ".".join((*origin.prefix, "plugins", name))
        raise ConfigError(
            f"{origin.where}: [{header}] must be a table, got {type(table).__name__} {table!r}",
            path=origin.path,
            table="plugins",
            key=name,
        )
    return validate_model(config_model, table, lambda _loc: origin, ("plugins", name))


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> LoadedConfig:
    """Read, merge and validate the runtime config.

    ``source``: a config file (``pyproject.toml`` contributes its ``[tool.hookgrad]`` table),
    a dict, or None to look for ``hookgrad.toml`` in ``cwd``, then ``[tool.hookgrad]`` in
    ``cwd/pyproject.toml``, then the file named by ``HOOKGRAD_CONFIG``. ``environ`` defaults
    to ``os.environ``, ``cwd`` to the current directory. Raises ConfigError on a file that
    cannot be read or parsed and on any invalid value.
    """
    base = Path.cwd() if cwd is None else Path(cwd)
    env = os.environ if environ is None else environ
    layers: list[tuple[Mapping[str, Any], Origin]] = []
    path, data, origin = _read_source(source, base, env)
    if data is not None:
        layers.append((data, origin))
    layers.extend(_environment_layers(env))
    if overrides is not None:
        if not isinstance(overrides, Mapping):
            raise TypeError(f"overrides must be a dict, got {type(overrides).__name__}")
        layers.append((overrides, _CODE))
    merged: Table = {}
    provenance: Provenance = {}
    for layer, layer_origin in layers:
        _check_depth(layer, layer_origin)
        _merge(merged, layer, layer_origin, provenance, ())
    config = validate_model(RuntimeConfig, merged, lambda loc: _origin_at(provenance, loc))
    return LoadedConfig(config, path, tuple(o.label for _, o in layers), provenance)


def _read_source(
    source: str | os.PathLike[str] | Mapping[str, Any] | None, cwd: Path, environ: Mapping[str, str]
) -> tuple[Path | None, Mapping[str, Any] | None, Origin]:
    """(file path, table, origin) of the source layer; table None when no config is found."""
    if isinstance(source, Mapping):
        return None, source, _DICT
    if isinstance(source, str | os.PathLike):
        path = cwd / Path(source)
        return path, _read_file(path, cwd), _file_origin(path, cwd)
    if source is not None:
        raise TypeError(f"source must be a path, a dict or None, got {type(source).__name__}")
    if (cwd / CONFIG_FILE).is_file():
        path = cwd / CONFIG_FILE
        return path, _read_file(path, cwd), _file_origin(path, cwd)
    if (cwd / PYPROJECT).is_file():
        path = cwd / PYPROJECT
        table = _read_file(path, cwd, required=False)
        if table is not None:
            return path, table, _file_origin(path, cwd)
    named = environ.get(ENV_CONFIG)
    if named:
        path = cwd / Path(named)
        return path, _read_file(path, cwd, via=ENV_CONFIG), _file_origin(path, cwd)
    return None, None, _DEFAULT


def _read_file(path: Path, cwd: Path, *, required: bool = True, via: str | None = None) -> Any:
    """The hookgrad table of a TOML file (``[tool.hookgrad]`` of a ``pyproject.toml``).

    A ``pyproject.toml`` without that table gives ``{}``, or None when not ``required``.
    """
    origin = _file_origin(path, cwd)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        named = f" (named by {via})" if via else ""
        raise ConfigError(
            f"{origin.where}: cannot read config file{named}: {exc.strerror}", path=path
        ) from None
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _not_utf8(raw, exc, origin) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin.where}: invalid TOML: {exc}", path=path) from None
    except RecursionError:  # tomllib recurses once per level of nesting
        raise ConfigError(
            f"{origin.where}: nested too deeply (at most {MAX_DEPTH} levels of tables and arrays)",
            path=path,
        ) from None
    if not origin.prefix:
        return document
    tool = document.get("tool")
    table = tool.get("hookgrad") if isinstance(tool, dict) else None
    if table is None:
        return {} if required else None
    if not isinstance(table, dict):
        raise ConfigError(
            f"{origin.where}: [tool.hookgrad] must be a table, got {type(table).__name__}",
            path=path,
        )
    return table


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]")
_KEY = re.compile(r"^\s*([^=\s][^=]*?)\s*=")


def _not_utf8(raw: bytes, exc: UnicodeDecodeError, origin: Origin) -> ConfigError:
    """The error for a file that is not UTF-8: the byte, its line and column, and the key and
    table of that line when it has one (found by reading the valid text before the byte)."""
    before = raw[: exc.start].decode("utf-8").splitlines(keepends=True) or [""]
    if before[-1].endswith(("\n", "\r")):
        before.append("")
    line, column = len(before), len(before[-1]) + 1
    match = _KEY.match(before[-1])
    headers = (_HEADER.match(text) for text in reversed(before[:-1]))
    header = next((h.group(1) for h in headers if h is not None), "")
    table = header.removeprefix(".".join(origin.prefix) + ".") if origin.prefix else header
    message = (
        f"{origin.where}: not UTF-8 text (TOML files are UTF-8): byte 0x{raw[exc.start]:02x} "
        f"at line {line}, column {column}"
    )
    if match is None:
        return ConfigError(message, path=origin.path)
    key = match.group(1)
    where = f"in [{header}]" if header else "at the top level"
    return ConfigError(
        f"{message}, in the value of {key!r} {where}", path=origin.path, table=table, key=key
    )


def _check_depth(layer: Mapping[str, Any], origin: Origin) -> None:
    """Refuse a layer nested deeper than MAX_DEPTH, naming where (merging and validation
    recurse once per level, so a deeper one would end in a RecursionError)."""
    pending: list[tuple[Any, Loc]] = [(layer, ())]
    while pending:
        value, loc = pending.pop()
        if len(loc) > MAX_DEPTH:
            table, key = split_loc(loc)
            raise ConfigError(
                f"{origin.where}: nested too deeply: {dotted((*origin.prefix, *loc))} is "
                f"{len(loc)} levels deep (at most {MAX_DEPTH} levels of tables and arrays)",
                path=origin.path,
                table=dotted(table),
                key=key,
            )
        if isinstance(value, Mapping):
            pending.extend((item, (*loc, str(k))) for k, item in value.items())
        elif isinstance(value, list | tuple):
            pending.extend((item, (*loc, i)) for i, item in enumerate(value))


def _file_origin(path: Path, cwd: Path) -> Origin:
    """The origin of a file layer, shown relative to ``cwd`` when inside it."""
    try:
        shown = str(path.relative_to(cwd))
    except ValueError:
        shown = str(path)
    prefix = PYPROJECT_TABLE if path.name == PYPROJECT else ()
    return Origin("file", shown, path, prefix)


def _environment_layers(environ: Mapping[str, str]) -> list[tuple[Table, Origin]]:
    """``HOOKGRAD_PLUGINS=a,b`` (enables a and b), ``HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD`` and
    ``HOOKGRAD_ENGINE`` (the ``engine`` key)."""
    layers: list[tuple[Table, Origin]] = []
    names = [n.strip() for n in environ.get(ENV_PLUGINS, "").split(",") if n.strip()]
    if names:
        plugins = {name: {"enabled": True} for name in names}
        layers.append(({"plugins": plugins}, Origin("env", ENV_PLUGINS)))
    if _env_flag(environ, ENV_DISABLE_AUTOLOAD):
        layers.append(({"autoload": False}, Origin("env", ENV_DISABLE_AUTOLOAD)))
    engine = environ.get(ENV_ENGINE, "").strip()
    if engine:
        layers.append(({"engine": engine}, Origin("env", ENV_ENGINE)))
    return layers


def _env_flag(environ: Mapping[str, str], name: str) -> bool:
    """A boolean environment variable: 1/true/yes/on or 0/false/no/off (or unset)."""
    value = environ.get(name, "")
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise ConfigError(
        f"{name}: expected 1, true, yes or on (or 0, false, no, off), got {value!r}", key=name
    )


def _merge(
    into: Table, layer: Mapping[str, Any], origin: Origin, prov: Provenance, at: tuple[str, ...]
) -> None:
    """Deep-merge ``layer`` into ``into``: tables key by key, other values replace."""
    for key, value in layer.items():
        loc = (*at, str(key))
        current = into.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            _merge(current, value, origin, prov, loc)
            continue
        for stale in [k for k in prov if k[: len(loc)] == loc]:
            del prov[stale]
        into[key] = _copy(value)
        prov.update((sub, origin) for sub in _nodes(value, loc))


def _copy(value: Any) -> Any:
    """A copy of the tables in ``value``, so merging never changes the caller's dicts."""
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    return value


def _nodes(value: Any, loc: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """``loc`` and the position of everything inside it (tables are walked, lists are leaves)."""
    yield loc
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _nodes(item, (*loc, str(key)))


def _leaves(value: Any, loc: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(position, value) of each non-table value and each empty table, depth first."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, (*loc, str(key)))
    else:
        yield loc, value
