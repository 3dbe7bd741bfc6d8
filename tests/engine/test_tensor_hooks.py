"""Tensor hooks: SEMANTICS.md rules T-1..T-19, each pinned with real numbers.

Every test runs on hookgrad and, when installed, on torch 2.13 with the same expectations.
"""

from __future__ import annotations

import pytest


def test_hook_gets_gradient_before_leaf_accumulation(lib):
    """T-1/T-3: a leaf hook sees this pass's gradient while .grad still holds the old sum."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_hook(
        lambda g: seen.append((g.tolist(), None if x.grad is None else x.grad.tolist()))
    )
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert seen == [([2.0, 4.0], None), ([3.0, 3.0], [2.0, 4.0])]
    assert x.grad.tolist() == [5.0, 7.0]


def test_leaf_hook_return_value_is_accumulated(lib):
    """T-2: a leaf hook's return value is what lands in .grad."""
    x = lib.tensor([1.0, -2.0], requires_grad=True)
    x.register_hook(lambda g: g.clamp(-0.5, 0.5))
    (x * 4).sum().backward()
    assert x.grad.tolist() == [0.5, 0.5]


def test_nonleaf_hook_replacement_flows_upstream(lib):
    """T-5: a non-leaf hook's return value is what the tensor's inputs receive."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g * 10)
    y.sum().backward()
    assert x.grad.tolist() == [20.0, 20.0]


@pytest.mark.parametrize("leaf", [True, False])
def test_multi_use_tensor_hook_fires_once_with_sum(lib, leaf):
    """T-4: a tensor used by several ops fires its hook once, with the summed gradient."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    t = x if leaf else x * 1
    calls = []
    t.register_hook(lambda g: calls.append(g.tolist()))
    (t * 2 + t * 3 + t).sum().backward()
    assert calls == [[6.0, 6.0]]


def test_hooks_chain_in_registration_order(lib):
    """T-6: each hook receives the previous hook's result; None passes the current one on."""
    x = lib.tensor([1.0], requires_grad=True)
    seen = []

    def first(g):
        seen.append(("first", g.item()))
        return g + 1

    def second(g):
        seen.append(("second", g.item()))

    def third(g):
        seen.append(("third", g.item()))
        return g * 10

    for hook in (first, second, third):
        x.register_hook(hook)
    (x * 2).sum().backward()
    assert seen == [("first", 2.0), ("second", 3.0), ("third", 3.0)]
    assert x.grad.item() == 30.0


def test_registration_errors(lib):
    """T-7/T-12/T-13: hooks and retain_grad need a tensor that requires grad; post hooks need a leaf."""
    plain = lib.tensor([1.0])
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        plain.register_hook(lambda g: g)
    with pytest.raises(RuntimeError):
        plain.retain_grad()
    with pytest.raises(RuntimeError):
        plain.register_post_accumulate_grad_hook(lambda t: None)
    nonleaf = lib.tensor([1.0], requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        nonleaf.register_post_accumulate_grad_hook(lambda t: None)


def test_wrong_shape_return_raises_and_leaves_grad_untouched(lib):
    """T-8: a replacement of another shape is a RuntimeError; .grad stays None."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: lib.ones(3))
    with pytest.raises(RuntimeError, match="has changed the size of value"):
        y.sum().backward()
    assert x.grad is None


@pytest.mark.parametrize("leaf", [True, False])
def test_other_dtype_return_raises_and_leaves_grad_untouched(lib, leaf):
    """T-8: a replacement of another dtype (float64 for a float32 gradient) is a RuntimeError
    naming the hook and both types; .grad stays None."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x if leaf else x * 2

    def widen(grad):
        return grad.double()

    y.register_hook(widen)
    message = (
        r"hook 'widen' has changed the type of value \(was \w+\.FloatTensor got \w+\.DoubleTensor\)"
    )
    with pytest.raises(RuntimeError, match=message):
        (y * 3).sum().backward()
    assert x.grad is None


def test_non_tensor_return_raises_type_error(lib):
    """T-8: a hook returning an int raises TypeError; .grad stays None."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: 3)
    with pytest.raises(TypeError):
        y.sum().backward()
    assert x.grad is None


def test_post_accumulate_hook_gets_the_leaf_after_update(lib):
    """T-9: post-accumulate hooks receive the tensor itself with .grad already updated."""
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append((t is w, t.grad.tolist())))
    (w * w).sum().backward()
    assert seen == [(True, [2.0, 4.0])]


@pytest.mark.parametrize(
    ("returned", "error"), [(lambda t: t * 2, RuntimeError), (lambda t: 1, TypeError)]
)
def test_post_accumulate_hook_must_return_none_after_accumulating(lib, returned, error):
    """T-9: another tensor raises RuntimeError, a non-tensor TypeError, after .grad was updated."""
    w = lib.tensor([1.0], requires_grad=True)
    w.register_post_accumulate_grad_hook(returned)
    with pytest.raises(error):
        (w * 5).sum().backward()
    assert w.grad.tolist() == [5.0]


def test_post_accumulate_hook_returning_the_tensor_itself_is_tolerated(lib):
    """T-9 quirk: returning the very tensor it received is accepted like None."""
    w = lib.tensor([1.0], requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda t: t)
    (w * 5).sum().backward()
    assert w.grad.tolist() == [5.0]


def test_leaf_order_is_hooks_then_accumulate_then_post_hooks(lib):
    """T-10: interleaved registrations still run every tensor hook before every post hook."""
    w = lib.tensor([1.0], requires_grad=True)
    order = []
    w.register_post_accumulate_grad_hook(lambda t: order.append(("post1", t.grad.item())))
    w.register_hook(lambda g: order.append(("pre1", w.grad)))
    w.register_post_accumulate_grad_hook(lambda t: order.append(("post2", t.grad.item())))
    w.register_hook(lambda g: order.append(("pre2", w.grad)))
    (w * 2).sum().backward()
    assert order == [("pre1", None), ("pre2", None), ("post1", 2.0), ("post2", 2.0)]


@pytest.mark.parametrize("retain_first", [True, False])
def test_retain_grad_sees_result_of_all_hooks(lib, retain_first):
    """T-11: retained .grad holds the gradient after every hook, whatever the order."""
    x = lib.tensor([1.0], requires_grad=True)
    y = x * 2
    if retain_first:
        y.retain_grad()
    y.register_hook(lambda g: g * 10)
    if not retain_first:
        y.retain_grad()
    y.sum().backward()
    assert y.grad.tolist() == [10.0]
    assert x.grad.tolist() == [20.0]


def test_retain_grad_leaf_noop_and_nonleaf_accumulates(lib):
    """T-12: retain_grad on a leaf is a no-op; a retained non-leaf .grad accumulates."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    x.retain_grad()
    x.retain_grad()
    y = x * 3
    y.retain_grad()
    out = (y * y).sum()
    out.backward(retain_graph=True)
    out.backward()
    assert y.grad.tolist() == [12.0, 24.0]
    assert x.grad.tolist() == [36.0, 72.0]


def test_nonleaf_grad_is_none_with_warning(lib):
    """T-14: reading .grad of a non-retained non-leaf gives None and a UserWarning."""
    x = lib.tensor([1.0], requires_grad=True)
    y = x * 2
    y.sum().backward()
    with pytest.warns(UserWarning, match="not a leaf"):
        assert y.grad is None


def test_no_grad_result_is_a_plain_leaf(lib):
    """T-15: a result computed under no_grad neither requires grad nor accepts hooks/backward."""
    x = lib.tensor([1.0], requires_grad=True)
    with lib.no_grad():
        y = x * 2
    assert (y.requires_grad, y.is_leaf) == (False, True)
    with pytest.raises(RuntimeError):
        y.register_hook(lambda g: g)
    with pytest.raises(RuntimeError):
        y.sum().backward()


def test_hooks_run_with_grad_mode_disabled(lib):
    """T-16: inside a hook grad mode is off, so maths on gradients records nothing."""
    w = lib.tensor([2.0], requires_grad=True)
    x = lib.tensor([1.0], requires_grad=True)
    seen = []

    def hook(g):
        seen.append((g.requires_grad, (g * w).requires_grad, lib.is_grad_enabled()))

    x.register_hook(hook)
    (x * 3).sum().backward()
    assert seen == [(False, False, False)]


def test_root_hook_sees_seed_and_replaces_it(lib):
    """T-17: the root's hook receives the seed 1.0 and its return replaces the seed."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    s = (x * x).sum()
    seeds = []
    s.register_hook(lambda g: seeds.append((g.shape, g.item())) or g * 2)
    s.backward()
    assert seeds == [((), 1.0)]
    assert x.grad.tolist() == [4.0, 8.0]


def test_root_hook_sees_explicit_gradient_and_leaf_as_root(lib):
    """T-17: with gradient= the root hook sees it; a leaf can itself be the root."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    x.backward(lib.tensor([0.5, 3.0]))
    assert seen == [[0.5, 3.0]]
    assert x.grad.tolist() == [0.5, 3.0]


def test_sibling_branches_run_most_recent_first(lib):
    """T-18: y2 (created later) fires before y1; the input leaf fires last."""
    a = lib.tensor([1.0], requires_grad=True)
    y1 = a * 2
    y2 = a * 3
    order = []
    y1.register_hook(lambda g: order.append("y1"))
    y2.register_hook(lambda g: order.append("y2"))
    a.register_hook(lambda g: order.append("a"))
    (y1 + y2).sum().backward()
    assert order == ["y2", "y1", "a"]


def test_leaf_accumulation_runs_as_soon_as_ready(lib):
    """T-18: a parameter's hook fires right after its layer's backward, before earlier layers."""
    x = lib.tensor([1.0], requires_grad=True)
    w1 = lib.tensor([2.0], requires_grad=True)
    w2 = lib.tensor([3.0], requires_grad=True)
    order = []
    h1 = x * w1
    h1.register_hook(lambda g: order.append("h1"))
    out = (h1 * w2).sum()
    for name, t in (("x", x), ("w1", w1), ("w2", w2)):
        t.register_hook(lambda g, name=name: order.append(name))
    out.backward()
    assert order == ["w2", "h1", "w1", "x"] or order == ["w2", "h1", "x", "w1"]
    assert order.index("w2") < order.index("h1")


def test_inplace_versions_split_hooks(lib):
    """T-19: a hook registered before y*=3 sees 36a and fires after the later one, which sees 12a."""
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    y = a * 2
    seen = []
    y.register_hook(lambda g: seen.append(("before", g.tolist())))
    y *= 3
    y.register_hook(lambda g: seen.append(("after", g.tolist())))
    (y * y).sum().backward()
    assert seen == [("after", [12.0, 24.0]), ("before", [36.0, 72.0])]
    assert a.grad.tolist() == [72.0, 144.0]


def test_hook_on_unused_output_of_multi_output_op_gets_none(lib):
    """A hook on a split piece that receives no gradient is called with None (torch's behaviour)."""
    x = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    a, b = x.split(2)
    seen = []
    b.register_hook(lambda g: seen.append(g))
    a.sum().backward()
    assert seen == [None]
    assert x.grad.tolist() == [1.0, 1.0, 0.0, 0.0]


def test_linear_parameters_accumulate_before_its_full_hook_and_input(lib):
    """T-18 through a Linear with a full backward hook: bias then weight (their hooks, then
    their accumulation) before the module's full hook sees grad_input, then the input."""
    seen = []
    lin = lib.nn.Linear(2, 1)
    lin.weight.register_hook(lambda g: seen.append("weight"))
    lin.bias.register_hook(lambda g: seen.append("bias"))
    lin.weight.register_post_accumulate_grad_hook(lambda p: seen.append("weight acc"))
    lin.bias.register_post_accumulate_grad_hook(lambda p: seen.append("bias acc"))
    lin.register_full_backward_hook(
        lambda m, gi, go: seen.append(("full", m.weight.grad is not None, m.bias.grad is not None))
    )
    x = lib.ones(1, 2, requires_grad=True)
    x.register_hook(lambda g: seen.append("x"))
    (lin(x * 2) * 3).sum().backward()
    assert seen == ["bias", "bias acc", "weight", "weight acc", ("full", True, True), "x"]
