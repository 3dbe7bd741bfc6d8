"""Differential-test helpers for layers: run the same module or function in torch and hookgrad.

Session-scoped fixtures that return plain functions, so hypothesis tests may use them too.
Every check runs the forward pass, back-propagates the same random output gradient through
``sum(out * G)`` and compares outputs, input gradients, parameter gradients and buffers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import hookgrad

RTOL, ATOL = 1e-4, 1e-5


def _numpy(t: Any) -> np.ndarray:
    return t.detach().numpy()


def _first_output(out: Any) -> Any:
    return out[0] if isinstance(out, tuple) else out


def _backward(lib: Any, out: Any, seed: int) -> None:
    """``sum(out * G)`` backward with a seeded ``G`` of out's shape."""
    g = np.random.default_rng(seed).standard_normal(tuple(out.shape)).astype(_numpy(out).dtype)
    (out * lib.tensor(g)).sum().backward()


def _assert_close(got: Any, expected: Any, what: str, rtol: float, atol: float) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if expected.dtype.kind in "iub":
        np.testing.assert_array_equal(got, expected, err_msg=what)
    else:
        np.testing.assert_allclose(got, expected, rtol, atol, err_msg=what)


def _compare_outputs(h_out: Any, t_out: Any, rtol: float, atol: float) -> None:
    h_all = h_out if isinstance(h_out, tuple) else (h_out,)
    t_all = t_out if isinstance(t_out, tuple) else (t_out,)
    assert len(h_all) == len(t_all)
    for i, (h, t) in enumerate(zip(h_all, t_all)):
        _assert_close(_numpy(h), _numpy(t), f"output {i}", rtol, atol)


@pytest.fixture(scope="session")
def torch_mod() -> Any:
    return pytest.importorskip("torch")


@pytest.fixture(scope="session")
def same_function(torch_mod: Any) -> Callable[..., None]:
    """``check(fn, *arrays, grad=True)``: ``fn(lib, *tensors)`` gives torch's outputs and, when
    ``grad``, torch's gradients for every float array (the first output is back-propagated)."""

    def check(
        fn: Callable[..., Any],
        *arrays: np.ndarray,
        grad: bool = True,
        rtol: float = RTOL,
        atol: float = ATOL,
        seed: int = 0,
    ) -> None:
        runs = []
        for lib in (hookgrad, torch_mod):
            leaves = [lib.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
            out = fn(lib, *leaves)
            if grad:
                _backward(lib, _first_output(out), seed)
            runs.append((out, leaves))
        (h_out, h_leaves), (t_out, t_leaves) = runs
        _compare_outputs(h_out, t_out, rtol, atol)
        for i, (h, t) in enumerate(zip(h_leaves, t_leaves)):
            if t.grad is not None:
                assert h.grad is not None, f"input {i} got no gradient"
                _assert_close(h.grad.numpy(), t.grad.numpy(), f"grad of input {i}", rtol, atol)

    return check


def sync_from_torch(hg_module: Any, t_module: Any) -> None:
    """Copy torch's parameters and buffers into hookgrad's module by name."""
    state = {k: hookgrad.tensor(v.detach().numpy()) for k, v in t_module.state_dict().items()}
    hg_module.load_state_dict(state)


@pytest.fixture(scope="session")
def copy_torch_state() -> Callable[[Any, Any], None]:
    """``copy(hg_module, torch_module)``: load torch's parameters and buffers into hookgrad's."""
    return sync_from_torch


@pytest.fixture(scope="session")
def same_module(torch_mod: Any) -> Callable[..., None]:
    """``check(build, *arrays, modes=("train",))``: ``build(lib)``'s module, with torch's
    parameters copied in, gives torch's outputs, input and parameter gradients and buffers,
    step by step in the given modes (a module that keeps state, as BatchNorm, sees one batch
    per step, the step's input scaled by ``1 + step``)."""

    def check(
        build: Callable[[Any], Any],
        *arrays: np.ndarray,
        modes: Sequence[str] = ("train",),
        rtol: float = RTOL,
        atol: float = ATOL,
    ) -> None:
        hg_module, t_module = build(hookgrad), build(torch_mod)
        sync_from_torch(hg_module, t_module)
        for step, mode in enumerate(modes):
            hg_module.train(mode == "train")
            t_module.train(mode == "train")
            _module_step(torch_mod, hg_module, t_module, arrays, step, rtol, atol)

    return check


def _module_step(
    torch_mod: Any,
    hg_module: Any,
    t_module: Any,
    arrays: Sequence[np.ndarray],
    step: int,
    rtol: float,
    atol: float,
) -> None:
    outs, inputs = [], []
    for lib, module in ((hookgrad, hg_module), (torch_mod, t_module)):
        module.zero_grad()
        xs = [lib.tensor(a * (1 + step), requires_grad=a.dtype.kind == "f") for a in arrays]
        out = module(*xs)
        _backward(lib, _first_output(out), step)
        outs.append(out)
        inputs.append(xs)
    _compare_outputs(outs[0], outs[1], rtol, atol)
    for i, (h, t) in enumerate(zip(*inputs)):
        if t.grad is not None:
            _assert_close(h.grad.numpy(), t.grad.numpy(), f"grad of input {i}", rtol, atol)
    t_params = dict(t_module.named_parameters())
    h_params = dict(hg_module.named_parameters())
    assert list(h_params) == list(t_params)
    for name, tp in t_params.items():
        _assert_close(h_params[name].grad.numpy(), tp.grad.numpy(), name, rtol, atol)
    h_buffers = dict(hg_module.named_buffers())
    t_buffers = dict(t_module.named_buffers())
    assert list(h_buffers) == list(t_buffers)
    for name, tb in t_buffers.items():
        _assert_close(h_buffers[name].numpy(), tb.numpy(), name, rtol, atol)


@pytest.fixture(scope="session")
def same_or_torch_error(torch_mod: Any, same_function: Callable[..., None]) -> Callable[..., None]:
    """``check(fn, *arrays)``: as ``same_function``, or, where torch refuses ``fn``'s options
    with a RuntimeError or ValueError, hookgrad raises the same class with the same text."""

    def check(fn: Callable[..., Any], *arrays: np.ndarray, **options: Any) -> None:
        try:
            fn(torch_mod, *[torch_mod.tensor(a) for a in arrays])
        except (RuntimeError, ValueError) as expected:
            with pytest.raises(type(expected)) as got:
                fn(hookgrad, *[hookgrad.tensor(a) for a in arrays])
            assert str(got.value) == str(expected)
            return
        same_function(fn, *arrays, **options)

    return check
