"""Which internal path a module call takes once hooks come and go (hookgrad only, no torch).

The global tables report every change, so the global flags that choose the path are exact;
a module's own tables do not, so its flags are repaired by the call that finds them stale.
These tests pin that a removed backward, with_kwargs or always_call hook, global or local,
stops costing the general path, and which path the remaining hooks take.
"""

from __future__ import annotations

from typing import Any

import pytest

import hookgrad
from hookgrad import nn
from hookgrad.nn.modules import _global_hooks, _module_hooks
from hookgrad.nn.modules import module as registry


def _general_path_forbidden(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("took the general call path although only plain hooks remain")


def test_removing_the_global_backward_hook_returns_forward_hooks_to_the_short_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    forward = registry.register_module_forward_hook(lambda m, a, o: seen.append(type(m).__name__))
    try:
        registry.register_module_full_backward_hook(lambda m, gi, go: None).remove()
        layer = nn.Linear(2, 2)
        layer(hookgrad.ones(1, 2))
        assert registry.GLOBAL_HOOKS.complex is False
        monkeypatch.setattr(_module_hooks, "call_general", _general_path_forbidden)
        layer(hookgrad.ones(1, 2))
    finally:
        forward.remove()
    assert seen == ["Linear", "Linear"]


@pytest.mark.parametrize("options", [{"with_kwargs": True}, {"always_call": True}])
def test_removing_a_local_complex_hook_returns_the_module_to_the_short_path(
    monkeypatch: pytest.MonkeyPatch, options: dict[str, bool]
) -> None:
    layer = nn.Linear(2, 2)
    calls: list[str] = []
    layer.register_forward_hook(lambda *a: calls.append("plain"))
    layer.register_forward_hook(lambda *a: calls.append("complex"), **options).remove()
    layer(hookgrad.ones(1, 2))
    assert layer._hooks_complex is False
    monkeypatch.setattr(_module_hooks, "call_general", _general_path_forbidden)
    layer(hookgrad.ones(1, 2))
    assert calls == ["plain", "plain"]


def test_backward_hooks_only_path_lets_a_forward_error_through_unchanged() -> None:
    """No forward hook means no call state: the user's exception still propagates as is
    and the module works on the next call (E-1)."""

    class Failing(nn.Module):
        def forward(self, x: Any) -> Any:
            raise KeyError("from forward")

    fired: list[str] = []
    module = Failing()
    handle = registry.register_module_full_backward_hook(lambda m, gi, go: fired.append("bwd"))
    try:
        with pytest.raises(KeyError, match="from forward"):
            module(hookgrad.ones(1, requires_grad=True))
        layer = nn.Linear(1, 1)
        layer(hookgrad.ones(1, 1, requires_grad=True)).sum().backward()
    finally:
        handle.remove()
    assert fired == ["bwd"]


def test_editing_a_global_table_directly_updates_the_call_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Code written for torch sometimes clears ``_global_forward_hooks`` by hand; the flags
    follow, so module calls return to the fast path at once."""
    seen: list[str] = []
    registry.register_module_forward_hook(lambda m, a, o: seen.append("hook"))
    layer = nn.Linear(2, 2)
    layer(hookgrad.ones(1, 2))
    registry._global_forward_hooks.clear()
    assert registry.GLOBAL_HOOKS.active is False
    monkeypatch.setattr(registry, "call_with_hooks", _general_path_forbidden)
    layer(hookgrad.ones(1, 2))
    assert seen == ["hook"]


def test_a_call_keeps_the_global_hooks_it_started_with() -> None:
    """A global forward hook registered by a pre-hook runs from the next call on (H-5),
    although the global tables changed mid-call."""
    order: list[str] = []
    handles: list[Any] = []

    def pre(module: Any, args: Any) -> None:
        order.append("pre")
        if not handles:
            handles.append(registry.register_module_forward_pre_hook(late))

    def late(module: Any, args: Any) -> None:
        order.append("late")

    first = registry.register_module_forward_pre_hook(pre)
    try:
        layer = nn.Linear(1, 1)
        layer(hookgrad.ones(1, 1))
        layer(hookgrad.ones(1, 1))
    finally:
        first.remove()
        handles[0].remove()
    assert order == ["pre", "pre", "late"]


def test_replacing_a_global_backward_hook_changes_later_calls_only() -> None:
    """GLOBAL_HOOKS.replace_backward (the plugin bridge's per-call swap): a graph built before
    the swap calls the hook it captured (B-19); a removed hook is not brought back."""
    calls: list[str] = []
    handle = registry.register_module_full_backward_hook(lambda m, gi, go: calls.append("old"))
    try:
        layer = nn.Linear(1, 1)
        x = hookgrad.ones(1, 1, requires_grad=True)
        before = layer(x)
        table = registry.GLOBAL_HOOKS.backward
        registry.GLOBAL_HOOKS.replace_backward(
            ((table, handle.id),), lambda m, gi, go: calls.append("new")
        )
        after = layer(x)
        before.sum().backward()
        after.sum().backward()
    finally:
        handle.remove()
    registry.GLOBAL_HOOKS.replace_backward(
        ((table, handle.id),), lambda m, gi, go: calls.append("revived")
    )
    assert handle.id not in table
    assert calls == ["old", "new"]


def test_global_backward_hooks_alone_skip_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """With only global full/pre backward hooks, a module without hooks of its own goes
    straight to the backward-hook wrapping; a global forward hook or a local hook brings the
    general path back, and the hooks fire the same either way."""
    fired: list[str] = []
    handles = [
        registry.register_module_full_backward_pre_hook(lambda m, go: fired.append("pre")),
        registry.register_module_full_backward_hook(lambda m, gi, go: fired.append("full")),
    ]
    try:
        assert registry.GLOBAL_HOOKS.backward_only
        layer = nn.Linear(1, 1)
        x = hookgrad.ones(1, 1, requires_grad=True)
        with monkeypatch.context() as patch:
            patch.setattr(_module_hooks, "call_general", _general_path_forbidden)
            layer(x).sum().backward()
        forward = registry.register_module_forward_hook(lambda *a: None)
        assert not registry.GLOBAL_HOOKS.backward_only
        forward.remove()
        assert registry.GLOBAL_HOOKS.backward_only
        layer.register_forward_hook(lambda *a: None)
        layer(x).sum().backward()  # through the general path: the module has a hook
    finally:
        for handle in handles:
            handle.remove()
    assert not registry.GLOBAL_HOOKS.backward_only
    assert fired == ["pre", "full", "pre", "full"]


def test_hookgrad_global_pre_hook_with_kwargs_sees_and_replaces_them() -> None:
    """register_module_forward_pre_hook_with_kwargs (the plugin bridge's pre-hook, hookgrad
    only): hook(module, args, kwargs) may return (args, kwargs); removal clears its mark."""

    class Scale(nn.Module):
        def forward(self, x: Any, *, k: float = 1.0) -> Any:
            return x * k

    seen: list[dict[str, Any]] = []

    def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        seen.append(dict(kwargs))
        return args, {"k": kwargs["k"] * 10}

    handle = _global_hooks.register_module_forward_pre_hook_with_kwargs(hook)
    try:
        assert registry.GLOBAL_HOOKS.complex
        assert Scale()(hookgrad.tensor([2.0]), k=3.0).tolist() == [60.0]
    finally:
        handle.remove()
    assert seen == [{"k": 3.0}]
    assert not registry.GLOBAL_HOOKS.forward_pre_with_kwargs
    assert not registry.GLOBAL_HOOKS.complex
    assert Scale()(hookgrad.tensor([2.0]), k=3.0).tolist() == [6.0]
