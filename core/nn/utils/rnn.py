"""``torch.nn.utils.rnn``: padding and packing variable-length sequences for the RNN layers.

A ``PackedSequence`` holds the time steps of a batch sorted by length (longest first), step
after step, with ``batch_sizes[t]`` the number of sequences still running at step ``t``. It is
built from differentiable hookgrad ops (slices, ``cat``, ``index_select``), so gradients flow
back to the padded input as in torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..._creation import full
from ..._ops import shape as _shape
from ..._tensor import Tensor, _wrap

__all__ = [
    "PackedSequence",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
]


class PackedSequence(NamedTuple):
    """``(data, batch_sizes, sorted_indices, unsorted_indices)``, as torch's."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """The same sequence with ``data`` moved/cast (the indices stay as they are)."""
        return self._replace(data=self.data.to(*args, **kwargs))

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False


def _long(values: Any) -> Tensor:
    return _wrap(np.asarray(values, dtype=np.int64))


def _lengths(lengths: Any) -> np.ndarray:
    data = lengths._data if isinstance(lengths, Tensor) else lengths
    return np.asarray(data, dtype=np.int64).reshape(-1)


def pack_padded_sequence(
    input: Tensor, lengths: Any, batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Pack a padded ``(T, B, *)`` (or ``(B, T, *)``) batch whose sequences have ``lengths``."""
    sizes = _lengths(lengths)
    if enforce_sorted:
        if np.any(np.diff(sizes) > 0):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability."
            )
        sorted_indices = None
    else:
        order = np.argsort(-sizes, kind="stable")
        sizes = sizes[order]
        sorted_indices = _long(order)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if sizes.size and sizes[-1] <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in "
            "'lengths' that is <= 0"
        )
    if batch_first:
        input = input.transpose(0, 1)
    batch_sizes = [int(np.sum(sizes > t)) for t in range(int(sizes[0]) if sizes.size else 0)]
    data = _shape.cat([input[t, :size] for t, size in enumerate(batch_sizes)], 0)
    unsorted = None if sorted_indices is None else _long(np.argsort(sorted_indices._data))
    return PackedSequence(data, _long(batch_sizes), sorted_indices, unsorted)


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Undo :func:`pack_padded_sequence`: ``(padded, lengths)`` in the original batch order."""
    data, batch_sizes = sequence.data, [int(b) for b in sequence.batch_sizes._data]
    steps, batch = len(batch_sizes), batch_sizes[0]
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being "
                f"{steps}"
            )
        steps = total_length
    rows = _shape.split(data, batch_sizes, 0)
    tail = tuple(data.shape[1:])
    padded = []
    for t in range(steps):
        have = rows[t] if t < len(rows) else None
        size = 0 if have is None else have.shape[0]
        pad = full((batch - size, *tail), padding_value, dtype=data.dtype)
        padded.append(pad if have is None else _shape.cat([have, pad], 0))
    out = _shape.stack(padded, 0)
    lengths = np.array([np.sum(np.asarray(batch_sizes) > b) for b in range(batch)], np.int64)
    if sequence.unsorted_indices is not None:
        out = out.index_select(1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices._data]
    return (out.transpose(0, 1) if batch_first else out), _long(lengths)


def pad_sequence(
    sequences: Sequence[Tensor] | Tensor,
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack sequences of different lengths ``(L_i, *)`` into ``(max L, B, *)`` with padding."""
    if padding_side not in ("left", "right"):
        raise ValueError(
            f"Expected padding_side to be one of left or right, but got {padding_side}."
        )
    items = list(sequences.unbind(0) if isinstance(sequences, Tensor) else sequences)
    longest = max(t.shape[0] for t in items)
    padded = []
    for t in items:
        pad = full((longest - t.shape[0], *t.shape[1:]), padding_value, dtype=t.dtype)
        padded.append(_shape.cat([t, pad] if padding_side == "right" else [pad, t], 0))
    return _shape.stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences of different lengths (longest first unless not enforced)."""
    lengths = [t.shape[0] for t in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)
