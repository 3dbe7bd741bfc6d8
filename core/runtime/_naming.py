"""Which module call is this: qualified name and call index, for plugin events.

:class:`ModuleNamer` follows module calls as they begin (:meth:`~ModuleNamer.enter`) and end
(:meth:`~ModuleNamer.exit`). A call that starts with no call in progress is an *outermost*
call: its module is the root, named ``""``, and the call counters restart. Inside it, a module
is named by its dotted path from the root (``root.named_modules()``). A module called inside
the root's forward but outside its structure (a module kept in a plain list, built on the fly)
opens a scope of its own: it is named ``""`` and its submodules relative to it. A module
called on its own (a loss after the model) is an outermost call and so is a root too.

Name tables are cached per root (weakly: the cache never keeps a model alive) and checked
in O(1) per lookup rather than rebuilt: every entry remembers the ``_modules`` dict of the
parent it was found in and its key there, and an entry whose parent no longer holds that
module under that key (``del model.fc``, ``model.fc = other``) triggers a rebuild. A module
missing from the table (added after the table was built) triggers at most one rebuild per
outermost call; if it is still missing, it opens its own scope as above. Hooking
``add_module`` instead would mean changing the engine's attribute path for every model,
and cannot see ``_modules`` edited directly.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ..engines import Engine, HandleGroup
from ._threads import current_thread

__all__ = ["CallStack", "ModuleNamer", "RootSpotter"]

# id(module) -> (qualified name, the parent's ``_modules`` dict or None for the root, key)
_Table = dict[int, tuple[str, dict[str, Any] | None, str]]


def _build_table(root: Any) -> _Table:
    """Qualified names of ``root`` and its submodules (first name wins for shared ones)."""
    table: _Table = {id(root): ("", None, "")}
    for prefix, module in root.named_modules():
        for key, child in module._modules.items():
            if child is not None and id(child) not in table:
                table[id(child)] = (f"{prefix}.{key}" if prefix else key, module._modules, key)
    return table


class _Scope:
    """One naming root during an outermost call: its table, and whether it was rebuilt."""

    __slots__ = ("rebuilt", "root", "table")

    def __init__(self, root: Any, table: _Table) -> None:
        self.root = root
        self.table = table
        self.rebuilt = False


class ModuleNamer:
    """The name tables of the naming roots, shared by the call stacks of every thread.

    :meth:`calls` makes one :class:`CallStack` per thread: the calls in progress are a
    thread's own, the names of a model are the same in every thread.
    """

    __slots__ = ("_roots_added", "_tables")

    def __init__(self) -> None:
        self._tables: weakref.WeakKeyDictionary[Any, _Table] = weakref.WeakKeyDictionary()
        self._roots_added = 0  # how many roots were ever added: see roots_key

    def calls(self) -> CallStack:
        """A new, empty stack of calls in progress, naming from these tables."""
        return CallStack(self)

    def roots(self) -> list[Any]:
        """The modules seen as naming roots (outermost calls) that are still alive."""
        return list(self._tables.keys())

    def roots_key(self) -> tuple[int, int]:
        """Changes whenever :meth:`roots` does (a root added or gone), without listing them:
        iterating a WeakKeyDictionary costs microseconds, a step's budget for this nothing."""
        return self._roots_added, len(self._tables)

    def _scope(self, root: Any) -> _Scope:
        table = self._tables.get(root)
        if table is None:
            table = self._tables[root] = _build_table(root)
            self._roots_added += 1
        return _Scope(root, table)

    def _lookup(self, scope: _Scope, module: Any) -> tuple[str, _Scope]:
        entry = scope.table.get(id(module))
        if entry is not None:
            name, parent, key = entry
            if parent is None or parent.get(key) is module:
                return name, scope
        if not scope.rebuilt:  # the structure changed since the table was built
            scope.rebuilt = True
            table = scope.table = self._tables[scope.root] = _build_table(scope.root)
            entry = table.get(id(module))
            if entry is not None:
                return entry[0], scope
        return "", self._scope(module)  # outside the root's structure: a root of its own


class CallStack:
    """One thread's module calls in progress: ``enter(module)`` -> ``(name, call index)``."""

    __slots__ = ("_counts", "_namer", "_stack")

    def __init__(self, namer: ModuleNamer) -> None:
        self._namer = namer
        # One (module, scope, name, call index) frame per call in progress, innermost last.
        self._stack: list[tuple[Any, _Scope, str, int]] = []
        self._counts: dict[int, int] = {}

    @property
    def depth(self) -> int:
        """How many module calls are in progress."""
        return len(self._stack)

    def reset(self) -> None:
        """Forget the calls in progress (the hooks that report call ends were removed)."""
        self._stack.clear()
        self._counts.clear()

    def enter(self, module: Any) -> tuple[str, int]:
        """A call of ``module`` begins: its qualified name and which call of it this is."""
        stack = self._stack
        if not stack:
            self._counts.clear()
            name, scope = "", self._namer._scope(module)
        else:
            name, scope = self._namer._lookup(stack[-1][1], module)
        key = id(module)
        index = self._counts.get(key, 0)
        self._counts[key] = index + 1
        stack.append((module, scope, name, index))
        return name, index

    def exit(self, module: Any) -> tuple[str, int] | None:
        """The call of ``module`` ended (returned or raised): its name and call index.

        None when the innermost call in progress is not one of ``module`` (its start was not
        seen, e.g. an earlier forward pre-hook raised); the call stack is then left alone.
        """
        stack = self._stack
        if stack and stack[-1][0] is module:
            _, _, name, index = stack.pop()
            return name, index
        return None


class RootSpotter:
    """Reports each module called as an outermost call (a model, a loss) while installed.

    Parameters of the optimizer events are named after models; when no plugin implements a
    module hook, nothing else sees a model called. The runtime installs a spotter until the
    first optimizer step: module calls of that first step go through the global hooks' slow
    path, later ones keep the fast path. ``remove()`` uninstalls it (idempotent).
    It watches the module calls of each of ``engines`` (:meth:`Engine.observe_module_calls`).
    """

    __slots__ = ("_acts_here", "_depths", "_found", "_handles")

    def __init__(
        self,
        found: Callable[[Any], None],
        acts_here: Callable[[], bool],
        engines: Sequence[Engine],
    ) -> None:
        self._found = found
        self._acts_here = acts_here  # the owner check (see ._threads)
        self._depths: dict[int, int] = {}  # thread key -> module calls in progress there
        self._handles = HandleGroup(
            e.observe_module_calls(self._enter, self._exit) for e in engines
        )

    def _enter(self, module: Any) -> None:
        if not self._acts_here():
            return
        key = current_thread()
        depth = self._depths.get(key, 0)
        if depth == 0:
            self._found(module)
        self._depths[key] = depth + 1

    def _exit(self, module: Any) -> None:
        key = current_thread()
        depth = self._depths.get(key)
        if depth:
            self._depths[key] = depth - 1

    def remove(self) -> None:
        self._handles.remove()
