"""The event log's file: whole lines appended with ``O_APPEND``, flushed when a step ends.

Why not a buffered text file: its buffer is written out in 8 KiB pieces that cut lines, two
threads writing one file interleave inside a line, a process killed between steps loses up to
the whole buffer, and a forked child writes the parent's buffer a second time. Here records
wait as whole lines in a list until :meth:`LogFile.flush` hands them to the OS in one
``write()`` on a descriptor opened with ``O_APPEND``: the kernel appends each write whole at
the end of the file, so lines from threads, runtimes or processes sharing the file never mix
inside a line, and a kill loses only the lines not yet flushed. A lock orders the flushes of
one file object; a forked child forgets the lines its parent still holds (the parent writes
them).

Durability (``[events] durability``) says when :meth:`LogFile.flush` runs: at the end of every
step (``"step"``, the default: a completed step is in the OS's hands, so it survives the
process being killed), the same plus ``fsync`` (``"fsync"``: survives a power loss too), or
when 64 KiB are waiting (``"buffered"``: cheapest, a crash loses up to 64 KiB).

A file that already exists is appended to only if it is a hookgrad log (:func:`refusal`): a
config pointing ``events.jsonl`` at ``train.py`` must not corrupt it.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import weakref
from pathlib import Path
from typing import Final, Literal, TypeAlias

__all__ = ["BUFFER_BYTES", "Durability", "LogFile", "LogFileError", "refusal"]

Durability: TypeAlias = Literal["step", "fsync", "buffered"]

BUFFER_BYTES: Final = 1 << 16
"""How much ``"buffered"`` durability lets wait before writing."""

_PEEK_BYTES: Final = 1 << 16  # how much of an existing file is read to recognise a log
_FLAGS: Final = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


class LogFileError(ValueError):
    """hookgrad will not write its event log at this path; the message says why."""


def refusal(path: Path) -> str | None:
    """Why an event log cannot go to ``path`` (None if it can), without changing anything.

    A path that is a folder, an existing file that is not a hookgrad log (its first line is
    not a hookgrad record), or a place hookgrad may not write to is refused.
    """
    if path.is_dir():
        return "it is a folder"
    if path.exists():
        if not os.access(path, os.W_OK):
            return "the file is not writable"
        if not path.is_file():  # a terminal, a pipe, /dev/null: a stream, nothing to spoil
            return None
        with path.open("rb") as file:
            head = file.read(_PEEK_BYTES)
        return _not_a_log(head)
    folder = _existing_ancestor(path.parent)
    if not folder.is_dir():
        return f"{str(folder)!r} is not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {str(folder)!r} is not writable"
    return None


def _existing_ancestor(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _not_a_log(head: bytes) -> str | None:
    """Why the bytes a file starts with are not a hookgrad log's (None if they are)."""
    if not head:
        return None
    first = head.split(b"\n", 1)[0]
    try:
        record = json.loads(first)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError alike
        if b"\n" not in head and head == first:
            return None if _is_cut_record(first) else "its first line is not JSON"
        return "its first line is not a JSON record"
    if isinstance(record, dict) and ("step" in record or "level" in record):
        return None
    return "its first line is not a hookgrad record"


def _is_cut_record(line: bytes) -> bool:
    """A lone, unterminated line that starts like a record: the only line of a crashed log."""
    return line.startswith(b'{"')


class LogFile:
    """An append-only JSON-lines file that writes whole lines (see the module docstring).

    Raises LogFileError when :func:`refusal` refuses the path, OSError when the OS does.
    A last line cut by a crash (the file does not end in a newline) is removed on opening, so
    the lines appended now do not glue onto it.
    """

    __slots__ = ("__weakref__", "_fd", "_fsync", "_limit", "_lock", "_pending", "_size", "path")

    def __init__(self, path: Path, durability: Durability = "step") -> None:
        reason = refusal(path)
        if reason is not None:
            raise LogFileError(f"{str(path)!r}: {reason}; hookgrad will not write its log there")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd: int | None = os.open(path, _FLAGS, 0o644)
        self._fsync = durability == "fsync"
        self._limit = BUFFER_BYTES if durability == "buffered" else None
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._size = 0
        _drop_cut_tail(self._fd)
        _OPEN.add(self)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def append(self, line: str, *, urgent: bool = False) -> None:
        """Queue one line (newline included); ``urgent`` flushes it at once."""
        with self._lock:
            if self._fd is None:
                raise ValueError(f"the event log {str(self.path)!r} is closed")
            self._pending.append(line)
            self._size += len(line)
            if urgent or (self._limit is not None and self._size >= self._limit):
                self._write_pending()

    def flush(self) -> None:
        """Hand every queued line to the OS in one write (and fsync under ``"fsync"``)."""
        with self._lock:
            if self._fd is not None:
                self._write_pending()

    def close(self) -> None:
        """Flush and close; calling it again does nothing."""
        with self._lock:
            if self._fd is not None:
                try:
                    self._write_pending()
                finally:
                    os.close(self._fd)
                    self._fd = None
                    _OPEN.discard(self)

    def _write_pending(self) -> None:
        if not self._pending:
            return
        data = "".join(self._pending).encode("utf-8", "backslashreplace")
        self._pending.clear()
        self._size = 0
        assert self._fd is not None
        _write_all(self._fd, data)
        if self._fsync:
            os.fsync(self._fd)

    def _forget_parents_lines(self) -> None:
        """In a forked child: the queued lines are the parent's to write, not ours."""
        self._lock = threading.Lock()  # another thread may have held it at fork
        self._pending.clear()
        self._size = 0


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written (a short write continues, in order)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _drop_cut_tail(fd: int) -> None:
    """Truncate an unterminated last line (left by a crash mid-write) before appending."""
    status = os.fstat(fd)
    size = status.st_size
    if not stat.S_ISREG(status.st_mode) or size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(0, size - _PEEK_BYTES)
    tail = os.pread(fd, size - start, start)
    newline = tail.rfind(b"\n")
    os.truncate(fd, start + newline + 1 if newline >= 0 else 0)


_OPEN: weakref.WeakSet[LogFile] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for log in list(_OPEN):
        log._forget_parents_lines()


os.register_at_fork(after_in_child=_after_fork_in_child)
