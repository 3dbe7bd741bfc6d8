"""Helpers for the sequence-model differential tests: run one module in torch and hookgrad.

The torch module is built first (with torch's own initial weights), its state dict is copied
into hookgrad's module through numpy, both get the same inputs, and the same random gradient
is sent back through every output tensor, so outputs, input gradients and all parameter
gradients can be compared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hookgrad

from ..conftest import sync_from_torch

RTOL, ATOL = 1e-5, 1e-5


def flat_tensors(value: Any) -> list[Any]:
    """The tensors of a nested tuple/list output, depth first (None entries skipped)."""
    if isinstance(value, tuple | list):
        return [t for item in value for t in flat_tensors(item)]
    return [] if value is None else [value]


def array(*shape: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _as(lib: Any, value: Any, grad: bool) -> Any:
    if isinstance(value, np.ndarray):
        return lib.tensor(value, requires_grad=grad and value.dtype.kind == "f")
    if isinstance(value, tuple):
        return tuple(_as(lib, v, grad) for v in value)
    return value


def compare_call(
    hg_fn: Callable[..., Any],
    t_fn: Callable[..., Any],
    *args: Any,
    grad_inputs: bool = True,
    rtol: float = RTOL,
    atol: float = ATOL,
    **kwargs: Any,
) -> tuple[list[Any], list[Any]]:
    """Call both with the numpy ``args``/``kwargs`` as tensors (float arrays requiring grad
    when ``grad_inputs``), back-propagate one random gradient per output tensor, and compare
    outputs and input gradients. Returns both libraries' input tensors (args then kwargs)."""
    torch = pytest.importorskip("torch")
    t_in = [_as(torch, a, grad_inputs) for a in (*args, *kwargs.values())]
    h_in = [_as(hookgrad, a, grad_inputs) for a in (*args, *kwargs.values())]
    n = len(args)
    t_out = flat_tensors(t_fn(*t_in[:n], **dict(zip(kwargs, t_in[n:], strict=True))))
    h_out = flat_tensors(hg_fn(*h_in[:n], **dict(zip(kwargs, h_in[n:], strict=True))))
    assert len(h_out) == len(t_out)
    t_loss, h_loss = 0, 0
    for i, (t, h) in enumerate(zip(t_out, h_out, strict=True)):
        np.testing.assert_allclose(h.detach().numpy(), t.detach().numpy(), rtol, atol)
        if t.requires_grad:
            g = array(*t.shape, seed=10 + i)
            t_loss = t_loss + (t * torch.tensor(g)).sum()
            h_loss = h_loss + (h * hookgrad.tensor(g)).sum()
    if not isinstance(t_loss, int):
        t_loss.backward()
        h_loss.backward()
    for t, h in zip(flat_tensors(t_in), flat_tensors(h_in), strict=True):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            assert (h.grad is None) == (t.grad is None)
            if t.grad is not None:
                np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol, atol)
    return h_in, t_in


def compare_module(hg_module: Any, t_module: Any, *args: Any, **kwargs: Any) -> None:
    """:func:`compare_call` on two modules with torch's weights, plus every parameter's
    gradient (same names, same order)."""
    sync_from_torch(hg_module, t_module)
    compare_call(hg_module, t_module, *args, **kwargs)
    t_params = dict(t_module.named_parameters())
    h_params = dict(hg_module.named_parameters())
    assert list(h_params) == list(t_params)
    for name, tp in t_params.items():
        hp = h_params[name]
        if tp.grad is None:
            assert hp.grad is None, name
        else:
            np.testing.assert_allclose(hp.grad.numpy(), tp.grad.numpy(), RTOL, ATOL, err_msg=name)


def hook_trace(module: Any, call: Callable[[], Any]) -> list[tuple[str, str]]:
    """``(kind, submodule name)`` for every forward, full backward pre- and full backward hook
    that fires on ``module`` and its submodules during ``call()`` and one backward pass."""
    events: list[tuple[str, str]] = []
    handles = []
    for name, sub in module.named_modules():
        handles.append(sub.register_forward_hook(lambda *_, n=name: events.append(("fwd", n))))
        handles.append(
            sub.register_full_backward_pre_hook(lambda *_, n=name: events.append(("pre", n)))
        )
        handles.append(
            sub.register_full_backward_hook(lambda *_, n=name: events.append(("bwd", n)))
        )
    out = flat_tensors(call())
    total = out[0].sum()
    for t in out[1:]:
        total = total + t.sum()
    total.backward()
    for handle in handles:
        handle.remove()
    return events
