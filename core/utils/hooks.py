"""Hook handles, as ``torch.utils.hooks``.

Every ``register_*`` call stores its hook in an ordered hook dictionary keyed by the handle's
id and returns a :class:`RemovableHandle`. The handle keeps only weak references to those
dictionaries, so holding a handle never keeps a module or tensor alive.
"""

from __future__ import annotations

import itertools
import weakref
from types import TracebackType
from typing import Any

__all__ = ["HookDict", "RemovableHandle"]


class HookDict(dict):
    """A plain dict that a handle can reference weakly (built-in dicts cannot be)."""

    __slots__ = ("__weakref__",)


class RemovableHandle:
    """A handle which provides the capability to remove a hook.

    Args:
        hooks_dict: the dictionary of hooks, indexed by the handle's id.
        extra_dict: further dictionaries (flag side tables such as ``with_kwargs``) whose
            entry under the same id must go when the hook goes.
    """

    __slots__ = ("__weakref__", "extra_dict_ref", "hooks_dict_ref", "id")

    _next_id = itertools.count()

    id: int

    def __init__(
        self,
        hooks_dict: HookDict,
        *,
        extra_dict: HookDict | list[HookDict] | tuple[HookDict, ...] | None = None,
    ) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(RemovableHandle._next_id)
        if extra_dict is None:
            extras: tuple[HookDict, ...] = ()
        elif isinstance(extra_dict, dict):
            extras = (extra_dict,)
        else:
            extras = tuple(extra_dict)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extras)

    def remove(self) -> None:
        """Remove the hook; harmless when called twice or after the owner is gone."""
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            table = ref()
            if table is not None:
                table.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove()

    def __getstate__(self) -> Any:
        raise TypeError("RemovableHandle cannot be pickled: it refers to live hook tables")

    def __repr__(self) -> str:
        return f"<RemovableHandle id={self.id}>"
