"""State-dict hooks, registration hooks, nn.Buffer, torch.__future__ and global-table resets,
each checked on hookgrad and on torch 2.13 (the ``lib`` fixture)."""

from __future__ import annotations

from collections import OrderedDict

import pytest


@pytest.fixture
def registry(lib):  # type: ignore[no-untyped-def]
    """``lib.nn.modules.module``, with the global hook tables emptied again afterwards."""
    module = lib.nn.modules.module
    yield module
    for name in ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks"):
        setattr(module, name, OrderedDict())


def test_assigning_a_fresh_dict_drops_the_global_hooks(lib, registry):
    """``module._global_forward_hooks = OrderedDict()`` removes every global forward hook."""
    calls = []
    registry.register_module_forward_hook(lambda m, a, o: calls.append("fwd"))
    registry.register_module_forward_pre_hook(lambda m, a: calls.append("pre"))
    layer = lib.nn.Sigmoid()
    layer(lib.ones(2))
    registry._global_forward_hooks = OrderedDict()
    registry._global_forward_pre_hooks = OrderedDict()
    layer(lib.ones(2))
    assert calls == ["pre", "fwd"]
    assert len(registry._global_forward_hooks) == 0


def test_assigned_dict_hooks_run(lib, registry):
    """A dict assigned to ``_global_forward_hooks`` is the table module calls run."""
    calls = []
    registry._global_forward_hooks = OrderedDict({12345: lambda m, a, o: calls.append(o.sum())})
    lib.nn.Identity()(lib.ones(3))
    assert [float(c) for c in calls] == [3.0]


def test_reset_after_a_backward_hook_leaves_module_calls_clean(lib, registry):
    """After resetting ``_global_backward_hooks`` a module call runs no backward hook."""
    seen = []
    registry.register_module_full_backward_hook(lambda m, gi, go: seen.append(1))
    x = lib.ones(2, requires_grad=True)
    lib.nn.Sigmoid()(x).sum().backward()
    registry._global_backward_hooks = OrderedDict()
    lib.nn.Sigmoid()(x).sum().backward()
    assert seen == [1]
    assert [round(v, 4) for v in x.grad.tolist()] == [0.3932, 0.3932]


@pytest.mark.parametrize("kind", ["buffer", "module", "parameter"])
@pytest.mark.parametrize("returns", [False, True])
def test_registration_hooks_see_and_replace_values(lib, kind, returns):
    """Global registration hooks get (module, name, value); a return replaces the value."""
    seen = []

    def hook(module, name, value):
        seen.append((type(module).__name__, name))
        if returns:
            return replacement

    register = getattr(lib.nn.modules.module, f"register_module_{kind}_registration_hook")
    if kind == "buffer":
        replacement = lib.full((2,), 7.0)
    elif kind == "module":
        replacement = lib.nn.Tanh()
    else:
        replacement = lib.nn.Parameter(lib.full((2,), 5.0))
    handle = register(hook)
    try:
        owner = lib.nn.Module()
        if kind == "buffer":
            owner.register_buffer("b", lib.zeros(2))
            owner.c = lib.nn.Buffer(lib.zeros(2))
            value = owner.b
        elif kind == "module":
            owner.add_module("b", lib.nn.ReLU())
            owner.c = lib.nn.ReLU()
            value = owner.b
        else:
            owner.register_parameter("b", lib.nn.Parameter(lib.zeros(2)))
            owner.c = lib.nn.Parameter(lib.zeros(2))
            value = owner.b
    finally:
        handle.remove()
    assert seen == [("Module", "b"), ("Module", "c")]
    assert (value is replacement) == returns
    owner.register_buffer("d", lib.zeros(1)) if kind == "buffer" else None
    assert len(seen) == 2  # removed


def test_registration_hooks_can_tag_parameters(lib):
    """A registration hook may set attributes on parameters and buffers, as torch's tests do."""

    def tag(module, name, value):
        value.registered = True

    registry = lib.nn.modules.module
    handles = [
        registry.register_module_parameter_registration_hook(tag),
        registry.register_module_buffer_registration_hook(tag),
    ]
    try:
        layer = lib.nn.Linear(2, 2)
        layer.stat = lib.nn.Buffer(lib.zeros(2))
    finally:
        for h in handles:
            h.remove()
    assert layer.weight.registered and layer.bias.registered and layer.stat.registered


def test_buffer_assignment_registers_with_persistence(lib):
    """``m.x = nn.Buffer(t, persistent=...)`` registers a buffer sharing t's memory."""
    m = lib.nn.Module()
    t = lib.arange(3.0)
    m.keep = lib.nn.Buffer(t)
    m.skip = lib.nn.Buffer(lib.ones(2), persistent=False)
    m.plain = lib.zeros(1)
    assert list(m._buffers) == ["keep", "skip"]
    assert list(m.state_dict()) == ["keep"]
    assert isinstance(m.keep, lib.nn.Buffer) and not isinstance(t, lib.nn.Buffer)
    assert isinstance(m.keep, lib.Tensor) and not m.keep.requires_grad
    t.add_(1)
    assert m.keep.tolist() == [1.0, 2.0, 3.0]
    m.skip = lib.full((2,), 3.0)  # a plain tensor keeps the buffer non-persistent
    assert list(m.state_dict()) == ["keep"] and m.skip.tolist() == [3.0, 3.0]
    assert lib.nn.Buffer(lib.ones(1, requires_grad=True)).requires_grad


def test_state_dict_pre_and_post_hooks(lib):
    """Pre-hooks get (module, prefix, keep_vars); public post-hooks must return None."""
    model = lib.nn.Sequential(lib.nn.Linear(1, 1))
    calls = []
    model.register_state_dict_pre_hook(lambda m, p, k: calls.append(("pre", p, k)))
    model[0].register_state_dict_pre_hook(lambda m, p, k: calls.append(("pre0", p, k)))

    def post(module, sd, prefix, meta):
        calls.append(("post", prefix, sorted(sd), meta["version"]))
        sd["extra"] = 1

    model.register_state_dict_post_hook(post)
    sd = model.state_dict(prefix="m.", keep_vars=True)
    assert calls == [
        ("pre", "m.", True),
        ("pre0", "m.0.", True),
        ("post", "m.", ["m.0.bias", "m.0.weight"], 1),
    ]
    assert sd["extra"] == 1
    model.register_state_dict_post_hook(lambda m, s, p, meta: {})
    with pytest.raises(RuntimeError, match=r"^state_dict post-hook must return None$"):
        model.state_dict()


def test_private_state_dict_hook_return_replaces_root_only(lib):
    """``_register_state_dict_hook``: a return replaces the dict on the root module only."""
    model = lib.nn.Sequential(lib.nn.Linear(1, 1))
    model[0]._register_state_dict_hook(lambda m, s, p, meta: {"ignored": 0})
    assert sorted(model.state_dict()) == ["0.bias", "0.weight"]

    def replace(m, s, p, meta):
        return OrderedDict(only=len(s))

    model._register_state_dict_hook(replace)
    assert model.state_dict() == {"only": 2}
    public = lambda m, s, p, meta: None  # noqa: E731
    model.register_state_dict_post_hook(public)
    with pytest.raises(RuntimeError, match="previously registered via register_state_dict_post"):
        model._register_state_dict_hook(public)


def test_load_state_dict_hooks_and_their_arguments(lib):
    """Load pre-hooks see the module's slice of the dict; post-hooks can clear the keys."""
    model = lib.nn.Sequential(lib.nn.Linear(1, 1))
    calls = []

    def pre(module, sd, prefix, meta, strict, missing, unexpected, errors):
        calls.append(("pre", type(module).__name__, prefix, sorted(sd), strict))

    model[0].register_load_state_dict_pre_hook(pre)
    model[0]._register_load_state_dict_pre_hook(lambda sd, prefix, *rest: calls.append(prefix))

    def post(module, keys):
        calls.append(("post", list(keys.missing_keys), list(keys.unexpected_keys)))
        keys.unexpected_keys.clear()

    model.register_load_state_dict_post_hook(post)
    sd = model.state_dict()
    sd["junk"] = lib.zeros(1)
    result = model.load_state_dict(sd, strict=True)
    assert calls == [
        ("pre", "Linear", "0.", ["0.bias", "0.weight"], True),
        "0.",
        ("post", [], ["junk"]),
    ]
    assert result.missing_keys == [] and result.unexpected_keys == []


def test_load_state_dict_post_hook_keys_reach_strict_error(lib):
    """Keys a post-hook adds make a strict load fail with them in the message."""
    layer = lib.nn.Linear(1, 1)

    def post(module, keys):
        keys.missing_keys.append("foo")
        keys.unexpected_keys.append("bar")

    handle = layer.register_load_state_dict_post_hook(post)
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "foo".*\n.*"bar"'):
        layer.load_state_dict(layer.state_dict())
    handle.remove()
    assert layer.load_state_dict(layer.state_dict()).missing_keys == []


def test_load_pre_hook_does_not_keep_its_module_alive(lib):
    """A load pre-hook registered with the module holds it weakly, as torch's _WrappedHook."""
    import gc
    import weakref

    layer = lib.nn.Linear(1, 1)
    layer.register_load_state_dict_pre_hook(lambda *a: None)
    ref = weakref.ref(layer)
    del layer
    gc.collect()
    assert ref() is None


def test_future_flags_and_overwrite_on_conversion(lib):
    """torch.__future__ switches: overwrite gives new Parameters on .double(); swap keeps them."""
    future = lib.__future__
    assert not future.get_overwrite_module_params_on_conversion()
    assert not future.get_swap_module_params_on_conversion()
    try:
        for overwrite, swap, same in [
            (False, False, True),
            (True, False, False),
            (True, True, True),
        ]:
            future.set_overwrite_module_params_on_conversion(overwrite)
            future.set_swap_module_params_on_conversion(swap)
            assert future.get_overwrite_module_params_on_conversion() is overwrite
            assert future.get_swap_module_params_on_conversion() is swap
            layer = lib.nn.Linear(2, 1)
            layer(lib.ones(1, 2)).sum().backward()
            weight, grad = layer.weight, layer.weight.grad
            layer.double()
            assert (layer.weight is weight) is same
            assert layer.weight.dtype == lib.float64 and layer.weight.grad.dtype == lib.float64
            assert layer.weight.grad.tolist() == grad.double().tolist()
            assert isinstance(layer.weight, lib.nn.Parameter) and layer.weight.requires_grad
    finally:
        future.set_overwrite_module_params_on_conversion(False)
        future.set_swap_module_params_on_conversion(False)
