"""Hook handles, as ``torch.utils.hooks``.

Every ``register_*`` call stores its hook in an ordered hook dictionary keyed by the handle's
id and returns a :class:`RemovableHandle`. The handle keeps only weak references to those
dictionaries, so holding a handle never keeps a module or tensor alive.
"""

from __future__ import annotations

import itertools
import weakref
from types import TracebackType
from typing import Any, Self

__all__ = ["HookDict", "RemovableHandle", "SnapshotHookDict"]


class HookDict(dict):
    """A plain dict that a handle can reference weakly (built-in dicts cannot be)."""

    __slots__ = ("__weakref__",)


class SnapshotHookDict(HookDict):
    """A hook table that keeps ``hooks``, an immutable tuple of its values, always current.

    For tables read on every call and changed rarely: a reader iterates ``hooks`` instead of
    copying the table, and a hook that adds or removes hooks meanwhile changes the next
    dispatch only (SEMANTICS H-5), as with a copy. Every mutating method rebuilds the tuple.
    """

    __slots__ = ("hooks",)

    def __init__(self) -> None:
        super().__init__()
        self.hooks: tuple[Any, ...] = ()

    def _changed(self) -> None:
        self.hooks = tuple(self.values())

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self._changed()

    def __ior__(self, other: Any) -> Self:  # type: ignore[misc]  # dict.__or__ returns a dict
        super().update(other)
        self._changed()
        return self

    def pop(self, *args: Any) -> Any:
        value = super().pop(*args)
        self._changed()
        return value

    def popitem(self) -> tuple[Any, Any]:
        item = super().popitem()
        self._changed()
        return item

    def setdefault(self, key: Any, default: Any = None) -> Any:
        value = super().setdefault(key, default)
        self._changed()
        return value

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._changed()

    def clear(self) -> None:
        super().clear()
        self._changed()


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


def new_args_and_kwargs(result: Any, who: str) -> tuple[Any, Any]:
    """A with-kwargs pre-hook's ``(new_args, new_kwargs)``, or torch's error naming ``who``.

    Module forward pre-hooks and optimizer step pre-hooks share the rule and the message.
    """
    if isinstance(result, tuple) and len(result) == 2:
        return result
    raise RuntimeError(
        f"{who} must return None or a tuple of (new_args, new_kwargs), but got {result}."
    )
