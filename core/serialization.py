"""``torch.save`` / ``torch.load`` in torch's own checkpoint format.

A checkpoint is torch's zip archive: ``<prefix>/data.pkl`` (the pickled object tree),
``<prefix>/data/<key>`` (the raw little-endian bytes of each storage), ``<prefix>/version`` and
``<prefix>/byteorder``. ``hookgrad.save`` writes it, so ``torch.load`` reads hookgrad's files
and ``hookgrad.load`` reads torch's.

Security: ``load`` defaults to ``weights_only=True``, as torch 2.6 and later do: it rebuilds
tensors, Parameters, containers, plain Python values and numpy arrays, and refuses any other
global the file names (such as ``os.system``) with ``pickle.UnpicklingError`` before running
it. ``weights_only=False`` unpickles anything: only for files from a trusted source.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from collections.abc import Iterable
from typing import IO, Any

import numpy as np

from . import _dtype
from ._torch_pickle import TorchPickler, TorchUnpickler, safe_globals

__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "load", "save"]

FileLike = str | os.PathLike[str] | IO[bytes]
_FORMAT_VERSION = b"3\n"


def save(obj: object, f: FileLike, pickle_module: Any = None, pickle_protocol: int = 2) -> None:
    """Write ``obj`` (tensors, state dicts, containers, plain values) to ``f``, a path or a
    binary file object, as a torch zip checkpoint."""
    if pickle_module is not None and pickle_module is not pickle:
        raise NotImplementedError("hookgrad.save writes with the standard pickle module only")
    buffer = io.BytesIO()
    pickler = TorchPickler(buffer, pickle_protocol)
    pickler.dump(obj)
    with _open(f, "wb") as stream, zipfile.ZipFile(stream, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", buffer.getvalue())
        archive.writestr("archive/byteorder", b"little")
        for ref in pickler.storages.values():
            array = ref.array
            if array.dtype.byteorder == ">":
                array = array.astype(array.dtype.newbyteorder("<"))
            archive.writestr(f"archive/data/{ref.key}", array.tobytes())
        archive.writestr("archive/version", _FORMAT_VERSION)


def load(
    f: FileLike,
    map_location: Any = None,
    pickle_module: Any = None,
    *,
    weights_only: bool | None = None,
    mmap: bool | None = None,
    **pickle_load_args: Any,
) -> Any:
    """Read a checkpoint written by ``hookgrad.save`` or ``torch.save``; every tensor lands on
    the CPU. ``weights_only`` (default True) refuses files that name code to run."""
    if pickle_module is not None and pickle_module is not pickle:
        raise NotImplementedError("hookgrad.load reads with the standard pickle module only")
    name = _name(f)
    with _open(f, "rb") as stream:
        try:
            archive = zipfile.ZipFile(stream)
        except zipfile.BadZipFile as err:
            raise _unreadable(name, _why_not_zip(stream, err)) from None
        with archive:
            return _Reader(archive, name, map_location).load(weights_only is not False)


def add_safe_globals(safe_globals_: Iterable[Any]) -> None:
    """Allow these classes or functions in ``weights_only`` loads (torch's
    ``torch.serialization.add_safe_globals``); a ``(obj, "module.name")`` pair names one
    stored under another name."""
    for entry in safe_globals_:
        obj, qualified = entry if isinstance(entry, tuple) else (entry, None)
        if qualified is None:
            qualified = f"{obj.__module__}.{obj.__qualname__}"
        module, _, attr = qualified.rpartition(".")
        safe_globals()[module, attr] = obj


def get_safe_globals() -> list[Any]:
    """The objects :func:`add_safe_globals` allowed."""
    return list(safe_globals().values())


def clear_safe_globals() -> None:
    """Forget every object :func:`add_safe_globals` allowed."""
    safe_globals().clear()


class _Reader:
    """One open checkpoint: finds its record prefix, reads storages once each."""

    def __init__(self, archive: zipfile.ZipFile, name: str, map_location: Any) -> None:
        self.archive = archive
        self.name = name
        self.map_location = map_location
        self.storages: dict[str, np.ndarray] = {}
        pickles = [n for n in archive.namelist() if n.endswith("data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise _unreadable(name, "the zip archive holds no torch checkpoint (no data.pkl)")
        self.prefix = pickles[0][: -len("data.pkl")]

    def load(self, weights_only: bool) -> Any:
        if self._record("byteorder", b"little").strip() != b"little":
            raise _unreadable(self.name, "it was written on a big-endian machine")
        unpickler = TorchUnpickler(
            io.BytesIO(self._record("data.pkl")), self._storage, weights_only
        )
        try:
            return unpickler.load()
        except (EOFError, ValueError, IndexError, KeyError) as err:
            raise _unreadable(self.name, f"its data.pkl is damaged ({err!r})") from None

    def _record(self, name: str, default: bytes | None = None) -> bytes:
        path = self.prefix + name
        if default is not None and path not in self.archive.NameToInfo:
            return default
        try:
            return self.archive.read(path)
        except (KeyError, zipfile.BadZipFile, EOFError, OSError) as err:
            raise _unreadable(self.name, f"record {path!r} cannot be read ({err})") from None

    def _storage(self, pid: tuple[Any, ...]) -> np.ndarray:
        _, storage_type, key, location, numel = pid
        self._check_location(str(location))
        if key not in self.storages:
            dtype = storage_type.dtype()
            raw = self._record(f"data/{key}")
            if len(raw) != numel * dtype.itemsize:
                raise _unreadable(
                    self.name,
                    f"storage {key!r} holds {len(raw)} bytes, not {numel} {dtype} elements",
                )
            self.storages[key] = np.frombuffer(bytearray(raw), dtype=dtype)
        return self.storages[key]

    def _check_location(self, location: str) -> None:
        """torch's refusal to place a CUDA storage without CUDA, unless ``map_location``
        sends it to the CPU (a device, a string, a dict or a callable, as torch accepts)."""
        target: Any = self.map_location
        if isinstance(target, dict):
            target = target.get(location, location)
        elif callable(target):
            return  # torch calls it with the storage; on the CPU every storage stays there
        elif target is None:
            target = location
        if not str(target).startswith("cpu"):
            if str(target).startswith("cuda"):
                raise RuntimeError(
                    "Attempting to deserialize object on a CUDA device but "
                    "torch.cuda.is_available() is False. If you are running on a CPU-only "
                    "machine, please use torch.load with map_location=torch.device('cpu') "
                    "to map your storages to the CPU."
                )
            _dtype.device(str(target))


def _name(f: FileLike) -> str:
    if isinstance(f, str | os.PathLike):
        return os.fspath(f)
    return str(getattr(f, "name", repr(f)))


def _open(f: FileLike, mode: str) -> Any:
    """A path opened in ``mode``, or the caller's file object (left open afterwards)."""
    if isinstance(f, str | os.PathLike):
        return open(f, mode)
    return _Borrowed(f)


class _Borrowed:
    """A caller's file object in a ``with`` block that does not close it."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f

    def __enter__(self) -> IO[bytes]:
        return self.f

    def __exit__(self, *exc: object) -> None:
        return None


def _why_not_zip(stream: IO[bytes], err: Exception) -> str:
    try:
        stream.seek(0)
        head = stream.read(8)
    except OSError:
        head = b""
    if not head:
        return "the file is empty"
    if head.startswith(b"PK"):
        return f"the zip archive is truncated or damaged ({err})"
    if head[:1] == b"\x80":
        return (
            "it is in torch's legacy (pre-1.6) format, which hookgrad does not read: "
            "re-save it with torch.save in torch 1.6 or later"
        )
    return "it is not a torch/hookgrad checkpoint (not a zip archive)"


def _unreadable(name: str, reason: str) -> RuntimeError:
    return RuntimeError(f"cannot load checkpoint {name!r}: {reason}")
