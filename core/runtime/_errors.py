"""``ConfigError`` and the translation of pydantic errors into it (file, table, key, valid keys)."""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, TypeVar, get_args

from pydantic import BaseModel, ValidationError

__all__ = ["ConfigError", "Origin", "dotted", "split_loc", "validate_model"]

M = TypeVar("M", bound=BaseModel)

Loc: TypeAlias = tuple[str | int, ...]
"""A position in a config: table names and keys, list indices as ints."""

# pydantic error types meaning "a table was expected here".
_TABLE_TYPES = frozenset({"dict_type", "model_type", "model_attributes_type"})


class ConfigError(ValueError):
    """A config value hookgrad cannot use, or a config file it cannot read.

    ``path`` is the file the bad value came from (None for the environment, a dict source or
    code overrides); ``table`` the config table holding ``key``, dotted from the hookgrad root
    (``""`` for the top level, ``"events"``, ``"plugins.grad_clip"``), whatever file it sits in;
    ``key`` the offending key; ``valid_keys`` the keys that table accepts, when the key is unknown.
    A file that cannot be read or parsed gives ``table`` and ``key`` None.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        table: str | None = None,
        key: str | None = None,
        valid_keys: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.path = path
        self.table = table
        self.key = key
        self.valid_keys = tuple(valid_keys)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with the attributes (the keyword-only ``__init__`` defeats the default)."""
        state: dict[str, Any] = {"path": self.path, "table": self.table, "key": self.key}
        state["valid_keys"] = self.valid_keys
        return (type(self), (str(self),), state)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a config value came from: a layer, and how errors and ``explain()`` name it."""

    layer: str
    """``"default"``, ``"file"``, ``"dict"``, ``"env"`` or ``"code"``."""
    where: str
    """The prefix of error messages: a file as shown to the user, an env var, ``"overrides"``."""
    path: Path | None = None
    prefix: tuple[str, ...] = ()
    """The table the hookgrad config sits in within its file: ``("tool", "hookgrad")`` in
    ``pyproject.toml``."""

    @property
    def label(self) -> str:
        """The name ``LoadedConfig.explain()`` prints: ``"file hookgrad.toml"``, ``"code"``."""
        if self.layer in {"default", "code", "dict"}:
            return self.layer
        if self.prefix:
            return f"{self.layer} {self.where} [{'.'.join(self.prefix)}]"
        return f"{self.layer} {self.where}"


def validate_model(
    model: type[M], data: Mapping[str, Any], origin_of: Callable[[Loc], Origin], base: Loc = ()
) -> M:
    """``model.model_validate(data)``, turning a ValidationError into a ConfigError.

    ``base`` is where ``data`` sits in the whole config (``("plugins", "grad_clip")``), and
    ``origin_of`` says which layer set a given position, so the error names that layer's file.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _config_error(exc, model, data, origin_of, base) from None


def _config_error(
    exc: ValidationError,
    model: type[BaseModel],
    data: Mapping[str, Any],
    origin_of: Callable[[Loc], Origin],
    base: Loc,
) -> ConfigError:
    """The ConfigError for the first problem pydantic found, counting the others."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(first["loc"]) if first["type"] == "missing" else _present(data, first["loc"])
    table_loc, key = split_loc(loc)
    origin = origin_of((*base, *loc))
    table = dotted((*base, *table_loc))
    where_in = _where_in((*origin.prefix, *base, *table_loc))
    valid: tuple[str, ...] = ()
    if first["type"] == "extra_forbidden":
        valid = _valid_keys(model, table_loc)
        message = f"unknown key {key!r} {where_in}; {_suggest(key, valid)}"
    elif first["type"] == "missing":
        message = f"missing required key {key!r} {where_in}"
    elif first["type"] in _TABLE_TYPES:
        full = dotted((*origin.prefix, *base, *loc))
        message = f"[{full}] must be a table, got {_shown(first['input'])}"
    elif first["type"] == "value_error":  # a validator's own message, which shows the value
        reason = first["msg"].removeprefix("Value error, ")
        message = f"invalid value for {key!r} {where_in}: {reason}"
    else:
        reason = first["msg"]
        message = f"invalid value for {key!r} {where_in}: {reason} (got {_shown(first['input'])})"
    others = len({_present(data, e["loc"]) for e in errors}) - 1
    if others > 0:
        message += f" (and {others} more problem{'s' if others > 1 else ''})"
    return ConfigError(
        f"{origin.where}: {message}", path=origin.path, table=table, key=key, valid_keys=valid
    )


def _present(data: Any, loc: Loc) -> Loc:
    """The longest start of ``loc`` that exists in ``data`` (drops pydantic's union tags)."""
    found: list[str | int] = []
    node = data
    for part in loc:
        if not _has(node, part):
            break
        node = node[part]
        found.append(part)
    return tuple(found)


def _has(node: Any, part: str | int) -> bool:
    if isinstance(node, Mapping):
        return part in node
    return isinstance(node, list | tuple) and isinstance(part, int) and 0 <= part < len(node)


def split_loc(loc: Loc) -> tuple[Loc, str]:
    """``loc`` as (table, key): ``("disable", 1)`` -> ``((), "disable[1]")``."""
    last = max((i for i, part in enumerate(loc) if isinstance(part, str)), default=None)
    if last is None:
        return (), dotted(loc)
    return loc[:last], dotted(loc[last:])


def dotted(loc: Loc) -> str:
    """``("plugins", "a", "steps", 0)`` -> ``"plugins.a.steps[0]"``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f"{'.' if text else ''}{part}"
    return text


def _where_in(table: Loc) -> str:
    return f"in [{dotted(table)}]" if table else "at the top level"


def _suggest(key: str, valid: Sequence[str]) -> str:
    """``"did you mean 'jsonl'? valid keys: jsonl, memory"`` (no guess if nothing is close)."""
    close = difflib.get_close_matches(key, valid, n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return f"{guess}valid keys: {', '.join(valid) if valid else '(none)'}"


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {reprlib.repr(value)}"


def _valid_keys(model: type[BaseModel], table: Loc) -> tuple[str, ...]:
    """The keys the table at ``table`` accepts, following nested models from ``model``."""
    current: type[BaseModel] | None = model
    for part in table:
        if current is None or not isinstance(part, str) or part not in current.model_fields:
            return ()
        current = _model_in(current.model_fields[part].annotation)
    if current is None:
        return ()
    return tuple(field.alias or name for name, field in current.model_fields.items())


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (``EventsConfig``, ``Sub | None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
