"""The order in which the runtime calls a hook's implementations: torch's, not pluggy's.

Within pluggy's three groups (``tryfirst``, unmarked, ``trylast``) an implementation may also
carry a :class:`Stage` (:func:`stage`), so that the gradient pipeline at the optimizer step runs
in one documented order whatever order the config lists the plugins in:
unscale -> guard -> pre-clip statistics -> clip (post-clip statistics are taken in
``hookgrad_optimizer_step_post``, when the gradients the step used are final).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Final, TypeVar

import pluggy

__all__ = ["STAGE_ATTRIBUTE", "Stage", "call_order", "stage"]

STAGE_ATTRIBUTE: Final = "hookgrad_stage"
"""The function attribute :func:`stage` sets and :func:`call_order` reads."""

_F = TypeVar("_F", bound=Callable[..., object])


class Stage(IntEnum):
    """Pipeline positions within a call-order group; lower runs first, unstaged is 0.

    The built-in plugins use them on ``hookgrad_optimizer_step_pre``: ``grad_scale`` unscales
    (tryfirst, UNSCALE), ``nan_guard`` checks (tryfirst, GUARD), ``grad_stats`` records the
    pre-clip gradients (STATS), ``grad_clip`` clips (trylast, CLIP). A third-party plugin that
    must see unscaled but unclipped gradients marks its implementation ``@stage(Stage.STATS)``.
    """

    UNSCALE = 10
    GUARD = 20
    STATS = 30
    CLIP = 40


def stage(position: int) -> Callable[[_F], _F]:
    """Place a hook implementation at ``position`` within its group (apply under ``@hookimpl``).

    ::

        @hookimpl(tryfirst=True)
        @stage(Stage.GUARD)
        def hookgrad_optimizer_step_pre(self, event): ...
    """

    def mark(function: _F) -> _F:
        setattr(function, STAGE_ATTRIBUTE, int(position))
        return function

    return mark


def call_order(pm: pluggy.PluginManager, hook_name: str) -> list[pluggy.HookImpl]:
    """The implementations of ``hook_name`` in the order hookgrad calls them, one by one.

    ``tryfirst=True`` implementations first, then unmarked ones, then ``trylast=True`` ones;
    within each group by :func:`stage` (unstaged ones at 0), then in plugin registration order
    (``pm.list_name_plugin()``), as torch runs hooks. pluggy's own ``pm.hook.NAME(...)`` runs
    the last-registered first, which is why the runtime does not use it.
    ``hookgrad_unconfigure`` runs in the reverse of this list. The answer changes only when
    plugins are registered or unregistered: cache it until then.

    Raises:
        pluggy.PluginValidationError: an implementation is a wrapper (``wrapper=True`` or
            ``hookwrapper=True``): wrappers cannot compose replacements one call at a time.
    """
    caller: pluggy.HookCaller = getattr(pm.hook, hook_name)
    position = {id(plugin): i for i, (_, plugin) in enumerate(pm.list_name_plugin())}
    impls = caller.get_hookimpls()
    for impl in impls:
        if impl.wrapper or impl.hookwrapper:
            raise pluggy.PluginValidationError(
                impl.plugin,
                f"{hook_name!r} of plugin {impl.plugin_name!r} is a wrapper; hookgrad calls "
                "implementations one by one and supports no wrappers",
            )
    return sorted(
        impls,
        key=lambda impl: (
            0 if impl.tryfirst else 2 if impl.trylast else 1,
            getattr(impl.function, STAGE_ATTRIBUTE, 0),
            position.get(id(impl.plugin), len(position)),
        ),
    )
