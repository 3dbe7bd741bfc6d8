"""A module called with something that is not a tensor fails as the same torch module does."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import hookgrad

torch = pytest.importorskip("torch")

CASES: dict[str, tuple[Callable[[ModuleType], Any], object]] = {
    "Linear": (lambda lib: lib.nn.Linear(2, 2), None),
    "ReLU": (lambda lib: lib.nn.ReLU(), [1.0]),
    "LeakyReLU": (lambda lib: lib.nn.LeakyReLU(), None),
    "LeakyReLU_inplace": (lambda lib: lib.nn.LeakyReLU(inplace=True), None),
    "GELU": (lambda lib: lib.nn.GELU(), "x"),
    "Tanh": (lambda lib: lib.nn.Tanh(), None),
    "Sigmoid": (lambda lib: lib.nn.Sigmoid(), 3),
    "Conv2d": (lambda lib: lib.nn.Conv2d(1, 1, 3), "x"),
    "LayerNorm": (lambda lib: lib.nn.LayerNorm(2), None),
    "Embedding": (lambda lib: lib.nn.Embedding(3, 2), None),
    "Dropout": (lambda lib: lib.nn.Dropout(), None),
    "Flatten": (lambda lib: lib.nn.Flatten(), None),
    "Softmax": (lambda lib: lib.nn.Softmax(1), None),
}


def failure(lib: ModuleType, name: str) -> BaseException:
    build, argument = CASES[name]
    with pytest.raises(Exception) as info:
        build(lib)(argument)
    return info.value


@pytest.mark.parametrize("name", CASES)
def test_the_same_exception_type_as_torch(name: str) -> None:
    """Same exception class; a TypeError names the op and the argument's type as torch's."""
    theirs, mine = failure(torch, name), failure(hookgrad, name)
    assert type(mine) is type(theirs), (mine, theirs)
    # torch names the in-place kernel it dispatches to (leaky_relu_); hookgrad has one op
    if isinstance(theirs, TypeError) and "must be Tensor" in str(theirs) and "_inplace" not in name:
        assert str(mine) == str(theirs)
