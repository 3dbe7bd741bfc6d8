"""``import torch`` answered by hookgrad, for a block: running torch programs unchanged.

``import hookgrad as torch`` covers a program's own module, but not the ``import torch.nn as
nn`` or ``from torch.utils.data import DataLoader`` lines inside it, nor the modules it
imports. Within :func:`as_torch`, an import finder placed first on ``sys.meta_path`` answers
every ``torch`` and ``torch.X`` import with ``hookgrad`` and ``hookgrad.X``; on exit the finder
goes and the modules ``torch`` names had before are back, so a real torch imported earlier is
untouched outside the block.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

__all__ = ["as_torch"]

_TORCH = "torch"


class _HookgradAsTorch(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``torch.X`` as the already imported (or now imported) ``hookgrad.X``."""

    def __init__(self) -> None:
        self._own_specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _TORCH and not fullname.startswith(_TORCH + "."):
            return None
        own = "hookgrad" + fullname[len(_TORCH) :]
        try:
            module = importlib.import_module(own)
        except ModuleNotFoundError as error:
            if error.name != own:
                raise
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: hookgrad has no {own!r} (see docs/api.md)",
                name=fullname,
            ) from None
        return importlib.util.spec_from_loader(fullname, self, origin=module.__name__)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module("hookgrad" + spec.name[len(_TORCH) :])
        # The import system stamps this ``torch.X`` spec on the module it is given; keep the
        # module's own, so its relative imports still resolve as ``hookgrad.X``'s (no
        # "__package__ != __spec__.parent" ImportWarning).
        self._own_specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the hookgrad module is imported already; its own spec goes back."""
        module.__spec__ = self._own_specs.pop(module.__name__, module.__spec__)


def _torch_entries() -> dict[str, ModuleType]:
    return {
        name: module
        for name, module in sys.modules.items()
        if name == _TORCH or name.startswith(_TORCH + ".")
    }


@contextmanager
def as_torch() -> Iterator[ModuleType]:
    """Within the block ``import torch`` (and every ``torch.X``) gives hookgrad's modules.

    Yields ``hookgrad``. Not thread-safe: imports in other threads see the alias too while the
    block runs. A ``torch.X`` that hookgrad lacks raises ModuleNotFoundError naming it.
    """
    import hookgrad

    saved = _torch_entries()
    for name in saved:
        del sys.modules[name]
    finder = _HookgradAsTorch()
    sys.meta_path.insert(0, finder)
    try:
        yield hookgrad
    finally:
        sys.meta_path.remove(finder)
        for name in _torch_entries():
            del sys.modules[name]
        sys.modules.update(saved)
