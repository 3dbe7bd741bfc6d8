"""``F.embedding``: row lookup forward, scatter-add backward into the weight only."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._ops._base import Node, Tensor, edge, needs_grad, not_a_tensor, record, wrap
from ..._ops._graph import linear_grad, only
from ..._ops.inplace import bump

__all__ = ["EmbeddingBackward0", "embedding"]


class EmbeddingBackward0(Node):
    """The one edge is the weight's: indices are not differentiable (as torch)."""

    __slots__ = ("_num_weights", "_padding_idx", "_scale_by_freq", "indices")

    _num_weights: int
    _padding_idx: int | None
    _scale_by_freq: bool
    indices: np.ndarray

    def backward(self, g: np.ndarray) -> tuple[np.ndarray | None, ...]:
        idx = self.indices.reshape(-1)
        rows = g.reshape(idx.size, -1)
        if self._scale_by_freq:
            counts = np.bincount(idx, minlength=self._num_weights)
            rows = rows / counts[idx][:, None].astype(rows.dtype)
        grad = np.zeros((self._num_weights, rows.shape[1]), dtype=g.dtype)
        np.add.at(grad, idx, rows)
        if self._padding_idx is not None:
            grad[self._padding_idx] = 0
        return (grad,)

    def backward_graph(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = only(grads)
        idx = self.indices.reshape(-1)
        # torch's embedding_dense_double_backward drops padding rows but not the frequency
        # scale; so does this.
        factor = np.ones(idx.size, dtype=g._data.dtype)
        if self._padding_idx is not None:
            factor = np.where(idx == self._padding_idx, 0, factor).astype(factor.dtype)
        shape = g._data.shape

        def lookup(gg: Tensor) -> Tensor:
            return (gg[idx] * wrap(factor[:, None])).reshape(shape)

        return (linear_grad(self, g, self.backward(g._data)[0], lookup),)  # type: ignore[arg-type]


def _indices(input: Tensor | Any, num_weights: int) -> np.ndarray:
    if not isinstance(input, Tensor):  # torch.embedding(weight, indices): indices come second
        raise not_a_tensor("embedding", "indices", input, 2)
    idx = input._data
    if idx.dtype.kind not in "iu":
        kind = "Float" if idx.dtype.kind == "f" else str(idx.dtype)
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got hookgrad.{kind}Tensor instead (while checking "
            "arguments for embedding)"
        )
    if idx.size and (idx.min() < 0 or idx.max() >= num_weights):
        raise IndexError("index out of range in self")
    return idx


def _padding_index(padding_idx: int | None, num_weights: int) -> int | None:
    if padding_idx is None:
        return None
    if not -num_weights <= padding_idx < num_weights:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return padding_idx % num_weights


def _renorm_(weight: Tensor, idx: np.ndarray, max_norm: float, norm_type: float) -> None:
    """Rescale, in place and unrecorded, the looked-up rows whose norm exceeds ``max_norm``."""
    rows = np.unique(idx)
    w = weight._data
    norms = np.linalg.norm(w[rows], ord=norm_type, axis=1)
    over = norms > max_norm
    if over.any():
        scale = (max_norm / (norms[over] + 1e-7)).astype(w.dtype)
        w[rows[over]] *= scale[:, None]
        bump(weight)


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` at ``input``'s indices; ``padding_idx``'s row gets no gradient."""
    if sparse:
        raise NotImplementedError("hookgrad has no sparse gradients: use sparse=False")
    w = weight._data
    num = w.shape[0]
    idx = _indices(input, num)
    pad = _padding_index(padding_idx, num)
    if max_norm is not None:
        _renorm_(weight, idx, max_norm, norm_type)
    out = w[idx]
    if not needs_grad(weight):
        return wrap(out)
    node = EmbeddingBackward0((edge(weight),))
    node.indices, node._num_weights, node._padding_idx = idx, num, pad
    node._scale_by_freq = scale_grad_by_freq
    node._save(weight)
    return record(out, node)
