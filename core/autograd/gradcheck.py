"""Numerical gradient checking (central finite differences in float64), for op and plugin authors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._tensor import Tensor, _wrap

__all__ = ["GradcheckError", "gradcheck"]


class GradcheckError(RuntimeError):
    """Analytical and numerical gradients disagree; the message names input, output and entry."""


def _outputs(fn: Callable[..., Any], inputs: Sequence[Any]) -> list[Tensor]:
    out = fn(*inputs)
    return [out] if isinstance(out, Tensor) else [o for o in out if isinstance(o, Tensor)]


def _numerical(
    fn: Callable[..., Any], inputs: Sequence[Any], i: int, k: int, eps: float
) -> np.ndarray:
    """Column of the Jacobian for output ``k`` with respect to input ``i``, flattened."""
    x = inputs[i]._data
    flat = x.reshape(-1)
    columns = []
    for j in range(flat.size):
        old = flat[j]
        flat[j] = old + eps
        plus = _outputs(fn, inputs)[k]._data.astype(np.float64).reshape(-1).copy()
        flat[j] = old - eps
        minus = _outputs(fn, inputs)[k]._data.astype(np.float64).reshape(-1).copy()
        flat[j] = old
        columns.append((plus - minus) / (2 * eps))
    out_size = _outputs(fn, inputs)[k]._data.size
    return np.stack(columns, axis=1) if columns else np.zeros((out_size, 0))


def _analytical(fn: Callable[..., Any], inputs: Sequence[Any], i: int, k: int) -> np.ndarray:
    from . import grad

    out = _outputs(fn, inputs)[k]
    rows = []
    for j in range(out._data.size):
        seed = np.zeros(out._data.size, dtype=out._data.dtype)
        seed[j] = 1
        (g,) = grad(
            out,
            inputs[i],
            _wrap(seed.reshape(out._data.shape)),
            retain_graph=True,
            allow_unused=True,
        )
        size = inputs[i]._data.size
        rows.append(np.zeros(size) if g is None else g._data.astype(np.float64).reshape(-1))
    return np.stack(rows, axis=0) if rows else np.zeros((0, inputs[i]._data.size))


def gradcheck(
    func: Callable[..., Any],
    inputs: Tensor | Sequence[Any],
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    """Compare backward's gradients with central differences for every float64 input that requires grad.

    Only outputs that require grad are compared; when none does, the numerical gradients
    must all be zero (torch's rule). No input requiring grad is a ValueError.
    """
    args = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    checked = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a._requires_grad]
    if not checked:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, "
            "but none of them have requires_grad=True."
        )
    for i in checked:
        if args[i]._data.dtype != np.float64:
            raise GradcheckError(
                f"gradcheck needs float64 inputs; input {i} is {args[i]._data.dtype}"
            )
    outputs = _outputs(func, args)
    differentiable = [k for k, out in enumerate(outputs) if out.requires_grad]
    if not differentiable:  # as torch: then every numerical gradient must be zero
        for k in range(len(outputs)):
            for i in checked:
                if np.any(_numerical(func, args, i, k, eps) != 0):
                    if not raise_exception:
                        return False
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        return True
    for k in differentiable:  # outputs that need no gradient are left out, as in torch
        for i in checked:
            numerical = _numerical(func, args, i, k, eps)
            analytical = _analytical(func, args, i, k)
            if numerical.shape != analytical.shape or not np.allclose(
                analytical, numerical, rtol=rtol, atol=atol
            ):
                if not raise_exception:
                    return False
                diff = (
                    np.abs(analytical - numerical) if numerical.shape == analytical.shape else None
                )
                where = (
                    ""
                    if diff is None
                    else f" (largest difference {diff.max():.3g} at {np.unravel_index(diff.argmax(), diff.shape)})"
                )
                raise GradcheckError(
                    f"Jacobian mismatch for output {k} with respect to input {i}{where},\n"
                    f"numerical:{numerical}\nanalytical:{analytical}"
                )
    return True
