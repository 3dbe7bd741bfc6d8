"""``F.linear`` as one fused graph node: ``x @ W.T + b`` forward, three matmuls backward.

This is the hot path of training an MLP, so it records nothing but the node: no transposed
weight tensor, no permute or add node. Edges follow torch's ``addmm(bias, x, W.t())`` order,
which also makes the bias accumulate before the weight (as in torch, SEMANTICS T-18).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..._dtype import c_type_name, opsum, scalar_type_name
from ..._ops._base import Node, Tensor, edge, needs_grad, record, wrap
from ..._ops._graph import only, saved_input
from ...amp._state import state as _autocast
from ...amp._state import to_lower

__all__ = ["AddmmBackward0", "MmBackward0", "linear"]


class _LinearBackward(Node):
    """Saved state shared by both linear nodes: the 2-D input rows and the weight."""

    __slots__ = ("_in_shape", "weight", "x")

    _in_shape: tuple[int, ...]
    weight: np.ndarray
    x: np.ndarray

    def _graph_grads(
        self, g: Tensor, ex: object, ew: object, first: int
    ) -> tuple[Tensor | None, Tensor | None]:
        """The input's and the weight's recorded gradients (edges from ``first`` on)."""
        g2 = g if g._data.ndim == 2 else g.reshape(-1, g._data.shape[-1])
        gx = gw = None
        if ex is not None:
            gx = (g2 @ saved_input(self, first + 1, self.weight)).reshape(self._in_shape)
        if ew is not None:
            x = saved_input(self, first, self.x.reshape(self._in_shape))
            gw = g2.T @ x.reshape(self.x.shape)
        return (gx, gw)


class MmBackward0(_LinearBackward):
    """``x @ W.T`` with edges ``(x, W)``; N-D inputs are folded into 2-D rows."""

    __slots__ = ()

    # Edges whose gradient torch's graph shows transposed (it routes W through TBackward0):
    # node-level hooks that mirror torch can present these gradients as ``.T``.
    _torch_transposed: ClassVar[tuple[int, ...]] = (1,)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        ex, ew = self._next
        g2 = g if g.ndim == 2 else g.reshape(-1, g.shape[-1])
        gx = (g2 @ self.weight).reshape(self._in_shape) if ex is not None else None
        gw = g2.T @ self.x if ew is not None else None
        return (gx, gw)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        ex, ew = self._next
        return self._graph_grads(only(grads), ex, ew, 0)


class AddmmBackward0(_LinearBackward):
    """``x @ W.T + b`` with torch's addmm edge order ``(b, x, W)``."""

    __slots__ = ()

    _torch_transposed: ClassVar[tuple[int, ...]] = (2,)

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        eb, ex, ew = self._next
        g2 = g if g.ndim == 2 else g.reshape(-1, g.shape[-1])
        gb = None
        if eb is not None:  # float16/bfloat16 bias gradients accumulate in float32
            gb = g2.sum(0) if g2.dtype.itemsize > 2 else opsum(g2, 0)
        gx = (g2 @ self.weight).reshape(self._in_shape) if ex is not None else None
        gw = g2.T @ self.x if ew is not None else None
        return (gb, gx, gw)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        eb, ex, ew = self._next
        gb = None
        if eb is not None:
            gb = (g if g._data.ndim == 2 else g.reshape(-1, g._data.shape[-1])).sum(0)
        return (gb, *self._graph_grads(g, ex, ew, 1))


def _input_error(x: np.ndarray, w: np.ndarray, has_bias: bool) -> RuntimeError:
    """torch's message for an input linear cannot take: rank, feature count or dtype."""
    if x.ndim == 0 or w.ndim == 0:
        return RuntimeError(
            f"both arguments to linear need to be at least 1D, but they are {x.ndim}D and {w.ndim}D"
        )
    if x.dtype != w.dtype:  # torch's addmm (with bias) and mm kernels word it differently
        if has_bias:
            return RuntimeError(
                "mat1 and mat2 must have the same dtype, but got "
                f"{scalar_type_name(x.dtype)} and {scalar_type_name(w.dtype)}"
            )
        return RuntimeError(
            "expected m1 and m2 to have the same dtype, but got: "
            f"{c_type_name(x.dtype)} != {c_type_name(w.dtype)}"
        )
    if w.ndim != 2:
        return RuntimeError(
            f"linear(): expected an input of at least 1-D and a 2-D weight, got {x.ndim}-D "
            f"and {w.ndim}-D"
        )
    # the input folded to 2-D rows against W.T
    rows = int(np.prod(x.shape[:-1]))
    return RuntimeError(
        f"mat1 and mat2 shapes cannot be multiplied ({rows}x{x.shape[-1]} and "
        f"{w.shape[1]}x{w.shape[0]})"
    )


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``; a feature-count mismatch names both matrix shapes."""
    if _autocast.lower is not None:  # torch's CPU autocast: lower precision
        input, weight, bias = to_lower(input, weight, bias)
    x, w = input._data, weight._data
    if (
        x.ndim == 0
        or w.ndim != 2
        or x.shape[-1] != w.shape[1]
        or (x.dtype is not w.dtype and x.dtype != w.dtype)  # dtypes are shared: `is` is cheap
    ):
        raise _input_error(x, w, bias is not None)
    x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
    out = x2 @ w.T
    if bias is not None:
        out += bias._data
    if out.dtype is not x.dtype:
        out = out.astype(x.dtype)  # numpy multiplies bfloat16 into float32; torch rounds back
    if x.ndim != 2:
        out = out.reshape(*x.shape[:-1], w.shape[0])
    node: _LinearBackward
    if bias is None:
        if not needs_grad(input, weight):
            return wrap(out)
        node = MmBackward0((edge(input), edge(weight)))
    else:
        if not needs_grad(input, weight, bias):
            return wrap(out)
        node = AddmmBackward0((edge(bias), edge(input), edge(weight)))
    node._in_shape = x.shape
    node.x = x2
    node.weight = w
    node._save(input, weight)
    return record(out, node)
