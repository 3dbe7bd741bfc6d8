"""``PluginError``: a plugin failed in a hook; the error names the culprit."""

from __future__ import annotations

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

    def __reduce__(self) -> str | tuple[Any, ...]:
        """Pickle a ``PluginError[kind]`` by its parts: the class is made at run time."""
        kind = type(self)
        if _COMBINED.get(kind.__bases__[-1]) is kind:
            return (_rebuild, (kind.__bases__[-1], self.args, self.__dict__))
        return super().__reduce__()


_COMBINED: dict[type[Exception], type[PluginError]] = {}


def _combined(kind: type[Exception]) -> type[PluginError]:
    """``PluginError[kind]``, a subclass of both, made once per class (TypeError if their
    layouts conflict)."""
    if issubclass(kind, PluginError):
        return kind
    combined = _COMBINED.get(kind)
    if combined is None:
        namespace = {"__module__": PluginError.__module__, "__doc__": PluginError.__doc__}
        combined = _COMBINED[kind] = type(
            f"PluginError[{kind.__name__}]", (PluginError, kind), namespace
        )
    return combined


def _rebuild(kind: type[Exception], args: tuple[Any, ...], state: dict[str, Any]) -> PluginError:
    """Unpickle a ``PluginError[kind]`` (see ``PluginError.__reduce__``)."""
    failure: PluginError = BaseException.__new__(_combined(kind))
    failure.args = args
    failure.__dict__.update(state)
    return failure
