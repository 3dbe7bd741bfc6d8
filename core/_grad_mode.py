"""Grad mode: whether new operations record an autograd graph.

Like PyTorch, the flag is thread-local, so a `no_grad()` block in one thread never disables
recording in another. Every op reads it, so it lives on a `threading.local` subclass whose
class attribute supplies the default without a per-thread initialiser.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

__all__ = [
    "enable_grad",
    "inference_mode",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "no_grad",
    "set_grad_enabled",
]

_F = TypeVar("_F", bound=Callable[..., Any])


class _GradState(threading.local):
    enabled: bool = True
    inference: bool = False


_state = _GradState()


def is_grad_enabled() -> bool:
    """Return True when operations currently record gradients."""
    return _state.enabled


def is_inference_mode_enabled() -> bool:
    """Return True inside an ``inference_mode()`` block."""
    return _state.inference


class _GradModeContext:
    """Base for the grad-mode switches: a context manager that is also a decorator."""

    _target: bool

    def __init__(self) -> None:
        self._previous: list[bool] = []

    def __enter__(self) -> None:
        self._previous.append(_state.enabled)
        _state.enabled = self._target

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _state.enabled = self._previous.pop()

    def __call__(self, func: _F) -> _F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class no_grad(_GradModeContext):
    """Disable gradient recording inside the block or the decorated function."""

    _target = False


class enable_grad(_GradModeContext):
    """Enable gradient recording inside the block, e.g. within a `no_grad` region."""

    _target = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode to `mode`; takes effect at once, and as a context manager restores on exit."""

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self._target = bool(mode)
        self._previous.append(_state.enabled)
        _state.enabled = self._target

    def __enter__(self) -> None:
        # The switch already happened in __init__ (torch semantics); nothing more to do.
        return None

    def __call__(self, func: _F) -> _F:
        # Used as a decorator the constructor must not leave the mode switched.
        _state.enabled = self._previous.pop()
        mode = self._target

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(mode):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class inference_mode(_GradModeContext):
    """torch's inference mode, here as ``no_grad`` that also answers
    ``is_inference_mode_enabled()``: nothing inside records a graph. ``inference_mode(False)``
    changes nothing. Like torch's it decorates with or without parentheses."""

    def __new__(cls, mode: Any = True) -> Any:
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # @inference_mode without parentheses: mode is the function

    def __init__(self, mode: bool = True) -> None:
        super().__init__()
        self._mode = mode
        self._target = False
        self._previous_inference: list[bool] = []

    def __enter__(self) -> None:
        self._previous_inference.append(_state.inference)
        self._previous.append(_state.enabled)
        if self._mode:
            _state.enabled = False
            _state.inference = True

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _state.enabled = self._previous.pop()
        _state.inference = self._previous_inference.pop()

    def __call__(self, func: _F) -> _F:
        mode = self._mode

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(mode):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
