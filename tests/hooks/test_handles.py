"""RemovableHandle for module hooks: ids, context manager, weak references (H-1..H-4)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import Any

import pytest

import hookgrad
from hookgrad.utils.hooks import SnapshotHookDict


def test_handle_does_not_keep_module_alive():
    """A handle holds its hook table weakly: dropping the module frees it, remove() stays safe."""
    layer = hookgrad.nn.Linear(2, 2)
    handle = layer.register_forward_hook(lambda *a: None)
    alive = weakref.ref(layer)
    del layer
    gc.collect()
    assert alive() is None
    handle.remove()


def test_module_handle_ids_increase_across_hook_kinds(lib):
    """H-4: module, tensor and global registrations draw from one increasing counter."""
    layer = lib.nn.Linear(1, 1)
    ids = [
        layer.register_forward_pre_hook(lambda *a: None).id,
        layer.weight.register_hook(lambda g: None).id,
        layer.register_full_backward_hook(lambda *a: None).id,
    ]
    handle = lib.nn.modules.module.register_module_forward_hook(lambda *a: None)
    ids.append(handle.id)
    handle.remove()
    assert ids == sorted(ids) and len(set(ids)) == 4


def test_module_handle_context_manager_and_double_remove(lib):
    """H-1/H-3: `with` removes the hook on exit; a second remove() is harmless."""
    layer = lib.nn.Linear(1, 1)
    calls = []
    with layer.register_forward_hook(lambda *a: calls.append(1)) as handle:
        layer(lib.ones(1, 1))
    layer(lib.ones(1, 1))
    handle.remove()
    assert calls == [1]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda t: t.__setitem__(3, "c"), ("a", "b", "c")),
        (lambda t: t.__delitem__(1), ("b",)),
        (lambda t: t.__ior__({3: "c"}), ("a", "b", "c")),
        (lambda t: t.pop(2), ("a",)),
        (lambda t: t.pop(9, None), ("a", "b")),
        (lambda t: t.popitem(), ("a",)),
        (lambda t: t.setdefault(3, "c"), ("a", "b", "c")),
        (lambda t: t.update({1: "z"}), ("z", "b")),
        (lambda t: t.clear(), ()),
    ],
    ids=[
        "setitem",
        "delitem",
        "ior",
        "pop",
        "pop-missing",
        "popitem",
        "setdefault",
        "update",
        "clear",
    ],
)
def test_snapshot_table_keeps_its_tuple_current(
    mutate: Callable[[Any], Any], expected: tuple[str, ...]
) -> None:
    """Tables read on every call keep an immutable tuple of their hooks; every way of
    changing the table (a handle's remove() is a pop) rebuilds it, and a tuple taken
    earlier is left as it was (H-5)."""
    table = SnapshotHookDict()
    table[1], table[2] = "a", "b"
    before = table.hooks
    mutate(table)
    assert table.hooks == expected == tuple(table.values())
    assert before == ("a", "b")
