"""Warnings that point at the user's code and cost little when silenced.

torch warns on every backward of a module whose inputs need no gradient (SEMANTICS B-9), so
hookgrad does too; training loops then silence it with ``warnings.simplefilter("ignore", ...)``.
``warnings.warn`` still walks the stack to find the caller's module before it consults the
filters, about a microsecond per call. When the first filter matching the message and category
needs no caller information (no module pattern, no line number) and says "ignore", the warning
would be dropped whatever the caller, so it is dropped here without the walk. Every other case
(a module-specific filter, "error", "always", ``pytest.warns``) goes through ``warnings.warn``.

A warning raised deep inside hookgrad on behalf of the user's call (a backward, an optimizer
step) points at that call, as torch's do: :func:`user_stacklevel` counts hookgrad's frames.
That walk is most of a warning's cost (each frame it reads becomes a frame object). A caller
that already knows the user's frame (the engine keeps it for the rest of a backward call once
found) passes it to :func:`warn_at_frame`, which issues the warning there without a walk, as
``warnings.warn`` with the matching stacklevel would.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from collections.abc import Callable
from types import FrameType

__all__ = [
    "first_frame_outside_hookgrad",
    "is_warn_always_enabled",
    "set_warn_always",
    "user_stacklevel",
    "warn_at_frame",
    "warn_unless_ignored",
]

_warn_always = False


def set_warn_always(b: bool) -> None:
    """Make warnings torch issues once per process (its ``TORCH_WARN_ONCE``) warn every time
    (``torch.set_warn_always``); a code path warning once consults
    :func:`is_warn_always_enabled`."""
    global _warn_always
    _warn_always = bool(b)


def is_warn_always_enabled() -> bool:
    """Whether :func:`set_warn_always` is on (default False)."""
    return _warn_always


# Python 3.14 can keep filters per context; ``warnings.filters`` is then not the whole story.
_FILTERS_ARE_GLOBAL = not getattr(sys.flags, "context_aware_warnings", False)

# hookgrad's three packages; an editable install keeps them in three folders.
_PACKAGES = ("hookgrad", "hookgrad.hookspecs", "hookgrad.plugins")


def warn_unless_ignored(
    message: str, category: type[Warning], stacklevel: int | None = None
) -> None:
    """``warnings.warn(message, category, stacklevel)``, skipped when a global filter ignores it.

    ``stacklevel`` counts from the caller, as for ``warnings.warn``; None points the warning
    at the first frame outside hookgrad.
    """
    if _FILTERS_ARE_GLOBAL and _globally_ignored(message, category):
        return
    level = user_stacklevel() if stacklevel is None else stacklevel + 1
    warnings.warn(message, category, stacklevel=level)


def warn_at_frame(
    message: str, category: type[Warning], user_frame: Callable[[], FrameType | None]
) -> None:
    """``warnings.warn(message, category, stacklevel=...)`` pointing at ``user_frame()``,
    skipped when a global filter ignores it (``user_frame`` is then not called).

    What ``warnings.warn`` does with its stack level, done for a known frame: the frame's
    file, line, module name and ``__warningregistry__`` (made if missing) go to
    ``warnings.warn_explicit``, so filters, "default"/"module"/"once" registries and
    ``showwarning`` act exactly as for ``warnings.warn``. None stands for "no frame outside
    hookgrad", which ``warnings.warn`` attributes to ``sys``.
    """
    if _FILTERS_ARE_GLOBAL and _globally_ignored(message, category):
        return
    frame = user_frame()
    if frame is None:
        context, filename, lineno = sys.__dict__, "sys", 1
    else:
        context, filename, lineno = frame.f_globals, frame.f_code.co_filename, frame.f_lineno
    registry = context.get("__warningregistry__", _MISSING)
    if registry is _MISSING:
        registry = context["__warningregistry__"] = {}
    module = context.get("__name__", _MISSING)
    if module is not None and not isinstance(module, str):
        module = "<string>"
    warnings.warn_explicit(message, category, filename, lineno, module, registry)


_MISSING = object()


# (message, category) -> (the filters it was decided for, whether they ignore it everywhere).
# Filters change rarely and every change makes new entries, so comparing the entries by
# identity tells a stale decision; a warning raised every step then scans them once.
_DECISIONS: dict[tuple[str, type[Warning]], tuple[tuple[object, ...], bool]] = {}


def _globally_ignored(message: str, category: type[Warning]) -> bool:
    """Whether the first filter matching ``message`` and ``category`` ignores it, whatever the
    caller (no module pattern, no line number)."""
    filters = tuple(warnings.filters)
    key = (message, category)
    decided = _DECISIONS.get(key)
    if decided is not None and decided[0] == filters:
        return decided[1]
    ignored = False
    for action, pattern, filter_category, module, lineno in filters:
        if (pattern is None or pattern.match(message)) and issubclass(category, filter_category):
            ignored = action == "ignore" and module is None and lineno == 0
            break
    if len(_DECISIONS) >= 64:  # messages with varying text: keep the cache small
        _DECISIONS.clear()
    _DECISIONS[key] = (filters, ignored)
    return ignored


def _hookgrad_folders() -> tuple[str, ...]:
    """The folders of hookgrad's packages, found once (an editable install has three)."""
    global _FOLDERS
    if _FOLDERS is None:
        specs = [importlib.util.find_spec(name) for name in _PACKAGES]
        _FOLDERS = tuple(
            os.path.abspath(location) + os.sep
            for spec in specs
            if spec is not None
            for location in spec.submodule_search_locations or ()
        )
    return _FOLDERS


_FOLDERS: tuple[str, ...] | None = None


def user_stacklevel() -> int:
    """The ``stacklevel`` that points a ``warnings.warn`` made by the caller of this function
    at the first frame outside hookgrad (the user's ``loss.backward()``, ``optimizer.step()``).

    Counted rather than fixed: how deep hookgrad's own frames go is not part of any contract.
    """
    folders = _hookgrad_folders()
    level = 1  # the function calling warnings.warn
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(folders):
        level += 1
        frame = frame.f_back  # type: ignore[assignment]
    return level


def first_frame_outside_hookgrad(frame: FrameType | None) -> FrameType | None:
    """``frame`` or the nearest frame it was called from that is not hookgrad's; None if
    there is none. The frame :func:`user_stacklevel` points at, seen from ``frame``."""
    folders = _hookgrad_folders()
    while frame is not None and frame.f_code.co_filename.startswith(folders):
        frame = frame.f_back
    return frame
