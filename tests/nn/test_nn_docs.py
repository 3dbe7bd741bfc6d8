"""docs/nn.md is true: its tables list what hookgrad.nn has (and torch.nn has too), every layer
module's classes are listed, and its "What differs" items hold."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import hookgrad
import hookgrad.nn as nn

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "nn.md").read_text()

# the modules of hookgrad.nn.modules whose classes the page's Modules table must list
LAYER_FILES = (
    "activation",
    "container",
    "conv",
    "dropout",
    "flatten",
    "linear",
    "loss",
    "normalization",
    "padding",
    "pooling",
    "sparse",
    "upsampling",
)


def _table(title: str) -> list[str]:
    """The back-quoted names in the second column of the table under ``## title``."""
    section = PAGE.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    return [name for row in rows for name in re.findall(r"`([A-Za-z0-9_]+)`", row.split("|")[2])]


def test_every_listed_module_exists_in_hookgrad_and_torch():
    """Each name of the Modules table is a hookgrad.nn class and a torch.nn class."""
    torch = pytest.importorskip("torch")
    names = _table("Modules")
    assert len(names) > 40
    for name in names:
        assert isinstance(getattr(nn, name), type), name
        assert hasattr(torch.nn, name), name


def test_every_listed_function_exists_in_hookgrad_and_torch():
    """Each name of the functional table is in hookgrad.nn.functional and torch's."""
    torch = pytest.importorskip("torch")
    names = _table("Functions of `hookgrad.nn.functional`")
    assert len(names) > 30
    for name in names:
        assert callable(getattr(nn.functional, name)), name
        assert hasattr(torch.nn.functional, name), name


@pytest.mark.parametrize("file", LAYER_FILES)
def test_every_layer_class_is_listed(file):
    """The Modules table lists every public class of the layer modules (it stays complete)."""
    module = importlib.import_module(f"hookgrad.nn.modules.{file}")
    listed = set(_table("Modules"))
    missing = [name for name in module.__all__ if name not in listed]
    assert not missing, f"add {missing} to docs/nn.md"


def test_functional_layers_are_listed():
    """The functional table lists every public function of the layer ops in F."""
    listed = set(_table("Functions of `hookgrad.nn.functional`"))
    ops = (
        "activation",
        "conv",
        "dropout",
        "conv_transpose",
        "normalization",
        "padding",
        "pooling",
        "sparse",
        "upsampling",
    )
    for op in ops:
        module = importlib.import_module(f"hookgrad.nn._ops.{op}")
        public = [n for n in module.__all__ if n[0].islower() and hasattr(nn.functional, n)]
        missing = [n for n in public if n not in listed]
        assert not missing, f"add {missing} to docs/nn.md"


def test_circular_padding_records_one_node():
    """docs/nn.md: circular padding records CircularPadBackward0."""
    x = hookgrad.ones(1, 2, 4, requires_grad=True)
    out = nn.functional.pad(x, (1, 1), mode="circular")
    assert out.grad_fn.name() == "CircularPadBackward0"


def test_uninitialized_parameter_lives_in_the_lazy_module():
    """docs/nn.md: UninitializedParameter is hookgrad.nn.modules.lazy's."""
    from hookgrad.nn.modules.lazy import UninitializedParameter

    assert issubclass(UninitializedParameter, nn.Parameter)
