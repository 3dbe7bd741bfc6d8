"""``PluginError``: a plugin failed in a hook; the error names the culprit."""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["PluginError"]


class PluginError(RuntimeError):
    """A plugin failed in a hook and its ``on_error`` is "raise".

    The message and the fields name the culprit: ``plugin``, ``hook``, ``phase`` and, where
    they apply, ``module`` (the module call's qualified name) and ``step``. The runtime raises
    it ``from`` the plugin's own exception (``__cause__``), as an instance of that exception's
    class too, with its attributes: code that catches what the plugin raises (``ValueError``
    as torch's GradScaler raises it, nan_guard's ``NonFiniteGradientError``) still catches it.
    An attribute the original has keeps its value (nan_guard's ``phase`` is its finding's).
    """

    plugin: str | None = None
    hook: str | None = None
    phase: str | None = None
    module: str | None = None
    step: int | None = None

    @classmethod
    def wrapping(cls, error: Exception, message: str, **culprit: Any) -> PluginError:
        """The PluginError for ``error``: also an instance of ``type(error)`` when the two
        classes combine (not for a class with its own C layout, such as OSError)."""
        try:
            failure: PluginError = BaseException.__new__(_combined(type(error)))
            failure.__dict__.update(error.__dict__)
        except TypeError:
            failure = cls()
        failure.args = (message,)
        for field, value in culprit.items():  # the original's own attributes keep their values
            failure.__dict__.setdefault(field, value)
        return failure


@functools.cache
def _combined(kind: type[Exception]) -> type[PluginError]:
    """``PluginError[kind]``: a subclass of both (TypeError if their layouts conflict)."""
    if issubclass(kind, PluginError):
        return kind
    return type(
        f"PluginError[{kind.__name__}]",
        (PluginError, kind),
        {"__module__": PluginError.__module__, "__doc__": PluginError.__doc__},
    )
