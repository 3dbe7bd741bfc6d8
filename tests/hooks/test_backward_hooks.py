"""Module backward hooks: SEMANTICS.md B-1..B-21 with the seed example's real numbers."""

from __future__ import annotations

import pytest


def _linear(lib, weight, bias):
    layer = lib.nn.Linear(1, 1)
    with lib.no_grad():
        layer.weight.fill_(weight)
        layer.bias.fill_(bias)
    return layer


def _seed(lib):
    """f0 = Linear(0.3, 0.1) feeding f1 = SLinear(0.4, 0.2) returning s**2; x = [0.3]."""

    class SLinear(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = _linear(lib, 0.4, 0.2)

        def forward(self, x):
            s = self.linear(x)
            return s**2

    f0 = _linear(lib, 0.3, 0.1)
    f1 = SLinear()
    x = lib.tensor([0.3], requires_grad=True)
    return f0, f1, x


def _run_seed(f0, f1, x):
    y = f1(f0(x))
    ((y - 1) ** 2).sum().backward()


def _r(t):
    return None if t is None else [round(v, 5) for v in t.reshape(-1).tolist()]


def test_seed_full_backward_hook_values(lib):
    """B-1/B-2: the seed example's grad_input, grad_output and every parameter gradient."""
    f0, f1, x = _seed(lib)
    seen = []
    f1.register_full_backward_hook(lambda m, gi, go: seen.append((type(gi), _r(gi[0]), _r(go[0]))))
    _run_seed(f0, f1, x)
    assert seen == [(tuple, [-0.40796], [-1.84765])]
    assert _r(x.grad) == [-0.12239]
    assert (_r(f1.linear.weight.grad), _r(f1.linear.bias.grad)) == ([-0.19378], [-1.0199])
    assert (_r(f0.weight.grad), _r(f0.bias.grad)) == ([-0.12239], [-0.40796])


def test_seed_full_hook_return_replaces_grad_input(lib):
    """B-3: returning (gi*2,) doubles upstream gradients and leaves f1's own unchanged."""
    f0, f1, x = _seed(lib)
    f1.register_full_backward_hook(lambda m, gi, go: (gi[0] * 2,))
    _run_seed(f0, f1, x)
    assert _r(x.grad) == [-0.24478]
    assert (_r(f0.weight.grad), _r(f0.bias.grad)) == ([-0.24478], [-0.81592])
    assert (_r(f1.linear.weight.grad), _r(f1.linear.bias.grad)) == ([-0.19378], [-1.0199])


def _multi_io(lib):
    class MultiIO(lib.nn.Module):
        def forward(self, a, flag, b, c=None):
            return a * 2, "text", b * 3

    return MultiIO()


def test_grad_input_per_positional_arg_and_grad_output_per_output(lib):
    """B-4/B-5: None for non-tensor args and outputs; keyword tensors are left out."""
    m = _multi_io(lib)
    a = lib.tensor([1.0], requires_grad=True)
    b = lib.tensor([1.0], requires_grad=True)
    c = lib.tensor([1.0], requires_grad=True)
    seen = []
    m.register_full_backward_hook(
        lambda mod, gi, go: seen.append(([_r(g) for g in gi], [_r(g) for g in go]))
    )
    out_a, _, out_b = m(a, 7, b, c=c)
    (out_a + out_b).sum().backward()
    assert seen == [([[2.0], None, [3.0]], [[1.0], None, [1.0]])]


def test_unused_output_gets_none_in_grad_output(lib):
    """B-6: an output the loss does not use gets None in grad_output (pre-hooks too)."""
    m = _multi_io(lib)
    a = lib.tensor([1.0], requires_grad=True)
    b = lib.tensor([1.0], requires_grad=True)
    seen = []
    m.register_full_backward_pre_hook(lambda mod, go: seen.append(("pre", [_r(g) for g in go])))
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(("full", [_r(g) for g in go])))
    out_a, _, _ = m(a, 7, b)
    out_a.sum().backward()
    assert seen == [("pre", [[1.0], None, None]), ("full", [[1.0], None, None])]


def test_input_without_grad_gets_zeros_and_unused_input_gets_zero_grad(lib):
    """B-7: no-grad tensor args and unused requires-grad args get zeros, not None."""

    class UsesFirst(lib.nn.Module):
        def forward(self, a, b, unused):
            return a * b

    m = UsesFirst()
    a = lib.tensor([2.0], requires_grad=True)
    b = lib.tensor([5.0])
    unused = lib.tensor([1.0], requires_grad=True)
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append([_r(g) for g in gi]))
    m(a, b, unused).sum().backward()
    assert seen == [[[5.0], [0.0], [0.0]]]
    assert _r(unused.grad) == [0.0]


def test_no_backward_hook_without_output_grad(lib):
    """B-8: nothing fires (and nothing raises) when no output requires grad."""
    layer = lib.nn.Linear(1, 1)
    calls = []
    layer.register_full_backward_pre_hook(lambda *a: calls.append("pre"))
    layer.register_full_backward_hook(lambda *a: calls.append("full"))
    with lib.no_grad():
        out = layer(lib.tensor([[1.0]]))
    assert not out.requires_grad and calls == []


def test_no_input_requires_grad_warns_and_fires_with_none(lib):
    """B-9: pre-hook fires; full hook gets (None,)*n with a UserWarning and may only return None."""
    layer = _linear(lib, 2.0, 0.0)
    seen = []
    layer.register_full_backward_pre_hook(lambda m, go: seen.append(("pre", _r(go[0]))))
    layer.register_full_backward_hook(lambda m, gi, go: seen.append(("full", gi, _r(go[0]))))
    with pytest.warns(UserWarning, match="no inputs require gradients") as caught:
        layer(lib.tensor([[3.0]])).sum().backward()
    assert caught[0].filename == __file__  # the backward() call, in both libraries
    assert seen == [("pre", [1.0]), ("full", (None,), [1.0])]
    assert _r(layer.weight.grad) == [3.0]

    bad = _linear(lib, 2.0, 0.0)
    bad.register_full_backward_hook(lambda m, gi, go: (lib.ones(1),))
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="should always return None"):
        bad(lib.tensor([[3.0]])).sum().backward()


def test_forward_ignoring_inputs_never_fires_full_hook(lib):
    """B-10: the pre-hook fires but the full hook never does when forward ignores its inputs."""

    class Ignores(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = lib.nn.Parameter(lib.tensor([2.0]))

        def forward(self, x):
            return self.w * 3

    m = Ignores()
    calls = []
    m.register_full_backward_pre_hook(lambda *a: calls.append("pre"))
    m.register_full_backward_hook(lambda *a: calls.append("full"))
    m(lib.tensor([1.0], requires_grad=True)).sum().backward()
    assert calls == ["pre"]


def test_module_called_twice_fires_per_call_in_reverse(lib):
    """B-11: one firing per call, latest call first, each with that call's gradients."""
    layer = _linear(lib, 2.0, 0.0)
    seen = []
    layer.register_full_backward_hook(lambda m, gi, go: seen.append(_r(go[0])))
    x = lib.tensor([[1.0]], requires_grad=True)
    first = layer(x)
    second = layer(x)
    (first * 3 + second * 5).sum().backward()
    assert seen == [[5.0], [3.0]]


def test_output_used_twice_fires_once_with_sum(lib):
    """B-11/T-4: an output consumed twice fires the hooks once with the summed grad_output."""
    layer = _linear(lib, 2.0, 0.0)
    seen = []
    layer.register_full_backward_hook(lambda m, gi, go: seen.append(_r(go[0])))
    out = layer(lib.tensor([[1.0]], requires_grad=True))
    (out * 3 + out * 4).sum().backward()
    assert seen == [[7.0]]


def test_pre_hook_replaces_grad_output_everywhere(lib):
    """B-12: a pre-hook's replacement reaches later pre-hooks, full hooks and the parameters."""
    layer = _linear(lib, 2.0, 0.0)
    seen = []
    layer.register_full_backward_pre_hook(lambda m, go: (go[0] * 10,))
    layer.register_full_backward_pre_hook(lambda m, go: seen.append(("pre2", _r(go[0]))))
    layer.register_full_backward_hook(lambda m, gi, go: seen.append(("full", _r(gi[0]), _r(go[0]))))
    x = lib.tensor([[3.0]], requires_grad=True)
    layer(x).sum().backward()
    assert seen == [("pre2", [10.0]), ("full", [20.0], [10.0])]
    assert (_r(layer.weight.grad), _r(x.grad)) == ([30.0], [20.0])


def test_wrappers_go_around_replaced_args_and_output(lib):
    """B-13: grad_input is w.r.t. pre-hook args and grad_output w.r.t. the hooked output."""
    layer = _linear(lib, 2.0, 0.0)
    seen = []
    layer.register_forward_hook(lambda m, a, o: o * 3)
    layer.register_full_backward_hook(lambda m, gi, go: seen.append((_r(gi[0]), _r(go[0]))))
    layer(lib.tensor([[1.0]], requires_grad=True)).sum().backward()
    assert seen == [([6.0], [1.0])]


def test_identity_views_when_backward_hooks_active(lib):
    """B-14: forward gets new non-leaf objects; the caller gets a new output object."""
    seen = {}

    class Passthrough(lib.nn.Module):
        def forward(self, a):
            seen["a"] = a
            return a

    m = Passthrough()
    m.register_full_backward_hook(lambda *args: None)
    x = lib.tensor([1.0], requires_grad=True)
    out = m(x)
    assert seen["a"] is not x and not seen["a"].is_leaf
    assert out is not seen["a"]
    plain = lib.tensor([1.0])
    m(plain)
    assert seen["a"] is plain


@pytest.mark.parametrize("kind", ["full", "pre"])
def test_inplace_on_hooked_output_raises(lib, kind):
    """B-15: `o += 1` on a hooked module's output raises RuntimeError (full or pre-hook)."""
    layer = lib.nn.Linear(1, 1)
    if kind == "full":
        layer.register_full_backward_hook(lambda *a: None)
    else:
        layer.register_full_backward_pre_hook(lambda *a: None)
    out = layer(lib.tensor([[1.0]]))
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
        out += 1


def test_inplace_on_output_fine_without_backward_hooks(lib):
    """B-15: forward hooks only, or no_grad, allow in-place changes of the output."""
    layer = lib.nn.Linear(1, 1)
    layer.register_forward_hook(lambda *a: None)
    out = layer(lib.tensor([[1.0]]))
    out += 1
    layer.register_full_backward_hook(lambda *a: None)
    with lib.no_grad():
        quiet = layer(lib.tensor([[1.0]]))
        quiet += 1


def test_full_hook_return_validation(lib):
    """B-16: wrong length or bare tensor raise RuntimeError; a list is accepted."""
    x = lib.tensor([[1.0]], requires_grad=True)
    for bad in (lambda gi: (gi[0], gi[0]), lambda gi: gi[0], lambda gi: (lib.ones(2, 2),)):
        layer = _linear(lib, 2.0, 0.0)
        layer.register_full_backward_hook(lambda m, gi, go, bad=bad: bad(gi))
        with pytest.raises(RuntimeError):
            layer(x).sum().backward()
    layer = _linear(lib, 2.0, 0.0)
    layer.register_full_backward_hook(lambda m, gi, go: [gi[0] * 5])
    x.grad = None
    layer(x).sum().backward()
    assert _r(x.grad) == [10.0]


def test_pre_hook_return_validation(lib):
    """B-16: a pre-hook returning the wrong number of grad_output raises RuntimeError."""
    layer = _linear(lib, 2.0, 0.0)
    layer.register_full_backward_pre_hook(lambda m, go: (go[0], go[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_output"):
        layer(lib.tensor([[1.0]], requires_grad=True)).sum().backward()


@pytest.mark.parametrize("kind", ["full", "pre"])
def test_hook_returning_another_dtype_raises(lib, kind):
    """A full hook's grad_input or a pre-hook's grad_output of another dtype (float64 for
    float32) is a RuntimeError naming both types, as a tensor hook's (T-8)."""
    layer = _linear(lib, 2.0, 0.0)
    if kind == "full":
        layer.register_full_backward_hook(lambda m, gi, go: (gi[0].double(),))
    else:
        layer.register_full_backward_pre_hook(lambda m, go: (go[0].double(),))
    x = lib.tensor([[1.0]], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"has changed the type of value \(was \w+\.FloatTensor"):
        layer(x).sum().backward()
    assert x.grad is None


def test_full_hooks_chain_and_prepend(lib):
    """B-17: full hooks chain; prepend=True runs first."""
    layer = _linear(lib, 1.0, 0.0)
    order = []
    layer.register_full_backward_hook(
        lambda m, gi, go: order.append(("a", _r(gi[0]))) or (gi[0] * 2,)
    )
    layer.register_full_backward_hook(lambda m, gi, go: order.append(("b", _r(gi[0]))))
    layer.register_full_backward_hook(
        lambda m, gi, go: order.append(("first", _r(gi[0]))) or (gi[0] + 1,), prepend=True
    )
    x = lib.tensor([[1.0]], requires_grad=True)
    layer(x).sum().backward()
    assert order == [("first", [1.0]), ("a", [2.0]), ("b", [4.0])]
    assert _r(x.grad) == [4.0]


def test_none_entries_in_returns(lib):
    """B-18: full hook (None,) leaves x.grad None; pre-hook (None,) gives zeros upstream."""
    layer = _linear(lib, 2.0, 0.0)
    layer.register_full_backward_hook(lambda m, gi, go: (None,))
    x = lib.tensor([[1.0]], requires_grad=True)
    layer(x).sum().backward()
    assert x.grad is None and _r(layer.weight.grad) == [1.0]

    layer = _linear(lib, 2.0, 0.0)
    seen = []
    layer.register_full_backward_pre_hook(lambda m, go: (None,))
    layer.register_full_backward_hook(lambda m, gi, go: seen.append((_r(gi[0]), go)))
    x = lib.tensor([[1.0]], requires_grad=True)
    layer(x).sum().backward()
    assert seen == [([0.0], (None,))]
    assert _r(x.grad) == [0.0] and layer.weight.grad is None


def test_hooks_bound_at_forward_time(lib):
    """B-19: a hook added after forward does not fire; one removed after forward still does."""
    layer = _linear(lib, 2.0, 0.0)
    calls = []
    handle = layer.register_full_backward_hook(lambda *a: calls.append("early"))
    out = layer(lib.tensor([[1.0]], requires_grad=True))
    handle.remove()
    layer.register_full_backward_hook(lambda *a: calls.append("late"))
    out.sum().backward()
    assert calls == ["early"]


def test_regular_and_full_hooks_exclude_each_other_stickily(lib):
    """B-20: mixing kinds raises in either order, even after removal; pre-hooks combine with both."""
    a = lib.nn.Linear(1, 1)
    a.register_full_backward_hook(lambda *x: None).remove()
    with pytest.raises(RuntimeError):
        a.register_backward_hook(lambda *x: None)
    a.register_full_backward_pre_hook(lambda *x: None)
    b = lib.nn.Linear(1, 1)
    b.register_backward_hook(lambda *x: None).remove()
    with pytest.raises(RuntimeError):
        b.register_full_backward_hook(lambda *x: None)
    b.register_full_backward_pre_hook(lambda *x: None)


def test_order_within_one_backward_through_sequential(lib, global_hooks):
    """B-21/G-2/T-18: tensor hook, global pre, local pre, params, global full, local full, upstream."""
    log = []
    model = lib.nn.Sequential(_linear(lib, 2.0, 0.5), lib.nn.Tanh())
    lin, act = model[0], model[1]
    names = {id(model): "seq", id(lin): "lin", id(act): "tanh"}
    global_hooks("backward_pre", lambda m, go: log.append(("gpre", names[id(m)])))
    global_hooks("backward", lambda m, gi, go: log.append(("gfull", names[id(m)])))
    for m in (model, lin, act):
        m.register_full_backward_pre_hook(lambda mod, go: log.append(("pre", names[id(mod)])))
        m.register_full_backward_hook(lambda mod, gi, go: log.append(("full", names[id(mod)])))
    lin.weight.register_hook(lambda g: log.append(("param", "weight")))
    lin.bias.register_hook(lambda g: log.append(("param", "bias")))
    x = lib.tensor([[1.0]], requires_grad=True)
    x.register_hook(lambda g: log.append(("input", "x")))
    out = model(x)
    out.register_hook(lambda g: log.append(("tensor", "out")))
    out.sum().backward()
    params = [e for e in log if e[0] == "param"]
    assert [e for e in log if e[0] != "param"] == [
        ("tensor", "out"),
        ("gpre", "seq"),
        ("pre", "seq"),
        ("gpre", "tanh"),
        ("pre", "tanh"),
        ("gfull", "tanh"),
        ("full", "tanh"),
        ("gpre", "lin"),
        ("pre", "lin"),
        ("gfull", "lin"),
        ("full", "lin"),
        ("gfull", "seq"),
        ("full", "seq"),
        ("input", "x"),
    ]
    assert sorted(params) == [("param", "bias"), ("param", "weight")]
    assert log.index(params[-1]) < log.index(("gfull", "lin"))
    assert log.index(("pre", "lin")) < log.index(params[0])


def test_exception_in_module_hook_keeps_earlier_grads(lib):
    """E-1/E-2: a raising full hook propagates; its module's weight grad is already in place."""

    class HookError(Exception):
        pass

    layer = _linear(lib, 2.0, 0.0)

    def boom(m, gi, go):
        raise HookError

    layer.register_full_backward_hook(boom)
    x = lib.tensor([[3.0]], requires_grad=True)
    with pytest.raises(HookError):
        layer(x).sum().backward()
    assert _r(layer.weight.grad) == [3.0] and x.grad is None


def test_retain_graph_fires_module_hooks_again(lib):
    """N-2: with retain_graph=True, pre and full module hooks fire on every backward."""
    layer = _linear(lib, 2.0, 0.0)
    calls = []
    layer.register_full_backward_pre_hook(lambda *a: calls.append("pre"))
    layer.register_full_backward_hook(lambda *a: calls.append("full"))
    loss = layer(lib.tensor([[1.0]], requires_grad=True)).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert calls == ["pre", "full", "pre", "full"]


def test_non_tensor_output_warns_and_disables_backward_hooks(lib):
    """B-23: a list output warns at call time and no full or pre hook ever fires."""

    class ListOut(lib.nn.Module):
        def forward(self, x):
            return [x * 2]

    m = ListOut()
    calls = []
    m.register_full_backward_pre_hook(lambda *a: calls.append("pre"))
    m.register_full_backward_hook(lambda *a: calls.append("full"))
    x = lib.tensor([1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="module output should be a Tensor or a tuple of Tensors"):
        out = m(x)
    out[0].sum().backward()
    assert calls == [] and _r(x.grad) == [2.0]


@pytest.mark.parametrize("where", ["local", "global"])
def test_non_tensor_output_warning_points_into_module_call(lib, global_hooks, where):
    """B-23's warning points at the module-call machinery (torch's module.py), whichever way
    the backward hook was registered."""

    class ListOut(lib.nn.Module):
        def forward(self, x):
            return [x * 2]

    m = ListOut()
    if where == "local":
        m.register_full_backward_hook(lambda *a: None)
    else:
        global_hooks("backward", lambda *a: None)
    with pytest.warns(UserWarning, match="module output should be a Tensor") as caught:
        m(lib.tensor([1.0], requires_grad=True))
    assert [w.filename.replace("\\", "/").split("/")[-3:] for w in caught] == [
        ["nn", "modules", "module.py"]
    ]


def test_hooks_run_with_grad_disabled_in_module_hooks(lib):
    """T-16: gradients in module hooks do not require grad."""
    layer = _linear(lib, 2.0, 0.0)
    seen = []
    layer.register_full_backward_hook(
        lambda m, gi, go: seen.append(
            (gi[0].requires_grad, go[0].requires_grad, lib.is_grad_enabled())
        )
    )
    layer(lib.tensor([[1.0]], requires_grad=True)).sum().backward()
    assert seen == [(False, False, False)]


def test_loss_with_target_and_a_newer_branch_keeps_torch_order(lib):
    """B-11/T-18 through a loss whose target needs no gradient: the loss's input wrapper runs
    right after the loss (its other edge, to the target, is unused), after the newer branch
    and before the layer it came from."""
    layer, loss_fn = _linear(lib, 2.0, 0.0), lib.nn.MSELoss()
    seen = []
    for name, module in (("lin", layer), ("mse", loss_fn)):
        module.register_full_backward_pre_hook(lambda m, go, name=name: seen.append(f"{name} pre"))
        module.register_full_backward_hook(
            lambda m, gi, go, name=name: seen.append((f"{name} full", [_r(g) for g in gi]))
        )
    x = lib.tensor([[1.5]], requires_grad=True)
    h = layer(x)
    h.register_hook(lambda g: seen.append(("h", _r(g))))
    first = loss_fn(h, lib.tensor([[1.0]]))
    z = x * 3
    z.register_hook(lambda g: seen.append(("z", _r(g))))
    (first + z.sum()).backward()
    assert seen == [
        ("z", [1.0]),
        "mse pre",
        ("mse full", [[4.0], [0.0]]),
        ("h", [4.0]),
        "lin pre",
        ("lin full", [[8.0]]),
    ]
    assert _r(x.grad) == [11.0]


def test_input_wrapper_waits_for_a_newer_ready_branch(lib):
    """T-18 at a module's input wrapper: when the node feeding it finishes, a branch built
    later inside forward (here ``scale * 3``) is ready too and runs first, so its tensor hook
    fires before the module's full hook."""
    seen = []

    class Scaled(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = lib.nn.Parameter(lib.tensor([0.5]))

        def forward(self, t):
            r = self.scale * 3
            r.register_hook(lambda g: seen.append(("r", _r(g))))
            return t * 2 + r

    m = Scaled()
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(("full", _r(gi[0]))))
    x = lib.tensor([1.0], requires_grad=True)
    m(x).sum().backward()
    assert seen == [("r", [1.0]), ("full", [2.0])]
    assert _r(m.scale.grad) == [3.0] and _r(x.grad) == [2.0]
