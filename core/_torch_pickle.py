"""The pickle half of torch's checkpoint format, spoken without torch.

A checkpoint's ``data.pkl`` names torch's rebuild functions (``torch._utils._rebuild_tensor_v2``)
and typed storages (``torch.FloatStorage``) as pickle globals, and refers to each storage's bytes
by a persistent id ``('storage', FloatStorage, key, location, numel)``. The pickler here writes
those very names, so ``torch.load`` reads what ``hookgrad.save`` wrote; the unpickler maps them
back to hookgrad, so ``hookgrad.load`` reads what ``torch.save`` wrote.

The unpickler of ``weights_only`` loads (the default) resolves only the globals of
:data:`_TORCH_GLOBALS` and :func:`safe_globals`; any other global, such as ``os.system``, is
refused before it is looked up: loading a file runs no code from it.
"""

from __future__ import annotations

import _codecs
import _compat_pickle
import collections
import importlib
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _dtype
from ._size import Size
from ._tensor import Tensor, _wrap

__all__ = [
    "StorageRef",
    "TorchPickler",
    "TorchUnpickler",
    "root_array",
    "safe_globals",
    "storage_name",
]

# torch's typed storage class per dtype name; bfloat16 is ml_dtypes' name for it.
_STORAGE_NAMES = {
    "float32": "FloatStorage",
    "float64": "DoubleStorage",
    "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage",
    "int64": "LongStorage",
    "int32": "IntStorage",
    "int16": "ShortStorage",
    "int8": "CharStorage",
    "uint8": "ByteStorage",
    "bool": "BoolStorage",
    "complex64": "ComplexFloatStorage",
    "complex128": "ComplexDoubleStorage",
}
_STORAGE_DTYPES = {storage: name for name, storage in _STORAGE_NAMES.items()}


def storage_name(dtype: np.dtype[Any]) -> str:
    """torch's typed storage for ``dtype`` (``FloatStorage``); TypeError for one torch lacks."""
    try:
        return _STORAGE_NAMES[dtype.name]
    except KeyError:
        raise TypeError(f"torch has no storage for tensors of dtype {dtype}") from None


class _Global:
    """A pickle global written by name (``torch._utils _rebuild_tensor_v2``): torch need not
    be importable where the checkpoint is written."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def __call__(self, *args: Any) -> Any:  # pickle's save_reduce wants a callable
        raise TypeError(f"{self.module}.{self.name} is only a name written into a checkpoint")


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
_ORDERED_DICT = _Global("collections", "OrderedDict")


class StorageRef:
    """One storage of a checkpoint: a flat C-contiguous array written as ``data/<key>``."""

    __slots__ = ("array", "key")

    def __init__(self, key: str, array: np.ndarray) -> None:
        self.key = key
        self.array = array


def root_array(data: np.ndarray) -> np.ndarray:
    """The array that owns ``data``'s memory (numpy's chain of bases)."""
    root = data
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root


def _placement(data: np.ndarray, root: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """``data``'s offset and strides in elements of ``root``, if it is a plain view of it."""
    size = data.itemsize
    if root.dtype != data.dtype or not root.flags.c_contiguous:
        return None
    offset = data.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    if offset < 0 or offset % size or any(s < 0 or s % size for s in data.strides):
        return None
    return offset // size, tuple(s // size for s in data.strides)


# The pure-Python pickler: its save() can write a global by name (see _Global).
_PurePickler: Any = pickle._Pickler


class TorchPickler(_PurePickler):
    """Pickles an object tree as torch's ``data.pkl``; :attr:`storages` collects the arrays to
    write beside it. Tensors that view one array share one storage, as in torch."""

    def __init__(self, file: Any, protocol: int) -> None:
        super().__init__(file, protocol)
        self.storages: dict[int, StorageRef] = {}

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is not StorageRef:
            return None
        storage = _Global("torch", storage_name(obj.array.dtype))
        return ("storage", storage, obj.key, "cpu", int(obj.array.size))

    def save(self, obj: Any, save_persistent_id: bool = True) -> None:
        if id(obj) in self.memo:
            super().save(obj, save_persistent_id)
        elif type(obj) is _Global:
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
            self.memoize(obj)
        elif isinstance(obj, Tensor):
            self.save_reduce(*self._tensor_reduce(obj), obj=obj)
        else:
            super().save(obj, save_persistent_id)

    def _tensor_reduce(self, t: Tensor) -> tuple[_Global, tuple[Any, ...]]:
        from .nn.parameter import Parameter

        if isinstance(t, Parameter):
            return _REBUILD_PARAMETER, (_wrap(t._data), t._requires_grad, _Hooks())
        data = t._data
        root = root_array(data)
        placement = _placement(data, root)
        if placement is None:
            root = np.ascontiguousarray(data)
            placement = (0, tuple(s // max(data.itemsize, 1) for s in root.strides))
        ref = self.storages.get(id(root))
        if ref is None:
            ref = self.storages[id(root)] = StorageRef(str(len(self.storages)), root)
        offset, stride = placement
        args = (ref, offset, tuple(data.shape), stride, t._requires_grad, _Hooks())
        return _REBUILD_TENSOR, args


class _Hooks:
    """An empty ``OrderedDict()`` as torch writes it (the tensor's backward hooks)."""

    def __reduce__(self) -> Any:
        return (_ORDERED_DICT, ())


# ---------------------------------------------------------------------------- reading


def _rebuild_tensor(
    storage: np.ndarray,
    offset: int,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    requires_grad: bool,
    backward_hooks: Any,
    metadata: Any = None,
) -> Tensor:
    """``torch._utils._rebuild_tensor_v2``: a view of ``storage``, checked to stay inside it
    (a crafted file must not make the view read memory beyond the storage)."""
    if not isinstance(storage, np.ndarray):
        raise pickle.UnpicklingError(f"a tensor's storage is {type(storage).__name__}")
    size = tuple(int(n) for n in size)
    stride = tuple(int(s) for s in stride)
    numel = int(np.prod(size, dtype=np.int64)) if size else 1
    last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    if min((offset, *stride, *size)) < 0 or (numel and last >= storage.size):
        raise pickle.UnpicklingError(
            f"tensor of size {list(size)}, stride {list(stride)} and offset {offset} "
            f"lies outside its storage of {storage.size} elements"
        )
    itemsize = storage.itemsize
    data = np.lib.stride_tricks.as_strided(
        storage[offset:], shape=size, strides=tuple(s * itemsize for s in stride)
    )
    t = _wrap(data)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data: Tensor, requires_grad: bool, backward_hooks: Any) -> Tensor:
    from .nn.parameter import Parameter

    return Parameter(data, requires_grad)


def _rebuild_parameter_with_state(
    data: Tensor, requires_grad: bool, backward_hooks: Any, state: Any
) -> Tensor:
    param = _rebuild_parameter(data, requires_grad, backward_hooks)
    if state:
        raise pickle.UnpicklingError(
            f"a Parameter with extra attributes {sorted(state)!r}: hookgrad keeps none"
        )
    return param


class _StorageType:
    """A global such as ``torch.FloatStorage``: it only names the dtype of a storage."""

    __slots__ = ("dtype_name",)

    def __init__(self, dtype_name: str) -> None:
        self.dtype_name = dtype_name

    def dtype(self) -> np.dtype[Any]:
        return _dtype.resolve_dtype(self.dtype_name)  # type: ignore[return-value]


def _torch_globals() -> dict[tuple[str, str], Any]:
    """The torch names a weights-only checkpoint may use, mapped to hookgrad's objects."""
    table: dict[tuple[str, str], Any] = {
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
        ("torch", "Size"): Size,
        ("torch", "device"): _dtype.device,
    }
    for storage, dtype_name in _STORAGE_DTYPES.items():
        table["torch", storage] = _StorageType(dtype_name)
    return table


_TORCH_GLOBALS = _torch_globals()

_MULTIARRAY: Any = importlib.import_module("numpy._core.multiarray")

_SAFE_GLOBALS: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "Counter"): collections.Counter,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "slice"): slice,
    ("builtins", "complex"): complex,
    ("builtins", "bytearray"): bytearray,
    ("_codecs", "encode"): _codecs.encode,  # how protocol 2 pickles bytes
    ("numpy", "dtype"): np.dtype,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy._core.multiarray", "_reconstruct"): _MULTIARRAY._reconstruct,
    ("numpy.core.multiarray", "_reconstruct"): _MULTIARRAY._reconstruct,
    ("numpy._core.multiarray", "scalar"): _MULTIARRAY.scalar,
    ("numpy.core.multiarray", "scalar"): _MULTIARRAY.scalar,
    ("hookgrad._size", "Size"): Size,
    ("hookgrad._dtype", "device"): _dtype.device,
}
_USER_SAFE: dict[tuple[str, str], Any] = {}


def safe_globals() -> dict[tuple[str, str], Any]:
    """The globals users allowed with ``hookgrad.serialization.add_safe_globals``."""
    return _USER_SAFE


_WEIGHTS_ONLY_HELP = (
    "Weights only load failed. In PyTorch 2.6, we changed the default value of the "
    "`weights_only` argument in `torch.load` from `False` to `True`. Re-running `torch.load` "
    "with `weights_only` set to `False` will likely succeed, but it can result in arbitrary "
    "code execution. Do it only if you got the file from a trusted source."
)


class TorchUnpickler(pickle.Unpickler):
    """Reads ``data.pkl``: torch's names become hookgrad's, storages come from ``load_storage``.
    With ``weights_only`` every other global must be on an allow-list."""

    def __init__(
        self, file: Any, load_storage: Callable[[Any], np.ndarray], weights_only: bool
    ) -> None:
        super().__init__(file)
        self._load_storage = load_storage
        self._weights_only = weights_only

    def find_class(self, module: str, name: str) -> Any:
        # Protocol 2 writes Python 2's names (``__builtin__.set``); read them as Python 3's.
        key = _compat_pickle.NAME_MAPPING.get((module, name))
        if key is None:
            key = (_compat_pickle.IMPORT_MAPPING.get(module, module), name)
        module, name = key
        for table in (_TORCH_GLOBALS, _SAFE_GLOBALS, _USER_SAFE):
            if key in table:
                return table[key]
        if self._weights_only:
            raise pickle.UnpicklingError(
                f"{_WEIGHTS_ONLY_HELP}\n\nUnsupported global: GLOBAL {module}.{name} was not "
                "an allowed global by default. Please use "
                f"`hookgrad.serialization.add_safe_globals([{name}])` to allowlist this "
                "global if you trust this class/function."
            )
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        return self._load_storage(pid)
