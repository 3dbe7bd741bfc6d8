"""``warnings.warn`` for warnings raised on every call, which users usually silence.

torch warns on every backward of a module whose inputs need no gradient (SEMANTICS B-9), so
hookgrad does too; training loops then silence it with ``warnings.simplefilter("ignore", ...)``.
``warnings.warn`` still walks the stack to find the caller's module before it consults the
filters, about a microsecond per call. When the first filter matching the message and category
needs no caller information (no module pattern, no line number) and says "ignore", the warning
would be dropped whatever the caller, so it is dropped here without the walk. Every other case
(a module-specific filter, "error", "always", ``pytest.warns``) goes through ``warnings.warn``.
"""

from __future__ import annotations

import sys
import warnings

__all__ = ["warn_unless_ignored"]

# Python 3.14 can keep filters per context; ``warnings.filters`` is then not the whole story.
_FILTERS_ARE_GLOBAL = not getattr(sys.flags, "context_aware_warnings", False)


def warn_unless_ignored(message: str, category: type[Warning], stacklevel: int = 1) -> None:
    """``warnings.warn(message, category, stacklevel)``, skipped when a global filter ignores it."""
    if _FILTERS_ARE_GLOBAL:
        for action, pattern, filter_category, module, lineno in warnings.filters:
            if (pattern is None or pattern.match(message)) and issubclass(
                category, filter_category
            ):
                if action == "ignore" and module is None and lineno == 0:
                    return
                break
    warnings.warn(message, category, stacklevel=stacklevel + 1)
