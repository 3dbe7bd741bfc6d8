"""Public function forms take torch's keyword names for their tensor parameters
(``torch.add(input=x, other=y)``, ``torch.bmm(input=a, mat2=b)``), checked against torch 2.13's
signatures and calls."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hookgrad

torch = pytest.importorskip("torch")

# public functions not made by the generated wrapper, or whose torch name is no Python name
_NOT_WRAPPED = {"allclose", "equal", "from_numpy", "set_num_threads"}


def _positional_names(fn: Any) -> list[str] | None:
    """The leading positional parameter names: from the signature, else from the first line
    of torch's docstring (``add(input, other, *, alpha=1, out=None) -> Tensor``)."""
    try:
        params = inspect.signature(fn, follow_wrapped=False).parameters.values()
        return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        pass
    lines = (fn.__doc__ or "").strip().splitlines()
    match = re.match(r"\s*\w+\((.*?)\)", lines[0]) if lines else None
    if match is None:
        return None
    names = []
    for part in match.group(1).split(","):
        name = part.split("=")[0].split(":")[0].strip()
        if name == "*":
            break
        if name and not name.startswith("*"):
            names.append(name)
    return names


def _mismatches(ours: Any, theirs: Any, prefix: str) -> list[str]:
    found = []
    for name in sorted(getattr(ours, "__all__", ())):
        fn, reference = getattr(ours, name), getattr(theirs, name, None)
        if not callable(fn) or isinstance(fn, type) or reference is None or name in _NOT_WRAPPED:
            continue
        mine, torchs = _positional_names(fn), _positional_names(reference)
        if mine is None or not torchs:
            continue
        n = min(len(mine), len(torchs))
        if mine[:n] != torchs[:n]:
            found.append(f"{prefix}.{name}: {mine[:n]} != {torchs[:n]}")
    return found


def test_function_forms_name_their_parameters_as_torch() -> None:
    """Every generated function form (hookgrad.*, F.*) names its leading positional
    parameters as torch does, so torch's keywords reach them."""
    found = _mismatches(hookgrad, torch, "torch")
    found += _mismatches(hookgrad.nn.functional, torch.nn.functional, "F")
    assert found == []


_CALLS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "add": lambda L, x, y: L.add(input=x, other=y, alpha=2),
    "sub": lambda L, x, y: L.sub(input=x, other=y),
    "mul": lambda L, x, y: L.mul(input=x, other=y),
    "div": lambda L, x, y: L.div(input=x, other=y),
    "maximum": lambda L, x, y: L.maximum(input=x, other=y),
    "matmul": lambda L, x, y: L.matmul(input=x, other=y.T),
    "bmm": lambda L, x, y: L.bmm(input=x[None], mat2=y.T[None]),
    "mm": lambda L, x, y: L.mm(input=x, mat2=y.T),
    "mm_out": lambda L, x, y: L.mm(x, y.T, out=L.empty(0, dtype=L.float64)),
    "Tensor.mm": lambda L, x, y: x.mm(mat2=y.T),
    "zeros_like": lambda L, x, y: L.zeros_like(input=x, dtype=L.float32) + x,
    "ones_like": lambda L, x, y: L.ones_like(input=x, requires_grad=True) * x,
    "empty_like": lambda L, x, y: L.empty_like(input=x, dtype=L.int64).shape[0] + x,
    "full_like": lambda L, x, y: L.full_like(input=x, fill_value=2, dtype=L.float64) * x,
    "rand_like": lambda L, x, y: L.rand_like(input=x, generator=L.Generator().manual_seed(3)),
    "randn_like": lambda L, x, y: L.randn_like(x, generator=L.Generator().manual_seed(4)),
    "mv": lambda L, x, y: L.mv(input=x, vec=y[0]),
    "sum": lambda L, x, y: L.sum(input=x, dim=1),
    "softmax": lambda L, x, y: L.softmax(input=x, dim=-1),
    "clamp": lambda L, x, y: L.clamp(input=x, min=-0.5, max=0.5),
    "lerp": lambda L, x, y: L.lerp(input=x, end=y, weight=0.25),
    "exp": lambda L, x, y: L.exp(input=x),
    "split": lambda L, x, y: L.split(tensor=x, split_size_or_sections=1)[1],
    "F.relu": lambda L, x, y: L.nn.functional.relu(input=x),
    "F.linear": lambda L, x, y: L.nn.functional.linear(input=x, weight=y),
}


@pytest.mark.parametrize("name", sorted(_CALLS))
def test_calls_with_torch_keywords_match_torch(name: str) -> None:
    """A call spelled with torch's keywords gives torch's result."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    call = _CALLS[name]
    got = call(hookgrad, hookgrad.tensor(x), hookgrad.tensor(y))
    expected = call(torch, torch.tensor(x), torch.tensor(y))
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
    assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]


def test_renamed_parameter_still_named_in_errors(fails_like_torch: Any) -> None:
    """A non-tensor first argument is named with torch's name, as torch's error does."""
    fails_like_torch(lambda lib: lib.add(None, lib.ones(2)))


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.mm(L.ones(3), L.ones(3, 4)),
        lambda L: L.mm(L.ones(2, 2, 3), L.ones(3, 4)),
        lambda L: L.ones(2, 3).mm(L.ones(3)),
        lambda L: L.mm(L.ones(2, 3), L.ones(4, 4)),
        lambda L: L.mm(L.ones(2, 3), L.ones(3, 4, dtype=L.float64)),
        lambda L: L.mm(L.ones(2, 3, dtype=L.int64), L.ones(4, 4, dtype=L.int32)),
        lambda L: L.mm(L.ones(2, 3), [1.0]),
        lambda L: L.mm(L.ones(2, 3, requires_grad=True), L.ones(3, 4), out=L.empty(2, 4)),
    ],
)
def test_mm_refuses_what_torch_refuses(fails_like_torch: Any, call: Any) -> None:
    """torch.mm and Tensor.mm take two matrices of one dtype only, with torch's errors (its
    out= error names mm)."""
    fails_like_torch(call)


def test_mm_takes_no_other_keyword(lib: Any) -> None:
    """torch.mm's second parameter is mat2: matmul's ``other=`` is a TypeError."""
    with pytest.raises(TypeError):
        lib.mm(lib.ones(2, 3), other=lib.ones(3, 4))
