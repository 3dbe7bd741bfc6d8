"""nn.Module behaviour: registration routing, traversal names and order, modes, grads, copies."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import hookgrad
import hookgrad.nn as nn


class Block(nn.Module):
    """Two linears sharing nothing, a buffer, and a non-persistent buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(4, 2, bias=False)
        self.register_buffer("steps", hookgrad.tensor([0.0]))
        self.register_buffer("scratch", hookgrad.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Net(nn.Module):
    """A block, a scale parameter and a head whose weight is tied to the block's fc2."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.scale = nn.Parameter(hookgrad.tensor([2.0]))
        self.head = nn.Linear(2, 4, bias=False)
        self.head.weight = nn.Parameter(hookgrad.ones(4, 2))

    def forward(self, x):
        return self.head(self.block(x) * self.scale)


def test_module_call_is_call_impl():
    """__call__ is _call_impl, the single seam where hook dispatch will go."""
    assert nn.Module.__call__ is nn.Module._call_impl


def test_call_runs_forward_with_args_and_kwargs():
    """module(*args, **kwargs) returns forward(*args, **kwargs)."""

    class Affine(nn.Module):
        def forward(self, x, *, shift=0.0):
            return x * 3 + shift

    out = Affine()(hookgrad.tensor([1.0, 2.0]), shift=0.5)
    assert out.tolist() == [3.5, 6.5]


def test_missing_forward_raises_not_implemented():
    """A Module without forward raises NotImplementedError naming the class."""
    with pytest.raises(
        NotImplementedError, match=r'Module \[Module\] is missing the required "forward"'
    ):
        nn.Module()(hookgrad.tensor([1.0]))


def test_named_parameters_order_and_names():
    """named_parameters walks registration order depth-first with dotted names."""
    names = [name for name, _ in Net().named_parameters()]
    assert names == [
        "scale",
        "block.fc1.weight",
        "block.fc1.bias",
        "block.fc2.weight",
        "head.weight",
    ]


def test_named_parameters_prefix_and_recurse():
    """prefix is prepended; recurse=False lists only the module's own parameters."""
    net = Net()
    assert [n for n, _ in net.named_parameters(recurse=False)] == ["scale"]
    assert [n for n, _ in net.block.named_parameters(prefix="model")][:2] == [
        "model.fc1.weight",
        "model.fc1.bias",
    ]


def test_shared_parameter_listed_once_unless_duplicates_kept():
    """A tied parameter appears once by default and twice with remove_duplicate=False."""
    net = Net()
    net.head.weight = net.block.fc1.bias  # a (4,) parameter now also registered under head
    names = [n for n, _ in net.named_parameters()]
    assert "head.weight" not in names
    all_names = [n for n, _ in net.named_parameters(remove_duplicate=False)]
    assert all_names.count("head.weight") == 1 and "block.fc1.bias" in all_names
    assert len(list(net.parameters())) == 4


def test_named_modules_root_first_with_qualified_names():
    """named_modules yields ("", root) first, then every submodule by dotted name."""
    names = [name for name, _ in Net().named_modules()]
    assert names == ["", "block", "block.fc1", "block.act", "block.fc2", "head"]


def test_named_modules_prefix_and_duplicates():
    """A module registered twice appears once unless remove_duplicate=False."""
    shared = nn.ReLU()
    seq = nn.Sequential(shared, nn.Linear(1, 1), shared)
    assert [n for n, _ in seq.named_modules(prefix="m")] == ["m", "m.0", "m.1"]
    assert [n for n, _ in seq.named_modules(remove_duplicate=False)] == ["", "0", "1", "2"]


def test_children_are_direct_only():
    """children/named_children list direct submodules only, in registration order."""
    net = Net()
    assert [n for n, _ in net.named_children()] == ["block", "head"]
    assert list(net.children()) == [net.block, net.head]
    assert len(list(net.modules())) == 6


def test_named_buffers_include_non_persistent():
    """named_buffers lists persistent and non-persistent buffers alike."""
    assert [n for n, _ in Net().named_buffers()] == ["block.steps", "block.scratch"]
    assert [b.shape for b in Block().buffers()] == [(1,), (2,)]


def test_setattr_routes_parameters_modules_and_buffers():
    """Assigning a Parameter, a Module or a registered buffer name lands in the right table."""
    m = nn.Module()
    m.w = nn.Parameter(hookgrad.ones(2))
    m.sub = nn.Tanh()
    m.register_buffer("buf", hookgrad.zeros(1))
    m.buf = hookgrad.ones(3)
    m.plain = 5
    assert list(m._parameters) == ["w"] and list(m._modules) == ["sub"]
    assert m._buffers["buf"].shape == (3,)
    assert "plain" in m.__dict__ and "w" not in m.__dict__


def test_reassigning_a_name_moves_it_between_tables():
    """A Parameter replaces a child or buffer of that name; a Module cannot replace a Parameter."""
    m = nn.Module()
    m.x = nn.ReLU()
    m.register_buffer("y", hookgrad.ones(1), persistent=False)
    m.x = nn.Parameter(hookgrad.ones(1))
    m.y = nn.Parameter(hookgrad.ones(2))
    assert list(m._parameters) == ["x", "y"] and not m._modules and not m._buffers
    assert not m._non_persistent_buffers_set
    with pytest.raises(TypeError, match="as parameter 'x'"):
        m.x = nn.ReLU()


def test_setattr_type_errors_match_torch():
    """A plain tensor over a parameter, or an int over a child module, raises TypeError."""
    layer = nn.Linear(2, 2)
    with pytest.raises(
        TypeError, match=r"cannot assign 'hookgrad\.FloatTensor' as parameter 'weight'"
    ):
        layer.weight = hookgrad.ones(2, 2)
    seq = nn.Sequential(nn.ReLU())
    with pytest.raises(TypeError, match="cannot assign 'int' as child module '0'"):
        setattr(seq, "0", 3)
    layer.weight = None
    assert layer._parameters["weight"] is None


def test_assigning_before_init_raises_attribute_error():
    """A subclass that forgets super().__init__() cannot register a parameter."""

    class Broken(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(hookgrad.ones(1))

    with pytest.raises(
        AttributeError, match=r"cannot assign parameters before Module.__init__\(\) call"
    ):
        Broken()


def test_register_errors():
    """Registration rejects dotted, empty, clashing names and wrong types like torch."""
    layer = nn.Linear(2, 2)
    with pytest.raises(KeyError, match="attribute 'weight' already exists"):
        layer.register_buffer("weight", hookgrad.ones(1))
    with pytest.raises(KeyError, match=r'contain "\."'):
        layer.register_parameter("a.b", None)
    with pytest.raises(KeyError, match="empty string"):
        layer.register_buffer("", None)
    with pytest.raises(TypeError, match="cannot assign 'int' object to buffer 'b2'"):
        layer.register_buffer("b2", 3)
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        layer.add_module("x", 3)
    with pytest.raises(
        TypeError, match=r"cannot assign 'hookgrad\.FloatTensor' object to parameter"
    ):
        layer.register_parameter("p", hookgrad.ones(1))


def test_non_leaf_parameter_rejected():
    """register_parameter refuses a Parameter that is not a leaf (ValueError)."""
    p = nn.Parameter(hookgrad.ones(2))
    p.grad_fn = (p * 2).grad_fn
    with pytest.raises(ValueError, match="Cannot assign non-leaf Tensor to parameter 'q'"):
        nn.Module().register_parameter("q", p)


def test_register_module_alias_and_getattr_error():
    """register_module adds a child; an unknown attribute raises torch's AttributeError."""
    m = nn.Module()
    m.register_module("act", nn.ReLU())
    assert isinstance(m.act, nn.ReLU)
    with pytest.raises(AttributeError, match="'Module' object has no attribute 'nope'"):
        m.nope  # noqa: B018


def test_delattr_removes_from_each_table():
    """del removes parameters, buffers (and their persistence flag) and modules."""
    b = Block()
    del b.fc1, b.scratch
    del b.fc2.weight
    assert "fc1" not in b._modules and "scratch" not in b._buffers
    assert "scratch" not in b._non_persistent_buffers_set
    assert "weight" not in b.fc2._parameters
    b.extra = 1
    del b.extra
    assert not hasattr(b, "extra")


def test_dir_lists_registered_members():
    """dir() includes parameters, buffers and children by name."""
    names = dir(Block())
    assert {"fc1", "steps", "scratch", "forward"} <= set(names)
    assert "weight" in dir(nn.Linear(1, 1))


def test_get_submodule_and_get_parameter():
    """Dotted lookups reach nested modules, parameters and buffers; misses name the culprit."""
    net = Net()
    assert net.get_submodule("block.fc2") is net.block.fc2
    assert net.get_submodule("") is net
    assert net.get_parameter("block.fc1.bias") is net.block.fc1.bias
    assert net.get_buffer("block.steps") is net.block.steps
    with pytest.raises(AttributeError, match="Block has no attribute `fc9`"):
        net.get_submodule("block.fc9")
    with pytest.raises(AttributeError, match=r"`in_features` is not an nn\.Parameter"):
        net.get_parameter("block.fc1.in_features")
    with pytest.raises(AttributeError, match="`weight` is not a buffer"):
        net.get_buffer("block.fc1.weight")
    with pytest.raises(AttributeError, match=r"`weight` is not an nn\.Module"):
        nn.Sequential(Block()).get_submodule("0.fc1.weight.act")


def test_train_eval_propagate_to_every_submodule():
    """train(False)/eval() set training on all modules and return self."""
    net = Net()
    assert net.eval() is net
    assert [m.training for m in net.modules()] == [False] * 6
    net.block.train()
    assert (net.training, net.block.training, net.block.fc1.training) == (False, True, True)
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        net.train("yes")


def test_zero_grad_sets_none_or_zeros():
    """zero_grad() sets grads to None; set_to_none=False zeroes them in place."""
    layer = nn.Linear(2, 1)
    layer(hookgrad.ones(3, 2)).sum().backward()
    grad = layer.weight.grad
    layer.zero_grad(set_to_none=False)
    assert layer.weight.grad is grad and grad.tolist() == [[0.0, 0.0]]
    assert layer.bias.grad.tolist() == [0.0]
    layer.zero_grad()
    assert layer.weight.grad is None and layer.bias.grad is None


def test_requires_grad_toggles_all_parameters():
    """requires_grad_(False) freezes every parameter and returns the module."""
    net = Net()
    assert net.requires_grad_(False) is net
    assert not any(p.requires_grad for p in net.parameters())


def test_apply_visits_children_before_parent():
    """apply(fn) calls fn on each submodule depth-first, the root last."""
    seen = []
    Net().apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Tanh", "Linear", "Block", "Linear", "Net"]


def test_apply_can_initialise_weights():
    """apply with an init function changes every Linear weight in place."""
    net = Net()
    net.apply(lambda m: nn.init.constant_(m.weight, 0.25) if isinstance(m, nn.Linear) else None)
    assert net.block.fc1.weight.tolist()[0] == [0.25] * 3 and net.head.weight.sum().item() == 2.0


def test_to_float_double_keep_parameter_objects():
    """double()/float()/to(dtype) cast floating params and buffers, keeping Parameter identity."""
    net = Net()
    weight = net.block.fc1.weight
    assert net.double() is net and net.block.fc1.weight is weight
    assert weight.dtype == hookgrad.float64 and net.block.steps.dtype == hookgrad.float64
    assert net.to(hookgrad.float32) is net and weight.dtype == hookgrad.float32
    assert net.to("cpu") is net and net.cpu() is net and net.float() is net
    out = net.double()(hookgrad.ones(1, 3, dtype=hookgrad.float64))
    assert out.dtype == hookgrad.float64


def test_to_rejects_integer_dtype():
    """Module.to(int64) raises TypeError as torch does."""
    with pytest.raises(TypeError, match="only accepts floating point"):
        nn.Linear(1, 1).to(hookgrad.int64)


def test_modules_hash_by_identity():
    """Modules are hashable and compare by identity (usable in sets and dict keys)."""
    a, b = nn.Linear(1, 1), nn.Linear(1, 1)
    assert len({a, b, a}) == 2 and a != b and a == a


def test_pickle_round_trip_keeps_values_and_ties():
    """A pickled module loads with equal values, Parameters, and tied weights still tied."""
    net = Net()
    net.head.weight = nn.Parameter(hookgrad.ones(4, 2) * 3)
    net.tied = net.head
    clone = pickle.loads(pickle.dumps(net))
    assert isinstance(clone.block.fc1.weight, nn.Parameter)
    assert clone.block.fc1.weight.tolist() == net.block.fc1.weight.tolist()
    assert clone.tied is clone.head and clone.block.scratch.shape == (2,)
    x = hookgrad.ones(2, 3)
    assert np.allclose(clone(x).detach().numpy(), net(x).detach().numpy())


def test_deepcopy_is_independent():
    """deepcopy gives new Parameters with equal values that train independently."""
    net = Net()
    twin = copy.deepcopy(net)
    assert twin.scale is not net.scale and twin.scale.requires_grad
    with hookgrad.no_grad():
        twin.scale.fill_(5.0)
    assert net.scale.item() == 2.0 and twin.scale.item() == 5.0


def test_extra_repr_feeds_repr():
    """A custom extra_repr with one line goes inside the parentheses."""

    class Scaled(nn.Module):
        def extra_repr(self):
            return "factor=3"

    assert repr(Scaled()) == "Scaled(factor=3)"


def test_repr_nested_indentation():
    """Nested modules print indented two spaces per level, children by name."""
    assert repr(Net()) == (
        "Net(\n"
        "  (block): Block(\n"
        "    (fc1): Linear(in_features=3, out_features=4, bias=True)\n"
        "    (act): Tanh()\n"
        "    (fc2): Linear(in_features=4, out_features=2, bias=False)\n"
        "  )\n"
        "  (head): Linear(in_features=2, out_features=4, bias=False)\n"
        ")"
    )


def test_module_init_rejects_arguments():
    """Module.__init__ takes no arguments (TypeError), as in torch."""
    with pytest.raises(TypeError, match="unexpected keyword argument 'size'"):
        nn.Module(size=3)
