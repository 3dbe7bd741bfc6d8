"""PyTorch's own module-hook tests that pin a rule of ours, adapted to run on hookgrad and on
torch 2.13 alike (the ``lib`` fixture).

Source: pytorch ``test/nn/test_module_hooks.py``; each test names the torch test it comes from.
The torch originals run unchanged against hookgrad in the external runner (see docs/hooks.md).
"""

from __future__ import annotations

import math
from collections import OrderedDict, namedtuple
from functools import partial

import pytest

ToyNamedTuple = namedtuple("ToyNamedTuple", "content")


def _toy_model(lib, named_tuple):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.seq1 = nn.Sequential(*[nn.Linear(10, 10) for _ in range(2)])
            self.seq2 = nn.Sequential(*[nn.Linear(10, 10) for _ in range(2)])

        def forward(self, x):
            return self.seq2(self.seq1(x))

    class ToyModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.net1 = Net()
            self.net2 = Net()

        def forward(self, x):
            res = self.net2(self.net1(x))
            return ToyNamedTuple(res) if named_tuple else (res,)

    return ToyModel()


@pytest.fixture
def fresh_globals(lib):  # type: ignore[no-untyped-def]
    """torch's TestModuleGlobalHooks.tearDown: reset the global tables by assignment."""
    yield lib.nn.modules.module
    registry = lib.nn.modules.module
    registry._global_backward_hooks = OrderedDict()
    registry._global_forward_hooks = OrderedDict()
    registry._global_forward_pre_hooks = OrderedDict()


@pytest.mark.parametrize("named_tuple", [True, False])
def test_mixed_hooks(lib, named_tuple):
    """Pre, forward, backward-pre and full backward hooks fire once each, in that order, and a
    namedtuple output stays one. From TestModuleHooks.test_mixed_hooks."""
    fired = []
    model = _toy_model(lib, named_tuple)
    x = lib.randn(10, 10)
    model.register_forward_pre_hook(lambda m, i: fired.append(0))
    model.register_forward_hook(lambda m, i, o: fired.append(1))
    model.register_full_backward_pre_hook(lambda m, go: fired.append(2))
    model.register_full_backward_hook(lambda m, gi, go: fired.append(3))
    out = model(x)
    assert fired == [0, 1]
    assert isinstance(out, ToyNamedTuple if named_tuple else tuple)
    out[0].sum().backward()
    assert fired == [0, 1, 2, 3]
    model(x)[0].sum().backward()
    assert fired == [0, 1, 2, 3, 0, 1, 2, 3]


@pytest.mark.parametrize("named_tuple", [True, False])
def test_full_backward_hooks_prepend_order(lib, named_tuple):
    """prepend=True puts a full backward hook first. From TestModuleHooks.test_full_backward_hooks."""
    fired = []
    model = _toy_model(lib, named_tuple)

    def hook(hook_id, module, grad_input, grad_output):
        assert module is model.net1 and len(grad_input) == 1 and len(grad_output) == 1
        fired.append(hook_id)

    for hook_id, prepend in [(0, False), (1, False), (2, False), (3, True), (4, True)]:
        model.net1.register_full_backward_hook(partial(hook, hook_id), prepend=prepend)
    model(lib.randn(10, 10))[0].sum().backward()
    assert fired == [4, 3, 0, 1, 2]


@pytest.mark.parametrize("requires_grad", [True, False])
def test_backward_pre_hook_changes_later_gradients(lib, requires_grad):
    """A backward pre-hook's return feeds the module's backward, also when the input needs no
    grad. From TestModuleHooks.test_full_backward_pre_hooks."""
    a = lib.ones(2, requires_grad=requires_grad)
    model = lib.nn.Linear(2, 2)
    model.register_full_backward_pre_hook(lambda m, grad_output: (grad_output[0] * 0,))
    model(a).sum().backward()
    assert model.weight.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert (a.grad.tolist() if requires_grad else a.grad) == ([0.0, 0.0] if requires_grad else None)


def test_always_called_forward_hooks(lib, fresh_globals):
    """always_call forward hooks run when forward or a pre-hook raises, once, and the global one
    too. From TestModuleHooks.test_always_called_forward_hooks."""

    class FailsInForward(lib.nn.Module):
        def forward(self, x, fail=True):
            if fail:
                raise RuntimeError("failing in forward")
            return x

    model = FailsInForward()
    stack = []

    def setup(m, i):
        stack.append(2)

    def setup_fails(m, i):
        stack.append(2)
        raise RuntimeError("failing in ctx setup")

    def shutdown(m, i, o):
        stack.append(-1)

    pre = model.register_forward_pre_hook(setup)
    post = model.register_forward_hook(shutdown, always_call=True)
    assert len(model._forward_hooks_always_called) == 1
    with pytest.raises(RuntimeError, match="failing in forward"):
        model(lib.ones(1))
    model(lib.ones(1), fail=False)
    assert stack == [2, -1, 2, -1]
    pre.remove()
    model.register_forward_pre_hook(setup_fails)
    with pytest.raises(RuntimeError, match="failing in ctx setup"):
        model(lib.ones(1), fail=False)
    assert stack == [2, -1, 2, -1, 2, -1]
    post.remove()
    assert len(model._forward_hooks_always_called) == 0
    handle = fresh_globals.register_module_forward_hook(shutdown, always_call=True)
    assert len(fresh_globals._global_forward_hooks_always_called) == 1
    with pytest.raises(RuntimeError, match="failing in ctx setup"):
        model(lib.ones(1), fail=False)
    handle.remove()
    assert len(fresh_globals._global_forward_hooks_always_called) == 0
    assert stack == [2, -1, 2, -1, 2, -1, 2, -1]


def test_module_global_hooks_counts(lib, fresh_globals):
    """Global forward and backward hooks fire for every module, removal stops them.
    From TestModuleGlobalHooks.test_module_global_hooks (with full backward hooks: whether the
    process's global backward hooks are regular or full is fixed by the first one registered,
    and the rest of this suite registers full ones)."""
    counter = {"forwards": 0, "backwards": 0}
    sig = 1 / (1 + 1 / math.e)

    def fw_hook(inc, module, input, output):
        assert isinstance(input, tuple) and isinstance(module, lib.nn.Sigmoid)
        assert [round(v, 5) for v in output.reshape(-1).tolist()] == [round(sig, 5)] * 25
        counter["forwards"] += inc

    def bw_hook(inc, module, grad_input, grad_output):
        assert isinstance(grad_input, tuple) and isinstance(grad_output, tuple)
        assert grad_output[0].reshape(-1).tolist() == [2.0] * 25
        counter["backwards"] += inc

    modules = [lib.nn.Sigmoid() for _ in range(3)]
    x = lib.ones(5, 5, requires_grad=True)
    fwd = fresh_globals.register_module_forward_hook(lambda *args: fw_hook(1, *args))
    bwd = fresh_globals.register_module_full_backward_hook(lambda *args: bw_hook(1, *args))
    outputs = [m(x) for m in modules]
    for out in outputs:
        out.backward(lib.ones(5, 5) * 2)
    assert counter == {"forwards": 3, "backwards": 3}
    fwd2 = fresh_globals.register_module_forward_hook(lambda *args: fw_hook(2, *args))
    bwd2 = fresh_globals.register_module_full_backward_hook(lambda *args: bw_hook(2, *args))
    modules[0](x).backward(lib.ones(5, 5) * 2)
    assert counter == {"forwards": 6, "backwards": 6}
    bwd2.remove()
    fwd2.remove()
    modules[1](x).backward(lib.ones(5, 5) * 2)
    assert counter == {"forwards": 7, "backwards": 7}
    fwd.remove()
    bwd.remove()


def test_global_and_local_hooks_order(lib, fresh_globals):
    """Global hooks of each kind run before the module's own.
    From TestModuleGlobalHooks.test_global_and_local_hooks_order."""
    order = []
    module = lib.nn.Sigmoid()
    fresh_globals.register_module_forward_pre_hook(lambda m, i: order.append("gpre"))
    module.register_forward_pre_hook(lambda m, i: order.append("lpre"))
    fresh_globals.register_module_forward_hook(lambda m, i, o: order.append("gfwd"))
    module.register_forward_hook(lambda m, i, o: order.append("lfwd"))
    fresh_globals.register_module_full_backward_hook(lambda m, gi, go: order.append("gbwd"))
    module.register_full_backward_hook(lambda m, gi, go: order.append("lbwd"))
    module(lib.randn(5, 5, requires_grad=True)).backward(lib.ones(5, 5))
    assert order == ["gpre", "lpre", "gfwd", "lfwd", "gbwd", "lbwd"]


def test_tables_reset_by_assignment_leave_the_next_test_clean(lib, fresh_globals):
    """After a test's tearDown assigns fresh dicts, a module call runs no leftover global hook
    (the one-process run of torch's suite depends on it)."""
    fired = []
    fresh_globals.register_module_forward_hook(lambda m, i, o: fired.append("fwd"))
    fresh_globals.register_module_full_backward_hook(lambda m, gi, go: fired.append("bwd"))
    fresh_globals._global_forward_hooks = OrderedDict()
    fresh_globals._global_backward_hooks = OrderedDict()
    x = lib.ones(2, requires_grad=True)
    lib.nn.Sigmoid()(x).sum().backward()
    assert fired == []


@pytest.mark.parametrize("kind", ["buffer", "submodule", "parameter"])
def test_registration_hooks_on_a_basic_net(lib, kind):
    """Global registration hooks see every buffer / submodule / parameter of a net, whether
    they return the value or not. From TestModuleHookNN.test_hook_{kind}_registration."""
    nn = lib.nn
    registry = nn.modules.module
    register = {
        "buffer": registry.register_module_buffer_registration_hook,
        "submodule": registry.register_module_module_registration_hook,
        "parameter": registry.register_module_parameter_registration_hook,
    }[kind]

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer_dummy_param = nn.Parameter(lib.empty(3, 5))
            self.layer_dummy_buf = nn.Buffer(lib.zeros(1, 3, 3, 7))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = Layer()
            self.dummy_param = nn.Parameter(lib.empty(3, 5))
            self.dummy_buf = nn.Buffer(lib.zeros(7, 3, 3, 1))

    for returns in (True, False):

        def hook(module, name, value, returns=returns):
            if kind == "submodule":
                module.registered = True
            value.registered = True
            return value if returns else None

        handle = register(hook)
        try:
            s = nn.Sequential(Net(), Net())
            items = {"buffer": s.buffers, "submodule": s.modules, "parameter": s.parameters}
            assert all(getattr(v, "registered", False) for v in items[kind]())
        finally:
            handle.remove()


def test_load_state_dict_post_hook(lib):
    """A post-hook on a wrapped module runs, can add keys that strict loading reports, and can
    clear them. From TestStateDictHooks.test_load_state_dict_post_hook."""
    called = []

    class MyModule(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.foo = lib.nn.Parameter(lib.rand(10))

        def my_post_load_hook(self, module, incompatible_keys):
            assert module is self
            incompatible_keys.missing_keys.append("foo")
            incompatible_keys.unexpected_keys.append("bar")
            called.append(1)

    nested = MyModule()
    wrapped = lib.nn.ModuleList([nested])
    handle = nested.register_load_state_dict_post_hook(nested.my_post_load_hook)
    ret = wrapped.load_state_dict(wrapped.state_dict(), strict=False)
    assert (ret.missing_keys, ret.unexpected_keys, len(called)) == (["foo"], ["bar"], 1)
    with pytest.raises(RuntimeError, match=r"foo.*\n.*bar"):
        wrapped.load_state_dict(wrapped.state_dict(), strict=True)
    handle.remove()
    ret = wrapped.load_state_dict(wrapped.state_dict(), strict=False)
    assert (ret.missing_keys, ret.unexpected_keys, len(called)) == ([], [], 2)

    def clear(module, incompatible_keys):
        incompatible_keys.missing_keys.clear()
        incompatible_keys.unexpected_keys.clear()

    nested.register_load_state_dict_post_hook(clear)
    state_dict = wrapped.state_dict()
    state_dict["extra"] = lib.ones(1)
    ret = wrapped.load_state_dict(state_dict, strict=True)
    assert (ret.missing_keys, ret.unexpected_keys) == ([], [])


def test_register_state_dict_pre_hook_on_submodules(lib):
    """A state-dict pre-hook runs on the module and on a submodule, with keep_vars and the
    prefix. From TestStateDictHooks._test_register_state_dict_pre_hook."""
    nn = lib.nn
    model = nn.Sequential(nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3)))
    seen = []
    hook = lambda module, prefix, keep_vars: seen.append((prefix, keep_vars))  # noqa: E731
    model.register_state_dict_pre_hook(hook)
    model[0].register_state_dict_pre_hook(hook)
    for keep_vars in (True, False):
        model.state_dict(prefix="foo.", keep_vars=keep_vars)
    model(lib.ones(10, 3))
    model.state_dict(prefix="foo.")
    assert seen == [
        ("foo.", True),
        ("foo.0.", True),
        ("foo.", False),
        ("foo.0.", False),
        ("foo.", False),
        ("foo.0.", False),
    ]
