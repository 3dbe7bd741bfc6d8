"""safetensors files for hookgrad tensors: the API of ``safetensors.torch``.

``save_file(tensors, filename, metadata=None)``, ``load_file(filename, device="cpu")``,
``save(tensors, metadata=None)`` and ``load(data)`` read and write the format the ecosystem
shares (a JSON header, then raw little-endian bytes; no code, so loading is always safe),
so weights move between torch and hookgrad: ``model.load_state_dict(load_file(path))``.

The reading and writing is the ``safetensors`` package's own (its numpy API), an optional
extra: ``pip install 'hookgrad[safetensors]'``. bfloat16 tensors also need ``ml_dtypes``.
As in ``safetensors.torch``, saving refuses non-contiguous tensors and tensors that share
memory (tied weights): save one name per storage and tie again after loading.
"""

from __future__ import annotations

import os
from collections import defaultdict
from types import ModuleType
from typing import Any

import numpy as np

from .._tensor import Tensor, _wrap
from .._torch_pickle import root_array

__all__ = ["load", "load_file", "save", "save_file"]


def save_file(
    tensors: dict[str, Tensor],
    filename: str | os.PathLike[str],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write ``tensors`` to ``filename`` as safetensors, with optional text ``metadata``."""
    _numpy_api().save_file(_arrays(tensors), filename, metadata=metadata)


def save(tensors: dict[str, Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """The safetensors bytes of ``tensors``."""
    return bytes(_numpy_api().save(_arrays(tensors), metadata=metadata))


def load_file(filename: str | os.PathLike[str], device: Any = "cpu") -> dict[str, Tensor]:
    """The tensors of the safetensors file ``filename``, by name, on the CPU."""
    from .._dtype import device as as_device

    as_device(device)
    api = _numpy_api()
    try:
        arrays = api.load_file(filename)
    except Exception as err:
        if type(err).__name__ == "SafetensorError":
            err.add_note(f"while reading the safetensors file {os.fspath(filename)!r}")
        raise
    return _tensors(arrays)


def load(data: bytes) -> dict[str, Tensor]:
    """The tensors held in safetensors ``data``."""
    return _tensors(_numpy_api().load(data))


def _numpy_api() -> ModuleType:
    try:
        import safetensors.numpy
    except ImportError:
        raise ImportError(
            "reading and writing safetensors files needs the safetensors package: "
            "pip install 'hookgrad[safetensors]'"
        ) from None
    return safetensors.numpy


def _tensors(arrays: dict[str, np.ndarray]) -> dict[str, Tensor]:
    return {
        name: _wrap(np.array(array, copy=not array.flags.writeable))
        for name, array in arrays.items()
    }


def _arrays(tensors: dict[str, Tensor]) -> dict[str, np.ndarray]:
    """Each tensor's array, refused as ``safetensors.torch`` refuses it."""
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    arrays = {}
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise ValueError(
                f"Key `{name}` is invalid, expected torch.Tensor but received {type(t)}"
            )
        arrays[name] = t._data
    _refuse_shared(arrays)
    for name, array in arrays.items():
        if not array.flags.c_contiguous:
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{name}` which is not "
                "allowed. It either means you are trying to save tensors which are reference "
                "of each other in which case it's recommended to save only the full tensors, "
                "and reslice at load time, or simply call `.contiguous()` on your tensor to "
                "pack it before saving."
            )
    return arrays


def _refuse_shared(arrays: dict[str, np.ndarray]) -> None:
    by_root: dict[int, list[str]] = defaultdict(list)
    for name, array in arrays.items():
        if array.size:
            by_root[id(root_array(array))].append(name)
    failing = [
        {
            name
            for name in names
            if any(
                np.shares_memory(arrays[name], arrays[other]) for other in names if other != name
            )
        }
        for names in by_root.values()
        if len(names) > 1
    ]
    failing = [names for names in failing if names]
    if failing:
        raise RuntimeError(
            "Some tensors share memory, this will lead to duplicate memory on disk and "
            f"potential differences when loading them again: {failing}.\n"
            "Save each shared storage under one name (or `.clone()` the others) and tie the "
            "weights again after loading."
        )
