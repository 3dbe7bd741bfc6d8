"""backward() calls, handles and exceptions: SEMANTICS.md N-1..N-3, H-1..H-6, E-1, E-2, O-1."""

from __future__ import annotations

import pytest


def test_implicit_gradient_needs_one_element(lib):
    """N-1: shapes [] and [1] work; anything larger raises RuntimeError."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x[:1] * 2).backward()
    x.sum().backward()
    assert x.grad.tolist() == [3.0, 1.0]
    with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
        (x * 2).backward()


def test_second_backward_needs_retain_graph(lib):
    """N-2: a second backward raises unless retain_graph; with it every hook fires again."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    calls = []
    y.register_hook(lambda g: calls.append(g.tolist()))
    loss = y.sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert calls == [[1.0, 1.0], [1.0, 1.0]]
    assert x.grad.tolist() == [4.0, 8.0]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_backward_inside_no_grad_fires_hooks(lib):
    """N-3: backward inside no_grad on a graph built outside works normally."""
    x = lib.tensor([3.0], requires_grad=True)
    y = x * x
    seen = []
    y.register_hook(lambda g: seen.append(g.item()))
    loss = y.sum()
    with lib.no_grad():
        loss.backward()
    assert seen == [1.0]
    assert x.grad.tolist() == [6.0]


def test_removed_hook_never_fires_and_remove_is_idempotent(lib):
    """H-1/H-2: remove() stops the hook, and calling it twice is harmless."""
    x = lib.tensor([1.0], requires_grad=True)
    calls = []
    handle = x.register_hook(lambda g: calls.append(1))
    handle.remove()
    handle.remove()
    (x * 2).sum().backward()
    assert calls == []


def test_handle_is_context_manager(lib):
    """H-3: __enter__ returns the handle and __exit__ removes the hook."""
    x = lib.tensor([1.0], requires_grad=True)
    calls = []
    with x.register_hook(lambda g: calls.append(1)) as handle:
        assert handle is not None
        (x * 2).sum().backward()
    (x * 2).sum().backward()
    assert calls == [1]


def test_handle_ids_strictly_increase_across_kinds(lib):
    """H-4: one process-wide counter shared by every hook kind."""
    x = lib.tensor([1.0], requires_grad=True)
    ids = [
        x.register_hook(lambda g: None).id,
        x.register_post_accumulate_grad_hook(lambda t: None).id,
        (x * 2).grad_fn.register_hook(lambda gi, go: None).id,
        x.register_hook(lambda g: None).id,
    ]
    assert all(isinstance(i, int) for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == 4


def test_hooks_added_or_removed_during_dispatch_apply_next_time(lib):
    """H-5/H-6: the hook list is snapshotted; a self-removing hook is one-shot."""
    x = lib.tensor([1.0], requires_grad=True)
    log = []
    handles = {}

    def one_shot(g):
        log.append("one_shot")
        handles["one_shot"].remove()
        handles["late"] = x.register_hook(lambda g: log.append("late"))

    handles["one_shot"] = x.register_hook(one_shot)
    (x * 2).sum().backward()
    (x * 2).sum().backward()
    assert log == ["one_shot", "late"]


class _HookError(Exception):
    pass


def test_exception_in_tensor_hook_propagates_and_keeps_grad(lib):
    """E-1: the original exception class propagates; the raising leaf's .grad is unchanged."""
    x = lib.tensor([1.0], requires_grad=True)
    (x * 2).sum().backward()

    def boom(g):
        raise _HookError("boom")

    x.register_hook(boom)
    with pytest.raises(_HookError):
        (x * 3).sum().backward()
    assert x.grad.tolist() == [2.0]


def test_gradients_accumulated_before_failure_stay(lib):
    """E-2: a leaf that finished before the failing hook keeps its gradient."""
    w = lib.tensor([2.0], requires_grad=True)
    x = lib.tensor([3.0], requires_grad=True)
    h = x * 1
    h.register_hook(lambda g: (_ for _ in ()).throw(_HookError("late")))
    with pytest.raises(_HookError):
        (h * w).sum().backward()
    assert w.grad.tolist() == [3.0]
    assert x.grad is None


def test_optimizer_step_inside_post_accumulate_hook(lib):
    """O-1/T-9: stepping per parameter inside post-accumulate hooks (optimizer in backward)."""
    w = lib.tensor([1.0, 2.0], requires_grad=True)

    def step(p):
        with lib.no_grad():
            p -= 0.5 * p.grad
        p.grad = None

    w.register_post_accumulate_grad_hook(step)
    (w * w).sum().backward()
    assert w.tolist() == [0.0, 0.0]
    assert w.grad is None


def test_node_hooks_see_and_replace_gradients(lib):
    """Node.register_prehook / register_hook get tuples and may replace them."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * lib.tensor([3.0, 3.0])
    log = []
    y.grad_fn.register_prehook(lambda go: log.append(("pre", go[0].tolist())) or (go[0] * 2,))
    y.grad_fn.register_hook(
        lambda gi, go: (
            log.append(("post", gi[0].tolist(), gi[1], go[0].tolist())) or (gi[0] + 1, None)
        )
    )
    y.sum().backward()
    assert log == [("pre", [1.0, 1.0]), ("post", [6.0, 6.0], None, [2.0, 2.0])]
    assert x.grad.tolist() == [7.0, 7.0]


def test_grad_fn_graph_structure(lib):
    """grad_fn names and next_functions follow torch (AccumulateGrad for leaves, None edges)."""
    x = lib.tensor([1.0], requires_grad=True)
    c = lib.tensor([2.0])
    y = x * c
    assert y.grad_fn.name() == "MulBackward0"
    (first, nr), (second, _) = y.grad_fn.next_functions
    assert (type(first).__name__, nr, second) == ("AccumulateGrad", 0, None)
    assert first.variable is x


def test_inplace_write_through_detached_tensor_invalidates_saved_output(lib):
    """detach() shares the version counter: writing through it makes backward raise."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.detach().add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
