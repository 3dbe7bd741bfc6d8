"""The order in which the runtime calls a hook's implementations: torch's, not pluggy's."""

from __future__ import annotations

import pluggy

__all__ = ["call_order"]


def call_order(pm: pluggy.PluginManager, hook_name: str) -> list[pluggy.HookImpl]:
    """The implementations of ``hook_name`` in the order hookgrad calls them, one by one.

    ``tryfirst=True`` implementations first, then unmarked ones, then ``trylast=True`` ones;
    within each group, in plugin registration order (``pm.list_name_plugin()``), as torch runs
    hooks. pluggy's own ``pm.hook.NAME(...)`` runs the last-registered first, which is why the
    runtime does not use it. ``hookgrad_unconfigure`` runs in the reverse of this list. The
    answer changes only when plugins are registered or unregistered: cache it until then.

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
            position.get(id(impl.plugin), len(position)),
        ),
    )
