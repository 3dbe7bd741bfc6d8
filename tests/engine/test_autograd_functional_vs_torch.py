"""``autograd.functional`` (vjp, jvp, jacobian, hessian, vhp, hvp) against torch 2.13."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hookgrad

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-4, 1e-5

_RNG = np.random.default_rng(11)
W1 = _RNG.standard_normal((5, 3)).astype(np.float32)
B1 = _RNG.standard_normal(5).astype(np.float32)
W2 = _RNG.standard_normal((2, 5)).astype(np.float32)
X = _RNG.standard_normal((4, 3)).astype(np.float32)
Y = _RNG.standard_normal(3).astype(np.float32)


def _mlp(lib: Any) -> Callable[..., Any]:
    """A two-layer tanh MLP on both engines, with fixed weights."""
    w1, b1, w2 = lib.tensor(W1), lib.tensor(B1), lib.tensor(W2)

    def mlp(x: Any) -> Any:
        return lib.nn.functional.linear(lib.tanh(lib.nn.functional.linear(x, w1, b1)), w2)

    return mlp


def _scalar(lib: Any) -> Callable[..., Any]:
    mlp = _mlp(lib)
    return lambda x: (mlp(x) ** 2).sum()


def _pair(lib: Any) -> Callable[..., Any]:
    """Two inputs, two outputs."""
    mlp = _mlp(lib)
    return lambda x, y: (mlp(x * y), (x * y.exp()).sum(0))


def _numpy(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_numpy(v) for v in value)
    return value.detach().numpy()


def _same(ours: Any, theirs: Any) -> None:
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
        return
    assert not isinstance(ours, tuple)
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)


def _both(call: Callable[[Any], Any]) -> None:
    _same(_numpy(call(hookgrad)), _numpy(call(torch)))


def _t(lib: Any, array: np.ndarray) -> Any:
    return lib.tensor(array)


CALLS: dict[str, Callable[[Any], Any]] = {
    "jacobian_mlp": lambda lib: lib.autograd.functional.jacobian(_mlp(lib), _t(lib, X)),
    "jacobian_pair": lambda lib: lib.autograd.functional.jacobian(
        _pair(lib), (_t(lib, X), _t(lib, Y))
    ),
    "jacobian_vectorize": lambda lib: lib.autograd.functional.jacobian(
        _mlp(lib), _t(lib, X), vectorize=True
    ),
    "hessian_mlp": lambda lib: lib.autograd.functional.hessian(_scalar(lib), _t(lib, X[:2])),
    "hessian_pair": lambda lib: lib.autograd.functional.hessian(
        lambda x, y: (x.tanh() * y).sum() + (y**3).sum(), (_t(lib, Y), _t(lib, Y[::-1].copy()))
    ),
    "vjp": lambda lib: lib.autograd.functional.vjp(
        _mlp(lib), _t(lib, X), _t(lib, np.ones((4, 2), np.float32))
    ),
    "jvp": lambda lib: lib.autograd.functional.jvp(_mlp(lib), _t(lib, X), _t(lib, X[::-1].copy())),
    "jvp_pair": lambda lib: lib.autograd.functional.jvp(
        _pair(lib), (_t(lib, X), _t(lib, Y)), (_t(lib, X * 2), _t(lib, Y + 1))
    ),
    "vhp": lambda lib: lib.autograd.functional.vhp(_scalar(lib), _t(lib, X), _t(lib, X * X)),
    "hvp": lambda lib: lib.autograd.functional.hvp(_scalar(lib), _t(lib, X), _t(lib, X * X)),
    "hvp_scalar_input_no_v": lambda lib: lib.autograd.functional.hvp(
        lambda x: (x**3).sum(), _t(lib, np.array(1.5, np.float32))
    ),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_functional_equals_torch(name: str) -> None:
    """Each autograd.functional call returns torch's values, shaped (tuples) as torch's."""
    _both(CALLS[name])


def test_create_graph_results_are_differentiable(lib: Any) -> None:
    """With create_graph=True the Jacobian stays on the graph of the inputs."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    jac = lib.autograd.functional.jacobian(lambda t: t**3, x, create_graph=True)
    assert jac.requires_grad
    (grad,) = lib.autograd.grad(jac.sum(), x)
    assert grad.tolist() == [6.0, 12.0]


def test_results_are_detached_without_create_graph(lib: Any) -> None:
    """Without create_graph the results do not require grad, as in torch."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    out, vjp = lib.autograd.functional.vjp(lambda t: (t**2).sum(), x)
    assert not out.requires_grad and not vjp.requires_grad
    assert vjp.tolist() == [2.0, 4.0]


def test_independent_input_gives_zeros_or_strict_error(lib: Any) -> None:
    """An input the output does not depend on gets zeros; strict=True refuses with torch's text."""
    x, y = lib.tensor([1.0, 2.0]), lib.tensor([3.0])
    jac = lib.autograd.functional.jacobian(lambda a, b: a * 2, (x, y))
    assert jac[1].tolist() == [[0.0], [0.0]]
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is independent"):
        lib.autograd.functional.jacobian(lambda a, b: a * 2, (x, y), strict=True)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda lib: lib.autograd.functional.jacobian(lambda a: a, [lib.ones(2)]),
            TypeError,
            "The inputs given to jacobian must be either a Tensor or a tuple of Tensors",
        ),
        (
            lambda lib: lib.autograd.functional.vjp(lambda a: a * 2, lib.ones(2)),
            RuntimeError,
            "The vector v can only be None if the user-provided function returns a single",
        ),
        (
            lambda lib: lib.autograd.functional.hvp(lambda a: a * 2, lib.ones(2), lib.ones(2)),
            RuntimeError,
            "The Tensor returned by the function given to hvp should contain a single element",
        ),
        (
            lambda lib: lib.autograd.functional.vhp(
                lambda a: a.sum(), (lib.ones(2),), (lib.ones(3),)
            ),
            RuntimeError,
            r"Entry 0 in v has invalid size: should be .*\[2\]\) but got .*\[3\]\)",
        ),
        (
            lambda lib: lib.autograd.functional.jacobian(
                lambda a: a, lib.ones(2), strict=True, vectorize=True
            ),
            RuntimeError,
            "`strict=True` and `vectorized=True` are not supported together",
        ),
        (
            lambda lib: lib.autograd.functional.jacobian(
                lambda a: a, lib.ones(2), create_graph=True, strategy="forward-mode"
            ),
            NotImplementedError,
            '`create_graph=True` and `strategy="forward-mode"` are not supported together',
        ),
        (
            lambda lib: lib.autograd.functional.hessian(lambda a: a * 2, lib.ones(2)),
            RuntimeError,
            "The Tensor returned by the function given to hessian should contain a single",
        ),
    ],
)
def test_errors_are_torchs(lib: Any, call: Any, error: type[Exception], message: str) -> None:
    """Misuse raises torch's exception type and text."""
    with pytest.raises(error, match=message):
        call(lib)


def test_forward_mode_strategy_is_refused_clearly() -> None:
    """strategy="forward-mode" needs forward-mode AD, which hookgrad lacks: it says so."""
    with pytest.raises(NotImplementedError, match="forward-mode AD"):
        hookgrad.autograd.functional.jacobian(
            lambda a: a * 2, hookgrad.ones(2), vectorize=True, strategy="forward-mode"
        )
    with pytest.raises(NotImplementedError, match="forward-mode AD"):
        hookgrad.autograd.functional.hessian(
            lambda a: a.sum(), hookgrad.ones(2), outer_jacobian_strategy="forward-mode"
        )
