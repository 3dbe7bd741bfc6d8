"""Real PyTorch programs, run unchanged on hookgrad (their ``import torch`` lines included,
through :func:`hookgrad.testing.as_torch`) and, where torch is installed, on torch: the same
seed gives the same numbers, loss by loss.

Each program is a module of this folder whose docstring names its source and how it was
shrunk to run in seconds, and whose ``main(torch)`` is the program's code with the torch
module passed in. Its numbers must match torch's to float32 rounding (rtol 2e-4 and a small
absolute floor, for sums of many float32 terms in another order) and its strings (sampled
text) exactly.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import hookgrad
from hookgrad.testing import as_torch

HERE = Path(__file__).resolve().parent
# The programs converted from tutorial scripts import their shared print recorder
# (_printed.py) as a script imports a file beside it.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
PROGRAMS = sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith(("test_", "_")))


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"programs_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _flat(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for key in sorted(value) for x in _flat(value[key])]
    if isinstance(value, list | tuple):
        return [x for item in value for x in _flat(item)]
    return [value]


def _close(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, str) or isinstance(theirs, str):
        return ours == theirs
    if math.isnan(ours) or math.isnan(theirs):
        return math.isnan(ours) and math.isnan(theirs)
    return math.isclose(ours, theirs, rel_tol=2e-4, abs_tol=1e-5)


def test_the_collection_is_large_enough() -> None:
    """At least 20 programs, each naming its source in its docstring."""
    assert len(PROGRAMS) >= 20, PROGRAMS
    for name in PROGRAMS:
        doc = _load(name).__doc__ or ""
        assert "," in doc.split("\n")[0], f"{name}: the docstring names no source"


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_gives_torchs_numbers(name: str) -> None:
    """The program trains on hookgrad; with torch installed, every number equals torch's."""
    program = _load(name)
    with as_torch() as torch_like:
        ours = _flat(program.main(torch_like))
    assert ours and all(isinstance(x, str) or math.isfinite(x) for x in ours), ours[:5]
    torch = pytest.importorskip("torch")
    theirs = _flat(program.main(torch))
    assert len(ours) == len(theirs)
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(ours, theirs)) if not _close(a, b)]
    assert not bad, f"{len(bad)} of {len(ours)} numbers differ, first: {bad[:3]}"
    assert hookgrad.__name__ == "hookgrad"
