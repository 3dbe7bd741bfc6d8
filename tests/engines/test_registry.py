"""The engine registry: adapters by name, torch's only when torch is imported or asked for."""

from __future__ import annotations

import subprocess
import sys

import pytest

import hookgrad
from hookgrad.engines import ENGINE_NAMES, Engine, available_engines, engine_named


def test_import_hookgrad_and_its_engines_never_imports_torch() -> None:
    """``import hookgrad``, the engines package and available_engines() leave torch unimported."""
    code = (
        "import sys, hookgrad, hookgrad.engines, hookgrad.runtime;"
        "names = [e.name for e in hookgrad.engines.available_engines()];"
        "print(names, 'torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "['hookgrad'] False", result.stderr


def test_the_numpy_engine_owns_hookgrad_tensors_only() -> None:
    """engine_named("hookgrad") is built once and recognises hookgrad tensors."""
    engine = engine_named("hookgrad")
    assert engine is engine_named("hookgrad")
    assert isinstance(engine, Engine)
    assert engine.owns(hookgrad.ones(2)) and not engine.owns([1.0])


def test_an_unknown_engine_name_lists_the_engines() -> None:
    """A typo names the valid engines."""
    with pytest.raises(ValueError, match="unknown engine 'jax'; engines: hookgrad, torch"):
        engine_named("jax")
    assert ENGINE_NAMES == ("hookgrad", "torch")


def test_torch_joins_the_available_engines_once_imported() -> None:
    """With torch imported, "auto" finds both engines; the torch one owns torch tensors only."""
    torch = pytest.importorskip("torch")
    engines = {engine.name: engine for engine in available_engines()}
    assert set(engines) == {"hookgrad", "torch"}
    assert engines["torch"].owns(torch.ones(2)) and not engines["torch"].owns(hookgrad.ones(2))
