"""Differential tests: RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam against torch 2.13.

Both libraries get the same gradients (some None, so those parameters skip a step) for many
steps; parameters, state tensors (in torch's key order) and param_groups must agree at float32
tolerance: torch's vectorised CPU kernels fuse some multiply-adds, numpy rounds each operation.
The optimizers are built on hookgrad's Optimizer base, so hooks, gates and plugins apply.
"""

from __future__ import annotations

import copy
import importlib
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookgrad
import hookgrad.optim
from hookgrad.plugins.grad_clip import GradClip
from hookgrad.testing import capture_events

from .conftest import assert_same_run, run_steps

torch = pytest.importorskip("torch")

NAMES = ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"]

CONFIGS: dict[str, dict[str, Any]] = {
    "RMSprop-default": {},
    "RMSprop-centered": {"lr": 0.01, "centered": True},
    "RMSprop-momentum": {"lr": 0.01, "momentum": 0.9, "alpha": 0.9},
    "RMSprop-all": {
        "lr": 0.005,
        "centered": True,
        "momentum": 0.5,
        "weight_decay": 0.1,
        "maximize": True,
    },
    "Adagrad-default": {},
    "Adagrad-decay": {"lr": 0.1, "lr_decay": 0.05, "initial_accumulator_value": 0.3},
    "Adagrad-all": {
        "lr": 0.05,
        "lr_decay": 0.01,
        "weight_decay": 0.2,
        "eps": 1e-6,
        "maximize": True,
    },
    "Adadelta-default": {},
    "Adadelta-rho": {"lr": 0.5, "rho": 0.5, "eps": 1e-4},
    "Adadelta-all": {"lr": 0.3, "rho": 0.95, "weight_decay": 0.1, "maximize": True},
    "Adamax-default": {},
    "Adamax-betas": {"lr": 0.01, "betas": (0.5, 0.9), "eps": 1e-3},
    "Adamax-all": {"lr": 0.01, "weight_decay": 0.1, "maximize": True},
    "NAdam-default": {},
    "NAdam-momentum_decay": {"lr": 0.01, "momentum_decay": 0.05, "betas": (0.8, 0.99)},
    "NAdam-l2": {"lr": 0.01, "weight_decay": 0.1},
    "NAdam-decoupled": {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True},
    "NAdam-maximize": {"lr": 0.01, "maximize": True, "weight_decay": 0.01},
    "RAdam-default": {},
    "RAdam-short_horizon": {"lr": 0.01, "betas": (0.9, 0.9)},
    "RAdam-l2": {"lr": 0.01, "weight_decay": 0.1},
    "RAdam-decoupled": {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True},
    "RAdam-maximize": {"lr": 0.01, "maximize": True},
}


@pytest.mark.parametrize("key", CONFIGS)
def test_optimizer_matches_torch_over_many_steps(key: str) -> None:
    """40 steps with skipped grads: parameters, state and groups equal torch's (float32 tol)."""
    name = key.split("-")[0]
    config = CONFIGS[key]
    assert_same_run(lambda lib, params: getattr(lib.optim, name)(params, **config), steps=40)


def test_param_groups_with_own_options_match_torch() -> None:
    """Groups override options per group (an RMSprop group centered, one with momentum)."""
    assert_same_run(
        lambda lib, params: lib.optim.RMSprop(
            [
                {"params": params[:1], "centered": True},
                {"params": params[1:], "momentum": 0.7, "lr": 0.002},
            ],
            lr=0.01,
        ),
        steps=20,
    )


lrs = st.floats(1e-4, 0.1)
betas = st.tuples(st.floats(0.0, 0.99), st.floats(0.5, 0.999))
decays = st.sampled_from([0.0, 0.01, 0.3])


@settings(max_examples=12, deadline=None)
@given(
    lr=lrs,
    alpha=st.floats(0.5, 0.999),
    momentum=st.sampled_from([0.0, 0.5, 0.9]),
    centered=st.booleans(),
    weight_decay=decays,
    maximize=st.booleans(),
    steps=st.integers(1, 30),
    seed=st.integers(0, 2**16),
)
def test_rmsprop_hypothesis(steps: int, seed: int, **config: Any) -> None:
    """RMSprop agrees with torch for any hyperparameters and step count."""
    assert_same_run(lambda lib, p: lib.optim.RMSprop(p, **config), steps, seed)


@settings(max_examples=12, deadline=None)
@given(
    lr=lrs,
    lr_decay=st.sampled_from([0.0, 0.001, 0.1]),
    initial_accumulator_value=st.sampled_from([0.0, 0.1, 1.0]),
    weight_decay=decays,
    maximize=st.booleans(),
    steps=st.integers(1, 30),
    seed=st.integers(0, 2**16),
)
def test_adagrad_hypothesis(steps: int, seed: int, **config: Any) -> None:
    """Adagrad agrees with torch for any hyperparameters and step count."""
    assert_same_run(lambda lib, p: lib.optim.Adagrad(p, **config), steps, seed)


@settings(max_examples=12, deadline=None)
@given(
    lr=st.floats(0.01, 1.0),
    rho=st.floats(0.0, 1.0),
    eps=st.sampled_from([1e-6, 1e-3]),
    weight_decay=decays,
    maximize=st.booleans(),
    steps=st.integers(1, 30),
    seed=st.integers(0, 2**16),
)
def test_adadelta_hypothesis(steps: int, seed: int, **config: Any) -> None:
    """Adadelta agrees with torch for any hyperparameters and step count."""
    assert_same_run(lambda lib, p: lib.optim.Adadelta(p, **config), steps, seed)


@settings(max_examples=12, deadline=None)
@given(
    lr=lrs,
    betas=betas,
    weight_decay=decays,
    maximize=st.booleans(),
    steps=st.integers(1, 30),
    seed=st.integers(0, 2**16),
)
def test_adamax_hypothesis(steps: int, seed: int, **config: Any) -> None:
    """Adamax agrees with torch for any hyperparameters and step count."""
    assert_same_run(lambda lib, p: lib.optim.Adamax(p, **config), steps, seed)


@settings(max_examples=12, deadline=None)
@given(
    lr=lrs,
    betas=betas,
    weight_decay=decays,
    momentum_decay=st.sampled_from([0.0, 4e-3, 0.1]),
    decoupled_weight_decay=st.booleans(),
    maximize=st.booleans(),
    steps=st.integers(1, 30),
    seed=st.integers(0, 2**16),
)
def test_nadam_hypothesis(steps: int, seed: int, **config: Any) -> None:
    """NAdam agrees with torch for any hyperparameters and step count."""
    assert_same_run(lambda lib, p: lib.optim.NAdam(p, **config), steps, seed)


@settings(max_examples=12, deadline=None)
@given(
    lr=lrs,
    betas=betas,
    weight_decay=decays,
    decoupled_weight_decay=st.booleans(),
    maximize=st.booleans(),
    steps=st.integers(1, 30),
    seed=st.integers(0, 2**16),
)
def test_radam_hypothesis(steps: int, seed: int, **config: Any) -> None:
    """RAdam agrees with torch (both sides of the rectification threshold) for any settings."""
    assert_same_run(lambda lib, p: lib.optim.RAdam(p, **config), steps, seed)


# ---------------------------------------------------------------------------- state dicts
@pytest.mark.parametrize("name", NAMES)
def test_state_dict_round_trip_resumes_identically(name: str) -> None:
    """A state dict loaded into a fresh optimizer, and a pickled copy, continue bit for bit."""
    params, opt = run_steps(hookgrad, lambda lib, p: getattr(lib.optim, name)(p, lr=0.01), 5)
    copies = [hookgrad.tensor(p.detach().numpy(), requires_grad=True) for p in params]
    fresh = getattr(hookgrad.optim, name)(copies, lr=0.5)
    fresh.load_state_dict(copy.deepcopy(opt.state_dict()))
    unpickled = pickle.loads(pickle.dumps(opt))
    assert fresh.param_groups[0]["lr"] == 0.01
    runs = [(opt, params), (fresh, copies), (unpickled, unpickled.param_groups[0]["params"])]
    rng = np.random.default_rng(1)
    for _ in range(4):
        grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
        for optimizer, group in runs:
            for p, g in zip(group, grads):
                p.grad = hookgrad.tensor(g)
            optimizer.step()
    for _, group in runs[1:]:
        for p, q in zip(params, group):
            np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


@pytest.mark.parametrize("name", NAMES)
def test_foreach_flag_changes_nothing(name: str) -> None:
    """``foreach=True`` is accepted and gives the same parameters as the default."""
    runs = [
        run_steps(hookgrad, lambda lib, p, f=flag: getattr(lib.optim, name)(p, foreach=f), 6)[0]
        for flag in (None, True)
    ]
    for p, q in zip(*runs):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


UNSUPPORTED = [
    (name, flag)
    for name in NAMES
    for flag in ("capturable", "differentiable", "fused")
    if flag in getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)]).defaults
]


@pytest.mark.parametrize(("name", "flag"), UNSUPPORTED)
def test_unsupported_modes_raise(name: str, flag: str) -> None:
    """``capturable``, ``differentiable`` and ``fused`` raise NotImplementedError naming the flag."""
    with pytest.raises(NotImplementedError, match=f"{name} does not implement {flag}=True"):
        getattr(hookgrad.optim, name)([hookgrad.zeros(1, requires_grad=True)], **{flag: True})


def test_old_checkpoint_with_float_steps_is_converted() -> None:
    """A state dict whose ``step`` and ``mu_product`` are floats loads as float32 tensors."""
    params, opt = run_steps(hookgrad, lambda lib, p: lib.optim.NAdam(p), 3)
    saved = opt.state_dict()
    for p_state in saved["state"].values():
        p_state["step"] = float(p_state["step"].item())
        p_state["mu_product"] = float(p_state["mu_product"].item())
    fresh = hookgrad.optim.NAdam(params)
    fresh.load_state_dict(saved)
    for p_state in fresh.state.values():
        assert isinstance(p_state["step"], hookgrad.Tensor)
        assert isinstance(p_state["mu_product"], hookgrad.Tensor)
        assert p_state["step"].dtype == np.float32


def test_adagrad_creates_state_at_construction_as_torch() -> None:
    """Adagrad fills ``sum`` with ``initial_accumulator_value`` before any step, as torch."""
    for lib in (hookgrad, torch):
        p = lib.zeros(3, requires_grad=True)
        opt = lib.optim.Adagrad([p], initial_accumulator_value=0.25)
        state = opt.state_dict()["state"]
        assert list(state) == [0]
        assert list(state[0]) == ["step", "sum"]
        assert state[0]["sum"].tolist() == [0.25, 0.25, 0.25]
        assert state[0]["step"].item() == 0.0


# ---------------------------------------------------------------------------- errors
BAD: dict[str, tuple[str, dict[str, Any]]] = {
    "rmsprop_lr": ("RMSprop", {"lr": -1.0}),
    "rmsprop_eps": ("RMSprop", {"eps": -1.0}),
    "rmsprop_momentum": ("RMSprop", {"momentum": -0.1}),
    "rmsprop_weight_decay": ("RMSprop", {"weight_decay": -0.1}),
    "rmsprop_alpha": ("RMSprop", {"alpha": -0.1}),
    "adagrad_lr_decay": ("Adagrad", {"lr_decay": -0.1}),
    "adagrad_accumulator": ("Adagrad", {"initial_accumulator_value": -0.1}),
    "adagrad_eps": ("Adagrad", {"eps": -0.1}),
    "adadelta_rho": ("Adadelta", {"rho": 1.5}),
    "adadelta_eps": ("Adadelta", {"eps": -1.0}),
    "adamax_beta0": ("Adamax", {"betas": (1.0, 0.9)}),
    "adamax_beta1": ("Adamax", {"betas": (0.9, -0.1)}),
    "nadam_momentum_decay": ("NAdam", {"momentum_decay": -1.0}),
    "nadam_weight_decay": ("NAdam", {"weight_decay": -1.0}),
    "radam_lr": ("RAdam", {"lr": -0.5}),
    "radam_beta": ("RAdam", {"betas": (0.9, 1.0)}),
}


@pytest.mark.parametrize("case", BAD.values(), ids=BAD.keys())
def test_bad_hyperparameters_raise_torch_errors(case: tuple[str, dict[str, Any]]) -> None:
    """A bad hyperparameter raises torch's ValueError with torch's message."""
    name, config = case
    messages = []
    for lib in (hookgrad, torch):
        with pytest.raises(ValueError) as info:
            getattr(lib.optim, name)([lib.zeros(2, requires_grad=True)], **config)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("name", NAMES)
def test_defaults_and_signature_match_torch(name: str) -> None:
    """Each optimizer's ``defaults`` (names, values, order) equal torch's."""
    hg = getattr(hookgrad.optim, name)([hookgrad.zeros(2, requires_grad=True)])
    tt = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)])
    assert list(hg.defaults.items()) == list(tt.defaults.items())


# ---------------------------------------------------------------------------- hooks and plugins
@pytest.mark.parametrize("name", NAMES)
def test_step_hooks_fire_around_the_update(name: str, lib: Any) -> None:
    """Global and local pre/post hooks fire in torch's order, the post hook after the update."""
    calls: list[Any] = []
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    opt = getattr(lib.optim, name)([w], lr=0.1)
    registry = importlib.import_module(f"{lib.__name__}.optim.optimizer")
    handles = [
        registry.register_optimizer_step_pre_hook(lambda o, a, k: calls.append("global pre")),
        registry.register_optimizer_step_post_hook(lambda o, a, k: calls.append("global post")),
        opt.register_step_pre_hook(lambda o, a, k: calls.append("pre")),
        opt.register_step_post_hook(lambda o, a, k: calls.append(w.tolist() != [1.0, 2.0])),
    ]
    try:
        w.grad = lib.tensor([1.0, -1.0])
        opt.step()
    finally:
        for handle in handles:
            handle.remove()
    assert calls == ["global pre", "pre", True, "global post"]


@pytest.mark.parametrize("name", NAMES)
def test_a_vetoing_gate_skips_the_step(name: str, gates: Any) -> None:
    """A step gate answering False leaves parameters and state untouched."""
    w = hookgrad.tensor([1.0, 2.0], requires_grad=True)
    opt = getattr(hookgrad.optim, name)([w], lr=0.1)
    before = {k: {n: v.tolist() for n, v in s.items()} for k, s in opt.state.items()}
    gates(lambda o: False)
    w.grad = hookgrad.tensor([1.0, -1.0])
    assert opt.step() is None
    assert w.tolist() == [1.0, 2.0]
    assert {k: {n: v.tolist() for n, v in s.items()} for k, s in opt.state.items()} == before


@pytest.mark.parametrize("name", NAMES)
def test_grad_clip_plugin_clips_before_the_update(name: str) -> None:
    """With the grad_clip plugin, a step equals torch's clip_grad_norm_(1.0) then step."""
    rng = np.random.default_rng(3)
    weights = [rng.standard_normal(s).astype(np.float32) for s in [(3, 2), (4,)]]
    grads = [[3 * rng.standard_normal(w.shape).astype(np.float32) for w in weights] for _ in "ab"]
    h_params = [hookgrad.tensor(w, requires_grad=True) for w in weights]
    t_params = [torch.tensor(w, requires_grad=True) for w in weights]
    h_opt = getattr(hookgrad.optim, name)(h_params, lr=0.05)
    t_opt = getattr(torch.optim, name)(t_params, lr=0.05)
    with capture_events(("grad_clip", GradClip(GradClip.Config()))):
        for step_grads in grads:
            for p, g in zip(h_params, step_grads):
                p.grad = hookgrad.tensor(g)
            h_opt.step()
    for step_grads in grads:
        for p, g in zip(t_params, step_grads):
            p.grad = torch.tensor(g)
        torch.nn.utils.clip_grad_norm_(t_params, 1.0)
        t_opt.step()
    for h, t in zip(h_params, t_params):
        np.testing.assert_allclose(h.detach().numpy(), t.detach().numpy(), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_step_bumps_the_parameter_version(name: str) -> None:
    """A step writes the parameter in place: a graph that saved it refuses to backward."""
    w = hookgrad.tensor([1.0, 2.0], requires_grad=True)
    opt = getattr(hookgrad.optim, name)([w], lr=0.1)
    loss = (w * w).sum()
    w.grad = hookgrad.tensor([1.0, 1.0])
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
