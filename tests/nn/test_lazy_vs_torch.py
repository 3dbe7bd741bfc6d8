"""LazyLinear and UninitializedParameter against torch 2.13: the first call materializes."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402
from hookgrad.nn.modules.lazy import UninitializedParameter  # noqa: E402


def test_repr_and_class_before_and_after_the_first_call(lib):
    """LazyLinear prints in_features=0 until its first call, then is a Linear."""
    layer = lib.nn.LazyLinear(3)
    assert repr(layer) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert repr(layer.weight) == "<UninitializedParameter>"
    assert layer.has_uninitialized_params()
    layer(lib.ones(2, 4))
    assert type(layer) is lib.nn.Linear
    assert repr(layer) == "Linear(in_features=4, out_features=3, bias=True)"
    assert tuple(layer.weight.shape) == (3, 4) and tuple(layer.bias.shape) == (3,)
    assert type(layer.weight) is lib.nn.Parameter


def test_the_shape_of_an_uninitialized_parameter_is_torchs_error(fails_like_torch):
    """Reading an uninitialized weight's shape fails with torch's RuntimeError text."""
    fails_like_torch(lambda lib: lib.nn.LazyLinear(3).weight.shape)


def test_an_optimizer_built_before_the_first_call_trains_like_torch():
    """The parameters are materialized in place: an SGD built on the lazy module updates the
    materialized weights, giving torch's losses from the same weights."""
    x = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    losses = []
    start: dict[str, np.ndarray] = {}
    for lib in (torch, hookgrad):
        layer = lib.nn.LazyLinear(2)
        params = list(layer.parameters())
        opt = lib.optim.SGD(params, lr=0.1)
        layer(lib.tensor(x))  # the dry run
        assert [p is q for p, q in zip(params, layer.parameters())] == [True, True]
        if lib is torch:
            start = {k: v.detach().numpy().copy() for k, v in layer.state_dict().items()}
        else:
            layer.load_state_dict({k: hookgrad.tensor(v) for k, v in start.items()})
        run = []
        for _ in range(3):
            opt.zero_grad()
            loss = (layer(lib.tensor(x)) ** 2).mean()
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)


def test_default_init_uses_the_inferred_fan_in():
    """After materializing, weight and bias are torch's U(+-1/sqrt(in_features))."""
    layer = hookgrad.nn.LazyLinear(50)
    layer(hookgrad.ones(1, 64))
    bound = 1 / math.sqrt(64)
    for p in (layer.weight, layer.bias):
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.8 * bound


def test_hooks_see_materialized_parameters_and_the_init_hook_goes(lib):
    """A forward pre-hook registered before the first call runs after the materializing hook
    (it sees the shapes); afterwards only the user's hook is left, as in torch."""
    layer = lib.nn.LazyLinear(3, bias=False)
    seen = []
    layer.register_forward_pre_hook(lambda m, args: seen.append(tuple(m.weight.shape)))
    layer(lib.ones(2, 5))
    layer(lib.ones(2, 5))
    assert seen == [(3, 5), (3, 5)]
    assert len(layer._forward_pre_hooks) == 1
    assert not hasattr(layer, "_initialize_hook")


def test_full_backward_hook_on_the_first_call_matches_torch():
    """A full backward hook registered on the lazy module fires on the first call with
    torch's grad_input and grad_output."""
    x = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    records = []
    reference = torch.nn.LazyLinear(3)
    reference(torch.tensor(x))
    for lib in (torch, hookgrad):
        layer = lib.nn.LazyLinear(3)
        seen: list[list[np.ndarray]] = []
        layer.register_full_backward_hook(
            lambda m, gin, gout, seen=seen: seen.append([g.numpy().copy() for g in gin + gout])
        )
        if lib is hookgrad:  # start from torch's weights: materialize by loading them
            layer.load_state_dict(
                {k: hookgrad.tensor(v.detach().numpy()) for k, v in reference.state_dict().items()}
            )
        else:
            layer.load_state_dict(reference.state_dict())
        inp = lib.tensor(x, requires_grad=True)
        (layer(inp) * lib.arange(12.0).reshape(4, 3)).sum().backward()
        records.append(seen)
    assert len(records[0]) == len(records[1]) == 1
    for got, expected in zip(records[1][0], records[0][0]):
        np.testing.assert_allclose(got, expected, 1e-5, 1e-6)


def test_load_state_dict_materializes_the_parameters(lib):
    """Loading a Linear's state dict into a LazyLinear gives its parameters their shapes."""
    layer = lib.nn.LazyLinear(3)
    result = layer.load_state_dict(lib.nn.Linear(5, 3).state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    assert tuple(layer.weight.shape) == (3, 5) and not layer.has_uninitialized_params()


def test_uninitialized_parameter_is_a_parameter_until_materialized():
    """UninitializedParameter is a Parameter that requires grad; materialize keeps the object."""
    p = UninitializedParameter()
    assert isinstance(p, hookgrad.nn.Parameter) and p.requires_grad
    p.materialize((2, 3))
    assert type(p) is hookgrad.nn.Parameter and tuple(p.shape) == (2, 3)
