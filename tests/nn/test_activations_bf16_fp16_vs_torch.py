"""Activations and softmax on bfloat16 and float16 tensors against torch 2.13: computed in
float32 and rounded once, forward and backward, as torch's CPU kernels (not rounded at every
numpy step), so the bits are torch's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")

import hookgrad  # noqa: E402

_ULP = {"bfloat16": 2.0**-7, "float16": 2.0**-10}
_rng = np.random.default_rng(0)
_X = (_rng.standard_normal((32, 40)) * 3).astype(np.float32)
_G = _rng.standard_normal((32, 40)).astype(np.float32)

# name -> (op, share of elements that must be torch's bits: the rest within one unit)
_OPS: dict[str, tuple[Callable[[Any, Any], Any], float]] = {
    "gelu": (lambda L, t: L.nn.functional.gelu(t), 0.9),
    "gelu-tanh": (lambda L, t: L.nn.functional.gelu(t, approximate="tanh"), 0.9),
    "silu": (lambda L, t: L.nn.functional.silu(t), 0.99),
    "SiLU": (lambda L, t: L.nn.SiLU()(t), 0.99),
    "mish": (lambda L, t: L.nn.functional.mish(t), 0.99),
    "sigmoid": (lambda L, t: L.sigmoid(t), 0.7),
    "leaky_relu": (lambda L, t: L.nn.functional.leaky_relu(t, 0.1), 0.99),
    "softmax": (lambda L, t: L.softmax(t, -1), 0.99),
    "softmax-dim0": (lambda L, t: L.nn.functional.softmax(t, dim=0), 0.6),
    "log_softmax": (lambda L, t: L.log_softmax(t, -1), 0.85),
}


def _run(lib: Any, op: Callable[[Any, Any], Any], dtype: str) -> tuple[Any, Any]:
    x = lib.tensor(_X).to(getattr(lib, dtype)).requires_grad_()
    out = op(lib, x)
    out.backward(lib.tensor(_G).to(getattr(lib, dtype)))
    return out, x.grad


def _assert_bits(got: Any, expected: Any, dtype: str, share: float, what: str) -> None:
    """Same dtype, at least ``share`` of the elements torch's bits, and every element within
    a unit in the last place of the tensor's largest one (where a value cancels, as in a
    gradient ``g - exp(out) * sum(g)``, one unit of ``out`` moves it by more than its own)."""
    assert str(got.dtype).rsplit(".", 1)[-1] == str(expected.dtype).rsplit(".", 1)[-1], what
    mine, theirs = got.detach().float().numpy(), expected.detach().float().numpy()
    assert np.mean(mine == theirs) >= share, what
    largest = float(np.abs(theirs).max())
    np.testing.assert_allclose(mine, theirs, rtol=0, atol=_ULP[dtype] * largest, err_msg=what)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(_OPS))
def test_reduced_precision_activation_gives_torch_bits(name: str, dtype: str) -> None:
    """Output and input gradient in the input's dtype with torch's bits for (nearly) all
    elements, the rest within a unit in the last place."""
    op, share = _OPS[name]
    (out, grad), (t_out, t_grad) = _run(hookgrad, op, dtype), _run(torch, op, dtype)
    _assert_bits(out, t_out, dtype, share, "output")
    _assert_bits(grad, t_grad, dtype, share, "input gradient")
