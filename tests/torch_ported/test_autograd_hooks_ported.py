"""PyTorch's own autograd hook tests that pin a rule of ours, adapted to run on hookgrad and on
torch 2.13 alike (the ``lib`` fixture).

Source: pytorch ``test/test_autograd.py``, class TestAutograd; each test names the torch test it
comes from. (test_prehook_ordering, test_post_accumulate_grad_hook_ordering and
test_retain_grad_cycle are ported in tests/hooks/test_node_hook_semantics_vs_torch.py.)
"""

from __future__ import annotations

import pytest


def _hook_counter(a, b):
    """Count-keeping hooks on ``a`` and ``b`` (tensor), on ``a``'s AccumulateGrad and ``b``'s
    node (pre and post); returns ``run(action) -> (tensor, pre, post)`` counts of one action."""
    counts = {"tensor": 0, "pre": 0, "post": 0}

    def bump(kind):
        def hook(*args):
            counts[kind] += 1

        return hook

    a.register_hook(bump("tensor"))
    b.register_hook(bump("tensor"))
    acc = b.grad_fn.next_functions[0][0]
    acc.register_hook(bump("post"))
    acc.register_prehook(bump("pre"))
    b.grad_fn.register_hook(bump("post"))
    b.grad_fn.register_prehook(bump("pre"))

    def run(action):
        counts.update(tensor=0, pre=0, post=0)
        action()
        return counts["tensor"], counts["pre"], counts["post"]

    return run


def test_hook_edge_case_when_called_with_grad(lib):
    """autograd.grad runs the tensor hooks of an input's node but neither its pre- nor its
    post-hooks unless the node runs for another input; backward runs them all.
    From TestAutograd.test_hook_edge_case_when_called_with_grad."""
    a = lib.tensor(1.0, requires_grad=True)
    b = a * 2
    c = b * 2
    run = _hook_counter(a, b)

    assert run(lambda: lib.autograd.grad(c, inputs=(b), retain_graph=True)) == (1, 0, 0)
    assert run(lambda: lib.autograd.grad(c, inputs=(a, b), retain_graph=True)) == (2, 1, 1)
    assert run(lambda: c.backward(retain_graph=True)) == (2, 2, 2)
    assert run(lambda: c.backward(inputs=(a, b), retain_graph=True)) == (2, 2, 2)


def test_accumulate_grad_posthooks_can_observe_tensor_prehook(lib):
    """Pre- and post-hooks of a leaf's AccumulateGrad see the gradient its tensor hook made.
    From TestAutograd.test_accumulate_grad_posthooks_can_observe_tensor_prehook."""
    a = lib.tensor(1.0, requires_grad=True)
    seen = []
    b = a.clone()
    acc = b.grad_fn.next_functions[0][0]
    acc.register_hook(lambda g_in, g_out: seen.append(("post", len(g_in), g_out[0].item())))
    acc.register_prehook(lambda g_out: seen.append(("pre", len(g_out), g_out[0].item())))
    a.register_hook(lambda g: g * 2)
    b.backward()
    assert seen == [("pre", 1, 2.0), ("post", 0, 2.0)]


def test_accumulate_grad_posthooks_should_not_execute(lib):
    """backward(inputs=[b]) runs no hook of a leaf outside the requested part of the graph.
    From TestAutograd.test_accumulate_grad_posthooks_should_not_execute."""

    def fail(*args):
        raise RuntimeError

    a = lib.tensor(1.0, requires_grad=True)
    a.register_hook(fail)
    b = lib.tensor(1.0, requires_grad=True)
    c = a.clone()
    c.grad_fn.next_functions[0][0].register_hook(fail)
    (a + b + c).sum().backward(inputs=[b])
    assert b.grad.item() == 1.0 and a.grad is None


def test_retains_grad_can_always_observe_tensor_prehook(lib):
    """retain_grad stores the gradient after every tensor hook, whatever the order.
    From TestAutograd.test_retains_grad_can_always_observe_tensor_prehook."""
    for hooks_before in (1, 0):
        a = lib.tensor(1.0, requires_grad=True)
        b = a.clone()
        for _ in range(hooks_before):
            b.register_hook(lambda g: g * 2)
        b.retain_grad()
        b.register_hook(lambda g: g * 2)
        b.clone().backward()
        assert b.grad.item() == 2.0 * 2**hooks_before


@pytest.mark.parametrize("custom_function", [True, False])
def test_grad_fn_prehooks_remove_hooks(lib, custom_function):
    """A node pre-hook removed before or during backward does not run (removing twice is fine).
    From TestAutograd.test_grad_fn_prehooks_remove_hooks."""

    class Mul2(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    mul2 = Mul2.apply if custom_function else (lambda x: x * 2)
    counter = [0]

    def prehook(grad_output):
        counter[0] += 1

    a = lib.ones(3, 3, requires_grad=True)
    b = mul2(a)
    handle = b.grad_fn.register_prehook(prehook)
    b.grad_fn.register_prehook(prehook)
    handle.remove()
    b.sum().backward()
    assert counter[0] == 1 and a.grad.tolist() == [[2.0] * 3] * 3

    def prehook1(grad_output):
        handle2.remove()
        handle3.remove()

    counter[0] = 0
    a = lib.ones(3, 3, requires_grad=True)
    b = mul2(a)
    b.grad_fn.register_prehook(prehook1)
    handle2 = b.grad_fn.register_prehook(prehook)
    handle3 = b.grad_fn.register_prehook(prehook)
    handle3.remove()
    b.sum().backward()
    assert counter[0] == 1 and a.grad.tolist() == [[2.0] * 3] * 3


def test_full_backward_hook_double_backward(lib):
    """autograd.grad(create_graph=True) captures a leaf input's gradient, the module's full
    backward hook fires once, and differentiating that gradient again fires it no more.
    From TestAutograd.test_full_backward_hook_double_backward."""
    x = lib.tensor([0.25], requires_grad=True)
    y = lib.tensor([1.0])
    func = lib.nn.MSELoss()
    counter = [0]
    func.register_full_backward_hook(
        lambda module, grad_input, grad_output: counter.__setitem__(0, counter[0] + 1)
    )
    (gradx_f,) = lib.autograd.grad(func(x, y), x, create_graph=True)
    assert counter[0] == 1
    assert gradx_f.item() == pytest.approx(-1.5)
    (second,) = lib.autograd.grad(gradx_f, x)
    assert counter[0] == 1
    assert second.item() == pytest.approx(2.0)


def test_hook_edge_case_when_called_with_grad_under_create_graph(lib):
    """With create_graph=True autograd.grad and backward run the same hooks as without:
    tensor hooks only at a captured input's node, AccumulateGrad post-hooks on backward.
    TestAutograd.test_hook_edge_case_when_called_with_grad, run under create_graph."""
    a = lib.tensor(1.0, requires_grad=True)
    b = a * 2
    c = b * b
    run = _hook_counter(a, b)

    assert run(lambda: lib.autograd.grad(c, inputs=(b), create_graph=True)) == (1, 0, 0)
    assert run(lambda: lib.autograd.grad(c, inputs=(a, b), create_graph=True)) == (2, 1, 1)
    assert run(lambda: c.backward(create_graph=True)) == (2, 2, 2)
    assert a.grad.item() == 8.0 and a.grad.requires_grad


def test_saved_tensor_hooks_extra_exit_during_bw_no_crash(lib):
    """A saved_tensors_hooks context exited inside backward (by an unpack hook) does not outlive
    that backward, and a bare __exit__() is accepted.
    From TestAutograd.test_saved_tensor_hooks_extra_exit_during_bw_no_crash."""

    def unpack(x):
        ctx_1.__exit__()
        return x

    ctx_1 = lib.autograd.graph.saved_tensors_hooks(lambda x: x, unpack)
    ctx_2 = lib.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x)
    for _ in range(10):
        with ctx_2:
            ctx_1.__enter__()
            x = lib.ones(3, 3, requires_grad=True)
            x.sin().sum().backward()
    for _ in range(10):
        ctx_1.__exit__()
    a = lib.tensor(1.0, requires_grad=True)
    y = a.exp()
    y.grad_fn._raw_saved_result.register_hooks(lambda x: x, lambda x: x)  # no hooks pushed


def test_saved_tensor_hooks_extra_enter_during_bw_no_leak(lib):
    """A saved_tensors_hooks context entered inside backward (by an unpack hook) is dropped when
    that backward ends: later ops are packed by no hooks at all.
    From TestAutograd.test_saved_tensor_hooks_extra_enter_during_bw_no_leak (the leak, seen as
    the pushed hooks still applying after backward)."""
    packed = []
    ctx_1 = lib.autograd.graph.saved_tensors_hooks(lambda x: packed.append(1) or x, lambda x: x)

    def unpack(x):
        ctx_1.__enter__()
        return x

    x = lib.ones(3, 3, requires_grad=True)
    with lib.autograd.graph.saved_tensors_hooks(lambda x: x, unpack):
        x.sin().sum().backward()
    y = x.exp()
    y.grad_fn._raw_saved_result.register_hooks(lambda x: x, lambda x: x)  # no hooks pushed
    assert packed == []


def test_pack_hook_with_inplace_modification_should_fail(lib):
    """A pack hook that writes to its input in place is a RuntimeError, for default hooks and
    for register_hooks alike. From TestAutograd.test_pack_hook_with_inplace_modification_should_fail."""
    a = lib.ones(5, requires_grad=True)

    def inc(x):
        x += 1
        return x

    message = "A saved tensor pack hook is modifying its input in place."
    with (
        lib.autograd.graph.saved_tensors_hooks(inc, lambda x: x),
        pytest.raises(RuntimeError, match=message),
    ):
        lib.exp(a)
    y = lib.exp(a)
    with pytest.raises(RuntimeError, match=message):
        y.grad_fn._raw_saved_result.register_hooks(inc, lambda x: x)


def test_saved_variable_packing_unpacking_with_hooks_keeps_the_graph(lib):
    """An unpacked saved value sits where the saved tensor sat in the graph (its grad_fn),
    whatever the unpack hook returned, and double backward runs through packed values.
    From TestAutograd.test_saved_variable_packing_unpacking_did_not_save_original_with_hooks,
    test_saved_variable_packing_unpacking_saved_original_with_hooks and
    test_default_saved_tensors_hooks_double_backward."""
    a = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = lib.exp(a)
    y.grad_fn._raw_saved_result.register_hooks(lambda x: x, lambda x: x)
    assert y.grad_fn._saved_result.grad_fn is y.grad_fn
    y.sum().backward()
    assert a.grad.tolist() == pytest.approx(y.tolist())

    b = 1 + a
    t = b * b
    t.grad_fn._raw_saved_self.register_hooks(lambda x: 2 * x, lambda x: x / 2)
    assert t.grad_fn._saved_self.grad_fn is b.grad_fn

    with lib.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
        c = a.detach().requires_grad_()
        s = (c**3).sum()
        (g,) = lib.autograd.grad(s, (c,), create_graph=True)
        g.sum().backward()
    assert c.grad.tolist() == pytest.approx([3.0, 6.0, 12.0])


def test_default_saved_tensors_hooks_double_backward(lib):
    """Double backward uses the values the pack hooks made, for tensors saved in the forward
    and in the recorded backward alike.
    From TestAutograd.test_default_saved_tensors_hooks_double_backward."""
    double = (lambda x: 2 * x, lambda x: x)
    with lib.autograd.graph.saved_tensors_hooks(*double):
        a = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
        s = (a**3).sum()
    (g,) = lib.autograd.grad(s, (a,), create_graph=True)
    g.sum().backward()
    assert a.grad.tolist() == pytest.approx((6 * 2 * a).tolist())  # a saved once, doubled

    a = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
    s = (a**3).sum()
    with lib.autograd.graph.saved_tensors_hooks(*double):
        (g,) = lib.autograd.grad(s, (a,), create_graph=True)
        g.sum().backward()
    assert a.grad.tolist() == pytest.approx((6 * 4 * a).tolist())  # grad and a saved


def test_disabling_saved_tensor_hooks_is_enabled(lib):
    """torch._C._autograd._saved_tensors_hooks_is_enabled() is False exactly inside
    disable_saved_tensors_hooks. From TestAutograd.test_disabling_saved_tensor_hooks_nested."""
    enabled = lib._C._autograd._saved_tensors_hooks_is_enabled
    with lib.autograd.graph.disable_saved_tensors_hooks("outer"):
        with (
            lib.autograd.graph.disable_saved_tensors_hooks("inner"),
            pytest.raises(RuntimeError, match="inner"),
        ):
            lib.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x).__enter__()
        assert enabled() is False
    assert enabled() is True


def test_create_graph_cycle_warning_under_warn_always(lib):
    """backward(create_graph=True) warns of the reference cycle on every call while
    set_warn_always(True) holds. From TestAutograd.test_create_graph_and_full_backward_hook_cycle."""
    import warnings

    previous = lib.is_warn_always_enabled()
    lib.set_warn_always(True)
    try:
        for _ in range(2):
            a = lib.tensor(1.0, requires_grad=True)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                (a**2).backward(create_graph=True)
            found = [x for x in w if "Using backward() with create_graph=True" in str(x.message)]
            assert len(found) == 1
            a.grad = None
    finally:
        lib.set_warn_always(previous)


def test_saved_tensors_hook_version_counter_not_shared(lib):
    """A custom Function's saved tensors go through the saved-tensor hooks: backward gets what
    unpack returns, and writing to it leaves the original's version alone.
    From TestAutograd.test_saved_tensors_hook_version_counter_not_shared."""
    a = lib.tensor(1.0, requires_grad=True)
    a_replacement = a.detach().clone()
    seen = []

    class Test(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            before = a._version
            x.add_(1)
            seen.append((a._version - before, x.item()))
            return grad_output

    with lib.autograd.graph.saved_tensors_hooks(lambda x: a_replacement, lambda x: x):
        b = Test.apply(a)
    b.backward()
    assert seen == [(0, 2.0)]
    assert a_replacement.item() == 2.0
