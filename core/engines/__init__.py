"""The engines the runtime can drive, behind one interface (:class:`Engine`).

An adapter is built only for an engine already imported (the rule einops follows): hookgrad
never imports torch on its own. :func:`engine_named` builds the one a config asks for by name,
importing torch then, since asking for it is explicit.
"""

from __future__ import annotations

import os
import sys
from typing import Final

from ._grad_norms import grad_norms
from ._protocol import (
    BackwardBegin,
    BackwardEnd,
    Engine,
    HandleGroup,
    ModuleCall,
    ModuleHooks,
    ModuleHookSource,
    Removable,
    StepGate,
    StepPost,
)

__all__ = [
    "ENGINE_NAMES",
    "BackwardBegin",
    "BackwardEnd",
    "Engine",
    "HandleGroup",
    "ModuleCall",
    "ModuleHookSource",
    "ModuleHooks",
    "Removable",
    "StepGate",
    "StepPost",
    "available_engines",
    "engine_of",
    "grad_norms",
    "process_rank",
    "engine_named",
]

ENGINE_NAMES: Final = ("hookgrad", "torch")
"""Every engine name, the values of the ``engine`` config key besides ``"auto"``."""

_BUILT: dict[str, Engine] = {}


def engine_named(name: str) -> Engine:
    """The adapter of engine ``name`` (one of ENGINE_NAMES), built once.

    Raises:
        ValueError: an unknown name.
        ImportError: ``"torch"`` when torch is not installed (``pip install 'hookgrad[torch]'``).
    """
    engine = _BUILT.get(name)
    if engine is None:
        engine = _BUILT[name] = _build(name)
    return engine


_OWNERS: dict[type, Engine | None] = {}
"""The engine of each type met (None: no engine's). Ownership is by type (an isinstance
check), and a torch type exists only once torch is imported, so the answer never changes."""


def engine_of(value: object) -> Engine | None:
    """The engine whose tensor ``value`` is, or None (torch's only if torch is imported).

    One dict lookup after the first value of a type: plugins ask at every step.
    """
    kind = type(value)
    try:
        return _OWNERS[kind]
    except KeyError:
        engine = _OWNERS[kind] = _find_engine(value)
        return engine


def _find_engine(value: object) -> Engine | None:
    for name in ENGINE_NAMES:
        if name == "torch" and "torch" not in sys.modules:
            continue
        engine = engine_named(name)
        if engine.owns(value):
            return engine
    return None


def process_rank() -> tuple[int, int]:
    """(rank, world size) of this process in a distributed run; (0, 1) outside one.

    ``torch.distributed``'s answer once a process group is initialised (only if torch is
    already imported), else torchrun's ``RANK`` and ``WORLD_SIZE`` variables, which it sets
    before the training script runs, so a runtime built before ``init_process_group`` knows
    its rank too.
    """
    torch = sys.modules.get("torch")
    distributed = getattr(torch, "distributed", None) if torch is not None else None
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        return int(distributed.get_rank()), int(distributed.get_world_size())
    rank, world = os.environ.get("RANK", ""), os.environ.get("WORLD_SIZE", "")
    if rank.isdigit() and world.isdigit() and int(rank) < int(world):
        return int(rank), int(world)
    return 0, 1


def available_engines() -> list[Engine]:
    """The numpy engine, and torch's adapter if torch is already imported (``engine = "auto"``)."""
    return [
        engine_named(name) for name in ENGINE_NAMES if name != "torch" or "torch" in sys.modules
    ]


def _build(name: str) -> Engine:
    if name == "hookgrad":
        from .numpy import NumpyEngine

        return NumpyEngine()
    if name == "torch":
        try:
            from .torch import TorchEngine
        except ImportError as error:
            raise ImportError(
                f"the torch engine needs torch: pip install 'hookgrad[torch]' ({error})"
            ) from error
        return TorchEngine()
    raise ValueError(f"unknown engine {name!r}; engines: {', '.join(ENGINE_NAMES)}")
