"""What happens when a plugin fails: each plugin's ``on_error``, the same at every hook point.

A plugin *fails* when one of its hooks raises, or returns a replacement hookgrad cannot use
(wrong type, length or shape: see :mod:`hookgrad.hookspecs.specs`). Module hooks, the
training-loop points, ``hookgrad_configure`` and ``hookgrad_unconfigure`` all hand the failure
to :meth:`PluginFailures.failed`, which applies the plugin's ``on_error``:

* ``"raise"``: :class:`~hookgrad.hookspecs.PluginError` naming plugin, hook, phase, module and
  step, raised from the plugin's exception and an instance of its class as well;
* ``"warn"``: a :class:`PluginHookWarning` and an ``on_error_log`` entry; the run goes on
  without that call's result;
* ``"disable"``: the same, then the plugin is never called again by this runtime (its name
  joins ``disabled``); ``on_disable`` runs so hooks nobody listens to any more are removed.
  The engine runs every hook kind from a snapshot, so removing hooks inside a hook is safe.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, Protocol

from ..hookspecs import PluginAbort, PluginError

__all__ = ["OnErrorLog", "PluginFailures", "PluginHookWarning"]


class OnErrorLog(Protocol):
    """What the runtime calls when a plugin with ``on_error`` "warn" or "disable" failed."""

    def __call__(
        self, *, plugin: str, hook: str, module: str, phase: str, error: BaseException
    ) -> None: ...


class PluginHookWarning(UserWarning):
    """A plugin failed in a hook and its ``on_error`` is "warn" or "disable"."""


class PluginFailures:
    """Applies ``on_error`` to plugin failures (module docstring); holds ``disabled``."""

    __slots__ = ("disabled", "on_disable", "on_error_log")

    def __init__(self, on_error_log: OnErrorLog | None = None) -> None:
        self.on_error_log = on_error_log
        self.disabled: set[str] = set()
        self.on_disable: list[Callable[[], None]] = []

    def failed(
        self,
        plugin: str,
        on_error: str,
        error: Exception,
        *,
        hook: str,
        phase: str,
        module: str | None = None,
        module_type: str = "",
        step: int | None = None,
        stacklevel: int = 3,
    ) -> None:
        """Apply ``on_error`` to ``error``, which ``plugin`` raised (or caused) in ``hook``.

        A :class:`~hookgrad.hookspecs.PluginAbort` is no failure but the plugin's verdict
        (nan_guard's ``action = "raise"``): it propagates as raised, whatever ``on_error``.
        """
        if isinstance(error, PluginAbort):
            raise error
        if plugin in self.disabled:  # failed again before its hooks were removed
            return
        if on_error == "raise":
            where = _where(phase, module, module_type, step)
            raise PluginError.wrapping(
                error,
                f"plugin {plugin!r} failed in {hook} ({where}): {error!r}",
                plugin=plugin,
                hook=hook,
                phase=phase,
                module=module,
                step=step,
            ) from error
        disable = on_error == "disable"
        action = (
            "disabled it for the rest of this runtime" if disable else "went on without its result"
        )
        warnings.warn(
            PluginHookWarning(
                f"plugin {plugin!r} failed in {hook} ({_where(phase, module, module_type, step)})"
                f": {error!r}; hookgrad {action} (on_error={on_error!r})"
            ),
            stacklevel=stacklevel,
        )
        if self.on_error_log is not None:
            self.on_error_log(
                plugin=plugin, hook=hook, module=module or "", phase=phase, error=error
            )
        if disable:
            self.disabled.add(plugin)
            for refresh in self.on_disable:
                refresh()

    def event_failed(self, plugin: str, on_error: str, error: Exception, event: Any) -> None:
        """:meth:`failed` for a failure in the hook of ``event``, which says where it was."""
        self.failed(
            plugin,
            on_error,
            error,
            hook=event.hook,
            phase=event.phase,
            module=getattr(event, "module_name", None),
            module_type=getattr(event, "module_type", ""),
            step=event.step,
            stacklevel=4,
        )


def _where(phase: str, module: str | None, module_type: str, step: int | None) -> str:
    """``module 'fc' (Linear), phase 'forward', step 3`` - what a message says about a call."""
    parts = []
    if module is not None:
        parts.append(f"module {module!r}" + (f" ({module_type})" if module_type else ""))
    parts.append(f"phase {phase!r}")
    if step is not None:
        parts.append(f"step {step}")
    return ", ".join(parts)
