"""numpy's ``axis=``/``keepdims=`` spellings of ``dim=``/``keepdim=``: accepted exactly where
torch 2.13's argument parser accepts them (its C++ functions and Tensor methods), refused by
the functions torch writes in Python (``split``, ``norm``, ``F.softmax``), and a TypeError
naming the alias when both spellings are given. Values and gradients are compared with torch
(``assert_same`` from test_vs_torch).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad

from .test_vs_torch import assert_same

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tensor-ops.md"


def _long(lib: Any, x: Any) -> Any:
    """An index shaped like ``x`` whose entries (0) are valid along every dim."""
    return lib.zeros(tuple(x.shape), dtype=lib.long)


# name -> the op's other arguments (as keywords: ``dim`` comes before some of them)
REDUCTIONS = [
    "all", "amax", "amin", "any", "argmax", "argmin", "logsumexp", "max", "mean", "median",
    "min", "prod", "std", "sum", "var",
]  # fmt: skip
EXTRA: dict[str, Callable[[Any, Any], dict[str, Any]]] = {
    **{name: lambda L, x: {} for name in REDUCTIONS},
    **{name: lambda L, x: {} for name in ["softmax", "log_softmax", "cumsum", "cumprod"]},
    **{name: lambda L, x: {} for name in ["argsort", "sort", "squeeze", "unsqueeze", "unbind"]},
    "topk": lambda L, x: {"k": 1},
    "chunk": lambda L, x: {"chunks": 2},
    "narrow": lambda L, x: {"start": 0, "length": 1},
    "select": lambda L, x: {"index": 0},
    "split_with_sizes": lambda L, x: {},  # its sizes depend on the dim: see _call
    "index_select": lambda L, x: {"index": L.tensor([0])},
    "gather": lambda L, x: {"index": _long(L, x)},
    "scatter": lambda L, x: {"index": _long(L, x), "src": x * 2},
    "scatter_add": lambda L, x: {"index": _long(L, x), "src": x * 2},
    "repeat_interleave": lambda L, x: {"repeats": 2},
}
FUNCTIONS = sorted([*EXTRA, "std_mean", "var_mean", "cat", "stack"])
METHODS = sorted([*EXTRA, "scatter_", "scatter_add_", "size"])
KEEPDIM = {*REDUCTIONS, "std_mean", "var_mean"}
# torch writes these in Python, with torch's names only
REFUSED = {"function": {"norm", "split", "unflatten"}, "method": {"norm", "split", "unflatten"}}

shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


def _call(lib: Any, form: str, name: str, x: Any, **kw: Any) -> Any:
    extra = EXTRA.get(name.rstrip("_"), lambda L, x: {})(lib, x)
    if name == "split_with_sizes":  # one piece: the whole length along the drawn dim
        extra = {"split_sizes": [x.shape[kw["axis"]]]}
    if name in ("cat", "stack"):
        return getattr(lib, name)([x, x * 2], **kw)
    if name.endswith("_"):  # in place: on a copy that is in the graph
        return getattr(x * 1, name)(**kw, **extra)
    if form == "method":
        return getattr(x, name)(**kw, **extra)
    return getattr(lib, name)(x, **kw, **extra)


def _with_dims(form: str, name: str) -> Callable[..., None]:
    @settings(max_examples=12, deadline=None)
    @given(shape=shapes, data=st.data())
    def check(shape: tuple[int, ...], data: st.DataObject) -> None:
        ndim = len(shape) + (name in ("unsqueeze", "stack"))
        axis = data.draw(st.integers(-ndim, ndim - 1), label="axis")
        kw: dict[str, Any] = {"axis": axis}
        if name in KEEPDIM:
            kw["keepdims"] = data.draw(st.booleans(), label="keepdims")
        array = np.cos(np.arange(int(np.prod(shape))) * 1.7 + 0.3).reshape(shape) * 2
        array = array.astype(np.float32)

        def program(lib: Any, x: Any) -> Any:
            if name in ("all", "any"):
                return _call(lib, form, name, x > 0, **kw)
            return _call(lib, form, name, x, **kw)

        assert_same(program, array)

    return check


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_takes_numpy_names_as_torch(name: str) -> None:
    """``torch.<op>(x, axis=d, keepdims=k)`` gives torch's values and gradients."""
    _with_dims("function", name)()


@pytest.mark.parametrize("name", [n for n in METHODS if n != "size"])
def test_method_takes_numpy_names_as_torch(name: str) -> None:
    """``x.<op>(axis=d, keepdims=k)`` gives torch's values and gradients."""
    _with_dims("method", name)()


def test_size_takes_axis() -> None:
    """``x.size(axis=1)`` is the size along dim 1, as in torch."""
    assert hookgrad.zeros(2, 5).size(axis=1) == torch.zeros(2, 5).size(axis=1) == 5


def _dim_parameters(fn: Any) -> bool:
    try:
        return bool({"dim", "keepdim"} & inspect.signature(fn).parameters.keys())
    except (TypeError, ValueError):
        return False


def test_the_list_is_every_op_with_a_dim() -> None:
    """Every public function and Tensor method with ``dim``/``keepdim`` is tested above or is
    one torch refuses the aliases for: nothing is left out."""
    functions = {n for n in hookgrad.__all__ if _dim_parameters(getattr(hookgrad, n, None))}
    methods = {
        n for n, v in vars(hookgrad.Tensor).items() if not n.startswith("_") and _dim_parameters(v)
    }
    assert functions == set(FUNCTIONS) | REFUSED["function"]
    assert methods == set(METHODS) | REFUSED["method"]


@pytest.mark.parametrize(
    "call",
    [
        lambda L, x: L.split(x, 1, axis=0),
        lambda L, x: x.unflatten(axis=0, sizes=(1, -1)),
        lambda L, x: x.split(1, axis=0),
        lambda L, x: L.norm(x, axis=0),
        lambda L, x: x.norm(keepdims=True),
        lambda L, x: L.nn.functional.softmax(x, axis=0),
        lambda L, x: L.nn.functional.log_softmax(x, axis=0),
    ],
    ids=[
        "split",
        "Tensor.unflatten",
        "Tensor.split",
        "norm",
        "Tensor.norm",
        "F.softmax",
        "F.log_softmax",
    ],
)
def test_torchs_python_functions_refuse_numpy_names(call: Callable[..., Any]) -> None:
    """Where torch itself refuses ``axis``/``keepdims`` (its Python-level functions), so
    does hookgrad: a TypeError naming the argument."""
    with pytest.raises(TypeError, match=r"unexpected keyword argument '(axis|keepdims)'"):
        call(torch, torch.ones(2, 2))
    with pytest.raises(TypeError, match=r"unexpected keyword argument '(axis|keepdims)'"):
        call(hookgrad, hookgrad.ones(2, 2))


@pytest.mark.parametrize(
    "call",
    [
        lambda L, x: x.sum(0, axis=0),
        lambda L, x: x.sum(dim=1, axis=0, keepdim=True),
        lambda L, x: L.sum(x, 1, keepdim=True, keepdims=True),
        lambda L, x: L.cat([x, x], dim=0, axis=0),
        lambda L, x: x.softmax(1, axis=1),
        lambda L, x: x.gather(0, L.zeros(1, 2, dtype=L.long), axis=0),
    ],
    ids=["sum", "sum-both-keywords", "torch.sum-keepdims", "cat", "softmax", "gather"],
)
def test_both_spellings_is_torchs_type_error(call: Callable[..., Any]) -> None:
    """Giving ``dim`` and ``axis`` (or ``keepdim`` and ``keepdims``) is torch's TypeError, with
    torch's text."""
    with pytest.raises(TypeError) as theirs:
        call(torch, torch.ones(2, 2))
    with pytest.raises(TypeError) as ours:
        call(hookgrad, hookgrad.ones(2, 2))
    assert str(ours.value) == str(theirs.value)


def test_a_required_dim_given_by_neither_name_is_a_type_error() -> None:
    """``softmax(x)`` without ``dim`` or ``axis`` still names the missing ``dim``."""
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'dim'"):
        hookgrad.softmax(hookgrad.ones(2))
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'index'"):
        hookgrad.ones(2).gather(axis=0)


def _accuracy_program(lib: Any) -> list[float]:
    """d2l's accuracy and softmax-from-scratch, written with numpy's spellings."""
    lib.manual_seed(0)
    X = lib.randn(16, 5, requires_grad=True)
    y = lib.tensor([i % 5 for i in range(16)])

    def softmax(X: Any) -> Any:
        X_exp = lib.exp(X - X.max(axis=1, keepdims=True).values)
        return X_exp / X_exp.sum(axis=1, keepdims=True)

    def accuracy(y_hat: Any, y: Any) -> float:
        y_hat = y_hat.argmax(axis=1)
        cmp = y_hat.type(y.dtype) == y
        return float(cmp.type(y.dtype).sum())

    y_hat = softmax(X)
    loss = -lib.log(y_hat[list(range(len(y_hat))), y]).mean(axis=0)
    loss.backward()
    pooled = lib.cat([X, X * 2], axis=1).mean(axis=-1)
    return [
        accuracy(y_hat, y),
        float(loss),
        *X.grad.sum(axis=0).tolist(),
        *pooled.tolist(),
        float(lib.std(X, axis=0, keepdims=True).sum()),
    ]


def test_a_program_written_with_numpy_names_gives_torchs_numbers() -> None:
    """d2l's softmax regression pieces written with ``axis=``/``keepdims=`` give torch's
    numbers."""
    ours, theirs = _accuracy_program(hookgrad), _accuracy_program(torch)
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=1e-6)


def test_docs_promise_numpy_names() -> None:
    """docs/tensor-ops.md promises numpy's ``axis``/``keepdims`` where torch accepts them."""
    text = " ".join(DOCS.read_text().split())
    assert "numpy's `axis=`/`keepdims=` spellings" in text
    assert hookgrad.ones(2, 3).mean(axis=-1, keepdims=True).shape == (2, 1)
