"""Hooks on a view that requires grad through its base but has no history (made under
``no_grad``, by ``unbind`` under ``no_grad``, or before the base required grad), against
torch 2.13: registration is accepted and the hook is kept, but no gradient ever reaches it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def _untracked_views(lib: Any) -> dict[str, Callable[[], tuple[Any, Any]]]:
    """name -> a maker of (leaf, view of it with no history)."""

    def of_leaf() -> tuple[Any, Any]:
        x = lib.ones(3, requires_grad=True)
        with lib.no_grad():
            return x, x[1:]

    def of_non_leaf() -> tuple[Any, Any]:
        x = lib.ones(3, requires_grad=True)
        y = x * 2
        with lib.no_grad():
            return x, y[1:]

    def unbind_piece() -> tuple[Any, Any]:
        x = lib.ones(2, 3, requires_grad=True)
        with lib.no_grad():
            return x, x.unbind()[1]

    def before_the_base_required_grad() -> tuple[Any, Any]:
        x = lib.ones(3)
        v = x[1:]
        return x.requires_grad_(), v

    return {
        "of_leaf": of_leaf,
        "of_non_leaf": of_non_leaf,
        "unbind_piece": unbind_piece,
        "before_the_base_required_grad": before_the_base_required_grad,
    }


@pytest.mark.parametrize(
    "kind", ["of_leaf", "of_non_leaf", "unbind_piece", "before_the_base_required_grad"]
)
def test_hooks_on_an_untracked_view_are_kept_and_never_run(lib: Any, kind: str) -> None:
    """register_hook, retain_grad and register_post_accumulate_grad_hook are accepted on such
    a view (it requires grad and is a leaf); a backward through it reaches none of them and
    fills no .grad, as torch's; the handles remove cleanly."""
    x, v = _untracked_views(lib)[kind]()
    assert (v.requires_grad, v.grad_fn, v.is_leaf) == (True, None, True)
    calls: list[str] = []
    handle = v.register_hook(lambda g: calls.append("pre"))
    post = v.register_post_accumulate_grad_hook(lambda t: calls.append("post"))
    v.retain_grad()
    (v * 2).sum().backward()
    assert calls == [] and v.grad is None and x.grad is None
    handle.remove()
    post.remove()


def test_a_view_of_an_untracked_view_made_with_grad_on_runs_its_hook(lib: Any) -> None:
    """The contrast: a view taken of it with grad mode on has a history, and its hook runs."""
    x = lib.ones(3, requires_grad=True)
    with lib.no_grad():
        v = x[1:]
    w = v[1:]
    seen: list[list[float]] = []
    w.register_hook(lambda g: seen.append(g.tolist()))
    (w * 2).sum().backward()
    assert seen == [[2.0]]


def test_register_hook_after_the_base_was_written_raises_torchs_error(
    fails_like_torch: Any,
) -> None:
    """Once the base was written in place, registering on a view made under no_grad is
    torch's refusal to give such a view a new history."""

    def register(L: Any) -> None:
        x = L.ones(3, requires_grad=True)
        with L.no_grad():
            v = x[1:]
            x.mul_(2)
        v.register_hook(lambda g: g)

    fails_like_torch(register)


def test_register_hook_on_a_view_of_a_tensor_without_grad_still_raises(lib: Any) -> None:
    """A view of a tensor that requires no grad keeps torch's T-7 refusal."""
    with lib.no_grad():
        v = lib.ones(3)[1:]
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        v.register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor"):
        v.retain_grad()
