"""Checks of the replacements plugins return, so a bad one is the plugin's failure.

A replacement the engine cannot use would otherwise fail later, inside the engine, where no
``on_error`` applies and nothing names the plugin. The bridge and the loop points check each
non-None return here, inside the plugin's ``try``: a ValueError or TypeError raised here is
handled like an exception the plugin raised (:mod:`._failures`). The rules are those of the
specs (:mod:`hookgrad.hookspecs.specs`); forward pre-hook and forward hook returns are not
checked, as in torch: any value can be a module's arguments or output.
"""

from __future__ import annotations

from typing import Any

from ..engines import engine_of

__all__ = ["as_args", "checked_gradients", "checked_seed"]


def as_args(value: Any, current: tuple[Any, ...]) -> tuple[Any, ...]:
    """A forward pre-hook's return as the new positional args (F-2)."""
    return value if isinstance(value, tuple) else (value,)


def checked_gradients(value: Any, current: tuple[Any, ...]) -> tuple[Any, ...]:
    """``grad_output`` / ``grad_input`` replaced: a tuple (or list) as long as ``current``,
    each entry None or a tensor shaped like the one it replaces, of its engine (None where
    that is None)."""
    if not isinstance(value, tuple | list):
        raise TypeError(
            f"a gradient replacement must be a tuple of {len(current)} Tensor or None, "
            f"got {type(value).__name__}"
        )
    if len(value) != len(current):
        raise ValueError(
            f"a gradient replacement must have {len(current)} entries, got {len(value)}"
        )
    for i, (new, old) in enumerate(zip(value, current)):
        if new is None:
            continue
        engine = engine_of(new)
        if engine is None:
            raise TypeError(f"entry {i} must be a Tensor or None, got {type(new).__name__}")
        if old is None:
            raise ValueError(f"entry {i} must be None: there is no gradient to replace there")
        if not engine.owns(old):
            raise TypeError(f"entry {i} must be a Tensor of the {engine_of(old)!r} engine")
        if new.shape != old.shape:
            raise ValueError(f"entry {i} has shape {list(new.shape)}, expected {list(old.shape)}")
    return tuple(value)


def checked_seed(value: Any, loss: Any) -> Any:
    """The seed gradient replaced: a tensor of ``loss``'s engine shaped like ``loss``."""
    engine = engine_of(value)
    if engine is None or not engine.owns(loss):
        raise TypeError(f"a seed gradient must be a Tensor, got {type(value).__name__}")
    if value.shape != loss.shape:
        raise ValueError(
            f"a seed gradient must have the loss's shape {list(loss.shape)}, "
            f"got {list(value.shape)}"
        )
    return value
