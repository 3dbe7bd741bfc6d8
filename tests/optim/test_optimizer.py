"""The Optimizer base: groups, zero_grad, state_dict round trips, closures and errors.

Tests taking ``lib`` run on hookgrad and on torch 2.13 with the same literal expectations.
"""

from __future__ import annotations

import copy
import pickle
import re
from typing import Any

import numpy as np
import pytest

import hookgrad
import hookgrad.optim


def _grads(step: int) -> list[np.ndarray]:
    rng = np.random.default_rng(100 + step)
    return [
        rng.standard_normal((3, 2)).astype(np.float32),
        rng.standard_normal(4).astype(np.float32),
    ]


def _params(lib: Any) -> list[Any]:
    return [
        lib.tensor(np.arange(6, dtype=np.float32).reshape(3, 2) / 4, requires_grad=True),
        lib.tensor(np.linspace(-1, 1, 4, dtype=np.float32), requires_grad=True),
    ]


def _advance(lib: Any, opt: Any, params: list[Any], steps: range) -> None:
    for step in steps:
        for p, g in zip(params, _grads(step)):
            p.grad = lib.tensor(g)
        opt.step()


OPTIMIZERS = {
    "sgd_momentum": ("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}),
    "adam_amsgrad": ("Adam", {"lr": 0.05, "amsgrad": True}),
    "adamw": ("AdamW", {"lr": 0.05, "weight_decay": 0.1}),
}


@pytest.mark.parametrize("name, kwargs", OPTIMIZERS.values(), ids=OPTIMIZERS.keys())
def test_state_dict_round_trip_continues_identically(lib, name, kwargs):
    """Save after 3 steps, load into a fresh optimizer, run 3 more: bitwise the 6-step result."""
    cls = getattr(lib.optim, name)
    straight = _params(lib)
    opt = cls(straight, **kwargs)
    _advance(lib, opt, straight, range(6))

    first = _params(lib)
    opt = cls(first, **kwargs)
    _advance(lib, opt, first, range(3))
    saved = copy.deepcopy(opt.state_dict())
    resumed = [lib.tensor(p.detach().numpy().copy(), requires_grad=True) for p in first]
    fresh = cls(resumed, lr=0.9)  # the loaded groups must restore lr=kwargs["lr"]
    fresh.load_state_dict(saved)
    assert fresh.param_groups[0]["lr"] == kwargs["lr"]
    assert fresh.param_groups[0]["params"][0] is resumed[0]
    _advance(lib, fresh, resumed, range(3, 6))
    for a, b in zip(straight, resumed):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())


def test_state_dict_format(lib):
    """Params become integer positions across groups; state is keyed by those positions."""
    a, b, c = (lib.tensor([1.0, 2.0], requires_grad=True) for _ in range(3))
    opt = lib.optim.SGD([{"params": [a, b]}, {"params": [c], "lr": 0.5}], lr=0.1, momentum=0.9)
    for p in (a, c):
        p.grad = lib.tensor([1.0, -1.0])
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert [g["lr"] for g in sd["param_groups"]] == [0.1, 0.5]
    assert sorted(sd["state"]) == [0, 2]
    assert sd["state"][2]["momentum_buffer"].tolist() == [1.0, -1.0]
    assert sd["state"][2]["momentum_buffer"] is opt.state[c]["momentum_buffer"]


def test_load_state_dict_shares_same_dtype_state(lib):
    """load_state_dict keeps state tensors of the parameter's dtype by reference, as torch does."""
    p = lib.tensor([1.0, 2.0], requires_grad=True)
    opt = lib.optim.Adam([p], lr=0.1)
    p.grad = lib.tensor([0.5, 0.5])
    opt.step()
    sd = opt.state_dict()
    q = lib.tensor([0.0, 0.0], requires_grad=True)
    other = lib.optim.Adam([q])
    other.load_state_dict(sd)
    assert other.state[q]["exp_avg"] is sd["state"][0]["exp_avg"]
    assert other.state[q]["step"].item() == 1.0


def test_load_state_dict_casts_state_to_param_dtype(lib):
    """Floating state is cast to the parameter's dtype; the step counter keeps float32."""
    p = lib.tensor([1.0, 2.0], requires_grad=True)
    opt = lib.optim.Adam([p])
    p.grad = lib.tensor([0.5, 0.5])
    opt.step()
    q = lib.tensor([0.0, 0.0], dtype=lib.float64, requires_grad=True)
    other = lib.optim.Adam([q])
    other.load_state_dict(opt.state_dict())
    assert other.state[q]["exp_avg"].dtype == lib.float64
    assert other.state[q]["step"].dtype == lib.float32


def test_load_state_dict_group_count_mismatch_raises(lib):
    """A state dict with another number of groups is refused with torch's ValueError."""
    p = lib.tensor([1.0], requires_grad=True)
    opt = lib.optim.SGD([p], lr=0.1)
    sd = opt.state_dict()
    sd["param_groups"] = sd["param_groups"] * 2
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(sd)


def test_load_state_dict_group_size_mismatch_raises(lib):
    """A saved group holding another number of parameters is refused."""
    p = lib.tensor([1.0], requires_grad=True)
    opt = lib.optim.SGD([p], lr=0.1)
    sd = opt.state_dict()
    sd["param_groups"][0]["params"] = [0, 1]
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict(sd)


def test_zero_grad_sets_none_by_default(lib):
    """zero_grad() drops every .grad; params without a grad stay without one."""
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0], requires_grad=True)
    opt = lib.optim.SGD([a, b], lr=0.1)
    a.grad = lib.tensor([5.0, 6.0])
    opt.zero_grad()
    assert a.grad is None
    assert b.grad is None


def test_zero_grad_in_place_keeps_the_tensor(lib):
    """zero_grad(set_to_none=False) zeroes the same grad tensor in place and bumps its version."""
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0], requires_grad=True)
    opt = lib.optim.SGD([a, b], lr=0.1)
    (a * a).sum().backward()
    grad = a.grad
    version = grad._version
    opt.zero_grad(set_to_none=False)
    assert a.grad is grad
    assert grad.tolist() == [0.0, 0.0]
    assert grad._version == version + 1
    assert b.grad is None


def test_zero_grad_detaches_a_graph_grad(lib):
    """A grad that is part of a graph is detached before zeroing (set_to_none=False)."""
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    opt = lib.optim.SGD([a], lr=0.1)
    source = lib.tensor([3.0, 4.0], requires_grad=True)
    a.grad = source * 2
    assert a.grad.grad_fn is not None
    opt.zero_grad(set_to_none=False)
    assert a.grad.grad_fn is None
    assert not a.grad.requires_grad
    assert a.grad.tolist() == [0.0, 0.0]


def test_step_returns_closure_loss_and_runs_it_with_grad(lib):
    """step(closure) evaluates the closure with grad mode on, then updates with the new grads."""
    w = lib.tensor([2.0, -1.0], requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.25)
    modes = []

    def closure():
        modes.append(lib.is_grad_enabled())
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with lib.no_grad():
        loss = opt.step(closure)
    assert modes == [True]
    assert loss.item() == 5.0
    assert w.tolist() == [1.0, -0.5]


def test_step_without_closure_returns_none(lib):
    """step() without a closure returns None."""
    w = lib.tensor([1.0], requires_grad=True)
    assert lib.optim.Adam([w]).step() is None


def test_params_without_grad_are_skipped(lib):
    """A parameter whose .grad is None is neither moved nor given state."""
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    opt = lib.optim.Adam([a, b], lr=0.1)
    a.grad = lib.tensor([1.0, 1.0])
    opt.step()
    assert b.tolist() == [3.0, 4.0]
    assert b._version == 0
    assert len(opt.state) == 1


def test_add_param_group_merges_defaults(lib):
    """add_param_group fills unset options from the defaults and keeps the ones given."""
    a = lib.tensor([1.0], requires_grad=True)
    b = lib.tensor([2.0], requires_grad=True)
    opt = lib.optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.01})
    group = opt.param_groups[1]
    assert group["params"] == [b]
    assert (group["lr"], group["momentum"], group["nesterov"]) == (0.01, 0.9, False)


def test_named_parameters_are_recorded(lib):
    """(name, tensor) pairs give the group a param_names list, saved in the state dict."""
    a = lib.tensor([1.0], requires_grad=True)
    b = lib.tensor([2.0], requires_grad=True)
    opt = lib.optim.SGD([("w", a), ("b", b)], lr=0.1)
    assert opt.param_groups[0]["params"][1] is b
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["w", "b"]


def test_optimizer_pickles_with_its_state(lib):
    """An optimizer survives pickling with its groups and state."""
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
    w.grad = lib.tensor([1.0, 1.0])
    opt.step()
    clone = pickle.loads(pickle.dumps(opt))
    assert clone.param_groups[0]["momentum"] == 0.9
    (buf,) = (s["momentum_buffer"] for s in clone.state.values())
    assert buf.tolist() == [1.0, 1.0]


def test_repr_lists_group_options(lib):
    """repr shows each group's options sorted by name."""
    w = lib.tensor([1.0], requires_grad=True)
    text = repr(lib.optim.SGD([w], lr=0.1))
    assert text.startswith("SGD (\nParameter Group 0\n    dampening: 0\n")
    assert "    lr: 0.1\n" in text
    assert text.endswith(")")


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_empty_parameter_list_raises(lib, name):
    """An optimizer without parameters raises torch's ValueError."""
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        getattr(lib.optim, name)([])


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_non_leaf_parameter_raises(lib, name):
    """A computed tensor cannot be optimized."""
    w = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        getattr(lib.optim, name)([w * 2])


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_negative_lr_raises(lib, name):
    """A negative learning rate is refused, quoting it."""
    w = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match=r"^Invalid learning rate: -1$"):
        getattr(lib.optim, name)([w], lr=-1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"momentum": 0, "nesterov": True},
            "Nesterov momentum requires a momentum and zero dampening",
        ),
        (
            {"momentum": 0.9, "dampening": 0.1, "nesterov": True},
            "Nesterov momentum requires a momentum and zero dampening",
        ),
        ({"momentum": -0.5}, "Invalid momentum value: -0.5"),
        ({"weight_decay": -0.1}, "Invalid weight_decay value: -0.1"),
    ],
    ids=["nesterov_no_momentum", "nesterov_dampening", "momentum", "weight_decay"],
)
def test_sgd_invalid_options_raise(lib, kwargs, message):
    """SGD validates momentum, weight decay and the Nesterov preconditions like torch."""
    w = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match=re.escape(message)):
        lib.optim.SGD([w], lr=0.1, **kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"betas": (1.0, 0.999)}, "Invalid beta parameter at index 0: 1.0"),
        ({"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1: -0.1"),
        ({"eps": -1e-8}, "Invalid epsilon value: -1e-08"),
        ({"weight_decay": -1.0}, "Invalid weight_decay value: -1.0"),
        ({"betas": (0, 0.9)}, "betas must be either both floats or both Tensors"),
    ],
    ids=["beta0", "beta1", "eps", "weight_decay", "int_beta"],
)
def test_adam_invalid_options_raise(lib, kwargs, message):
    """Adam validates betas, eps and weight decay with torch's messages."""
    w = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match=re.escape(message)):
        lib.optim.Adam([w], **kwargs)


def test_single_tensor_as_params_raises(lib):
    """A bare tensor (not an iterable of them) is a TypeError."""
    w = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts"):
        lib.optim.SGD(w, lr=0.1)


def test_non_tensor_param_raises(lib):
    """Only tensors can be optimized."""
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors"):
        lib.optim.SGD([[1.0, 2.0]], lr=0.1)


def test_param_in_two_groups_raises(lib):
    """A parameter may belong to one group only."""
    w = lib.tensor([1.0], requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.1)
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": [w]})


def test_set_of_params_raises(lib):
    """Sets have no stable order, so they are refused."""
    w = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(TypeError, match="ordered collections"):
        lib.optim.SGD([{"params": {w}}], lr=0.1)


def test_unsupported_step_variant_is_refused():
    """Options hookgrad does not implement (fused, differentiable) fail loudly, not silently."""
    w = hookgrad.tensor([1.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match=r"fused=True"):
        hookgrad.optim.Adam([w], fused=True)
    with pytest.raises(NotImplementedError, match=r"differentiable=True"):
        hookgrad.optim.SGD([w], differentiable=True)


def test_user_subclass_with_public_ops_works(lib):
    """A torch-style custom optimizer (own step under no_grad, p.add_) runs unchanged."""

    class SignSGD(lib.optim.Optimizer):
        def __init__(self, params, lr):
            super().__init__(params, {"lr": lr})

        @lib.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.add_(p.grad.sign(), alpha=-group["lr"])

    w = lib.tensor([1.0, -1.0, 0.5], requires_grad=True)
    opt = SignSGD([w], lr=0.25)
    w.grad = lib.tensor([3.0, -0.1, 0.0])
    opt.step()
    assert w.tolist() == [0.75, -0.75, 0.5]
    assert opt.state_dict()["param_groups"] == [{"lr": 0.25, "params": [0]}]
