"""Node-hook semantics torch's own tests pin: AccumulateGrad post-hooks, which hooks
``autograd.grad(inputs=)`` runs, ``backward(inputs=non_leaf)``, namedtuple module outputs,
retain_grad liveness, node names and the deprecated-hook warnings; each run on hookgrad and on
torch 2.13 (the ``lib`` fixture)."""

from __future__ import annotations

import gc
import warnings
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")


def test_accumulate_grad_post_hook_sees_the_final_grad(lib):
    """An AccumulateGrad post-hook gets ((), (grad,)) after tensor and node pre-hooks."""
    a = lib.tensor(1.5, requires_grad=True)
    acc = a.clone().grad_fn.next_functions[0][0]
    seen = []
    acc.register_hook(lambda gi, go: seen.append((len(gi), [g.item() for g in go])))
    acc.register_prehook(lambda go: (go[0] * 3,))
    a.register_hook(lambda g: g * 2)
    (a * 5).backward()
    assert seen == [(0, [30.0])]
    assert a.grad.item() == 30.0
    assert acc.name() == "torch::autograd::AccumulateGrad"


def test_accumulate_grad_post_hook_must_return_nothing_to_replace(lib):
    """A post-hook on AccumulateGrad returning a value raises torch's count error."""
    a = lib.tensor(1.0, requires_grad=True)
    acc = (a * 2).grad_fn.next_functions[0][0]
    acc.register_hook(lambda gi, go: (go[0],))
    with pytest.raises(RuntimeError, match=r"incorrect number of values \(got 1, but expected 0\)"):
        (a * 2).backward()


def test_post_accumulate_grad_hook_ordering(lib):
    """tensor pre-hook, node pre-hook, post-accumulate hook, node post-hook, in that order.

    Ported from pytorch test/test_autograd.py, TestAutograd.test_post_accumulate_grad_hook_ordering.
    """
    tensor = lib.ones(3, requires_grad=True)
    acc_grad = tensor.view_as(tensor).grad_fn.next_functions[0][0]
    tensor.register_hook(lambda grad: grad.sub(2.0))
    acc_grad.register_prehook(lambda grad_out: (grad_out[0].div(5.0),))

    def post_acc_grad_hook(t):
        t.grad.add_(0.5)

    tensor.register_post_accumulate_grad_hook(post_acc_grad_hook)

    def acc_grad_node_post_hook(grad_in, grad_out):
        tensor.grad = grad_out[0].mul(10)

    acc_grad.register_hook(acc_grad_node_post_hook)
    tensor.sum().backward()
    assert tensor.grad.tolist() == pytest.approx([3.0, 3.0, 3.0])


def _counting_graph(lib):
    a = lib.tensor(1.0, requires_grad=True)
    b = a * 2
    c = b * 3
    b.register_hook(lambda g: g * 10)
    b.grad_fn.register_prehook(lambda gs: (gs[0] * 100,))
    return a, b, c


def test_grad_runs_only_tensor_hooks_of_an_input_node(lib):
    """autograd.grad: an input's node that need not run gets its tensor hooks only."""
    _, b, c = _counting_graph(lib)
    (gb,) = lib.autograd.grad(c, (b,))
    assert gb.item() == 30.0


def test_grad_captures_before_hooks_when_the_input_node_runs(lib):
    """autograd.grad: an input's node that runs for another input is captured before its hooks."""
    a, b, c = _counting_graph(lib)
    ga, gb = lib.autograd.grad(c, (a, b))
    assert (ga.item(), gb.item()) == (6000.0, 3.0)


def test_grad_of_a_leaf_skips_its_accumulator_pre_hooks(lib):
    """autograd.grad to a leaf runs the leaf's tensor hooks, not its AccumulateGrad's."""
    a = lib.tensor(1.0, requires_grad=True)
    a.register_hook(lambda g: g * 10)
    b = a * 2
    b.grad_fn.next_functions[0][0].register_prehook(lambda gs: (gs[0] * 100,))
    assert lib.autograd.grad(b, (a,))[0].item() == 20.0


def test_prehook_ordering(lib):
    """Tensor hooks run before node pre-hooks; grad and backward(inputs=) run what torch runs.

    Ported from pytorch test/test_autograd.py, TestAutograd.test_prehook_ordering.
    """
    log = []

    def hook1(g):
        log.append(1)
        return g * 3

    def hook2(gs):
        log.append(2)
        return tuple(g * 2 for g in gs)

    a = lib.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.grad_fn.register_prehook(hook2)
    b.register_hook(hook1)
    b.grad_fn.register_prehook(hook2)
    acc = b.grad_fn.next_functions[0][0]
    a.register_hook(hook1)
    acc.register_prehook(hook2)
    a.register_hook(hook1)

    b.sum().backward(retain_graph=True)
    assert log == [1, 2, 2, 1, 1, 2]
    log.clear()
    lib.autograd.grad(b.sum(), inputs=(a,), retain_graph=True)
    assert log == [1, 2, 2, 1, 1]
    log.clear()
    b.sum().backward(inputs=(b,))
    assert log == [1, 2, 2]
    assert b.grad.item() == 3


@settings(max_examples=15, deadline=None)
@given(
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple),
    scale=st.floats(-3, 3, allow_nan=False),
)
def test_backward_inputs_fills_a_non_leaf_grad(shape, scale):
    """backward(inputs=(non_leaf,)) stores its gradient in .grad and leaves the leaf alone."""
    values = np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    results = []
    for lib in (torch, pytest.importorskip("hookgrad")):
        x = lib.tensor(values, requires_grad=True)
        h = x * scale
        out = (h * h).sum()
        out.backward(inputs=(h,))
        results.append((h.grad.numpy(), h.retains_grad, x.grad))
    (theirs, their_flag, their_x), (ours, our_flag, our_x) = results
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert our_flag is their_flag is True
    assert our_x is None and their_x is None


def test_full_backward_hook_keeps_a_namedtuple_output(lib):
    """A module returning a namedtuple still returns it when it has a full backward hook."""
    Pair = namedtuple("Pair", "first second")

    class Split(lib.nn.Module):
        def forward(self, x):
            return Pair(x * 2, x * 3)

    m = Split()
    grads = []
    m.register_full_backward_hook(lambda mod, gi, go: grads.append(len(go)))
    x = lib.ones(2, requires_grad=True)
    out = m(x)
    assert type(out) is Pair
    (out.first + out.second).sum().backward()
    assert grads == [2] and x.grad.tolist() == [5.0, 5.0]


def test_retain_grad_does_not_keep_a_non_leaf_alive(lib):
    """A non-leaf with retain_grad() dies with its last reference; backward still works.

    Ported from pytorch test/test_autograd.py, TestAutograd.test_retain_grad_cycle.
    """
    x = lib.ones(5, 5, requires_grad=True)

    def run_test():
        y = x * 2
        y.retain_grad()
        return y / 2, lib._C._WeakTensorRef(y)

    z, ref = run_test()
    gc.collect()
    assert ref.expired()
    z.sum().backward()
    assert x.grad.sum().item() == 25.0
    kept = x * 3
    assert not lib._C._WeakTensorRef(kept).expired()


def test_warn_always_switch(lib):
    """torch.set_warn_always / is_warn_always_enabled: a process-wide switch, off by default."""
    assert lib.is_warn_always_enabled() is False
    try:
        lib.set_warn_always(True)
        assert lib.is_warn_always_enabled() is True
    finally:
        lib.set_warn_always(False)
    assert lib.is_warn_always_enabled() is False


def _regular_hook_warning(lib, case):
    a = lib.rand(2, requires_grad=True)
    b = lib.rand(2, requires_grad=True)

    class M(lib.nn.Module):
        def forward(self, *args):
            if case == "inputs":
                return args[0][0].clone(), args[0][1].clone()
            if case == "outputs":
                return [args[0].clone(), args[1].clone()]
            if case == "nodes":
                return args[0].clone(), args[1].clone()
            if case == "forward":
                return args[0].clone().clone()
            return (args[0] * 1).sum(), None

    m = M()
    m.register_backward_hook(lambda *args: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if case == "inputs":
            m([a, b])
        elif case == "forward":
            m(a)
        else:
            m(a, b)
    return [(w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize("case", ["inputs", "outputs", "nodes", "forward"])
def test_deprecated_backward_hook_warnings_are_torchs(case):
    """register_backward_hook's FutureWarnings carry torch's exact texts."""
    hookgrad = pytest.importorskip("hookgrad")
    theirs = _regular_hook_warning(torch, case)
    assert theirs and all(c is FutureWarning for c, _ in theirs)
    assert _regular_hook_warning(hookgrad, case) == theirs


def test_var_mean_output_can_be_modified_in_place(lib):
    """var_mean's backward does not read its outputs, so var.mul_() keeps backward valid."""
    b = lib.arange(9.0).reshape(3, 3).requires_grad_()
    var, mean = lib.var_mean(b, dim=0)
    var.mul_(2)
    (var + mean).sum().backward()
    assert [round(v, 4) for v in b.grad.reshape(-1).tolist()] == [
        -5.6667,
        -5.6667,
        -5.6667,
        0.3333,
        0.3333,
        0.3333,
        6.3333,
        6.3333,
        6.3333,
    ]
