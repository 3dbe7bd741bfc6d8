"""Turning a list of samples into one batch, as ``torch.utils.data._utils.collate``.

``collate`` walks the first sample's structure (mappings, namedtuples, sequences) and calls
the function that ``collate_fn_map`` registers for each leaf type: tensors are stacked,
numpy arrays and numbers become tensors, strings stay as they are.
"""

from __future__ import annotations

import collections.abc
import copy
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ...._creation import as_tensor, tensor
from ...._dtype import float64
from ...._ops.shape import stack
from ...._tensor import Tensor

__all__ = [
    "collate",
    "collate_float_fn",
    "collate_int_fn",
    "collate_numpy_array_fn",
    "collate_numpy_scalar_fn",
    "collate_str_fn",
    "collate_tensor_fn",
    "default_collate",
    "default_collate_fn_map",
    "default_convert",
]

CollateFnMap = dict[type | tuple[type, ...], Callable[..., Any]]

np_str_obj_array_pattern = re.compile(r"[SaUO]")
"""numpy dtype codes (bytes, str, object) that cannot become a tensor."""

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


def _rebuild(template: Any, values: dict[Any, Any] | list[Any]) -> Any:
    """A container like ``template`` holding ``values``; a plain dict/list if it cannot be built.

    Mutable containers are shallow-copied and refilled, so subclasses keep their type and
    extra attributes; immutable ones are rebuilt from their type.
    """
    try:
        if isinstance(values, dict):
            if isinstance(template, collections.abc.MutableMapping):
                mapping = copy.copy(template)
                mapping.update(values)
                return mapping
            return type(template)(values)
        if isinstance(template, collections.abc.MutableSequence):
            sequence = copy.copy(template)
            for i, value in enumerate(values):
                sequence[i] = value
            return sequence
        return type(template)(values)
    except TypeError:
        return values


def default_convert(data: Any) -> Any:
    """Turn numpy arrays and scalars inside ``data`` into tensors (the no-batching collate)."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and not isinstance(data, (np.str_, np.bytes_)):
        if isinstance(data, np.ndarray) and np_str_obj_array_pattern.search(data.dtype.str):
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild(data, {key: default_convert(data[key]) for key in data})
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # torch returns a list here, too
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild(data, [default_convert(d) for d in data])
    return data


def collate(batch: Any, *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """Collate ``batch`` by the type of its first element, recursing into containers.

    ``collate_fn_map`` maps a leaf type to the function collating it (exact type first,
    then the first entry it is an instance of, in insertion order).
    """
    elem = batch[0]
    if collate_fn_map is not None:
        leaf_fn = collate_fn_map.get(type(elem))
        if leaf_fn is None:
            leaf_fn = next((f for t, f in collate_fn_map.items() if isinstance(elem, t)), None)
        if leaf_fn is not None:
            return leaf_fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild(
            elem,
            {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem},
        )
    if _is_namedtuple(elem):
        return type(elem)(*(collate(list(s), collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [collate(list(s), collate_fn_map=collate_fn_map) for s in zip(*batch)]
        return columns if isinstance(elem, tuple) else _rebuild(elem, columns)
    raise TypeError(default_collate_err_msg_format.format(type(elem)))


def collate_tensor_fn(batch: list[Tensor], *, collate_fn_map: CollateFnMap | None = None) -> Tensor:
    return stack(batch, 0)


def collate_numpy_array_fn(
    batch: list[np.ndarray], *, collate_fn_map: CollateFnMap | None = None
) -> Any:
    if np_str_obj_array_pattern.search(batch[0].dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(batch[0].dtype))
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(
    batch: list[Any], *, collate_fn_map: CollateFnMap | None = None
) -> Tensor:
    """numpy scalars keep their dtype (a list of float64 scalars gives a float64 tensor)."""
    return as_tensor(np.asarray(batch))


def collate_float_fn(batch: list[float], *, collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """Python floats are double precision, so they give a float64 tensor, as in torch."""
    return tensor(batch, dtype=float64)


def collate_int_fn(batch: list[int], *, collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """Python ints give int64 (bools, a subclass of int, give a bool tensor)."""
    return tensor(batch)


def collate_str_fn(batch: list[Any], *, collate_fn_map: CollateFnMap | None = None) -> list[Any]:
    return batch


default_collate_fn_map: CollateFnMap = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch: Any) -> Any:
    """Stack a list of samples into a batch: the DataLoader's collate when batching is on."""
    return collate(batch, collate_fn_map=default_collate_fn_map)
