"""README/getting-started: `optim.SGD`, `Adam`, `AdamW` and `nn.utils` with torch's rules.

A battery of bad arguments and odd settings, each run on torch 2.13 and on hookgrad: the same
exception class and text (torch. -> hookgrad.), or the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402


def _p(lib: Any, *values: float) -> Any:
    return lib.nn.Parameter(lib.tensor(list(values) or [1.0, 1.0]))


MISUSE: dict[str, Callable[[Any], Any]] = {
    "negative_lr": lambda lib: lib.optim.SGD([_p(lib)], lr=-0.1),
    "nesterov_without_momentum": lambda lib: lib.optim.SGD([_p(lib)], lr=0.1, nesterov=True),
    "nesterov_with_dampening": lambda lib: lib.optim.SGD(
        [_p(lib)], lr=0.1, momentum=0.9, dampening=0.1, nesterov=True
    ),
    "negative_momentum": lambda lib: lib.optim.SGD([_p(lib)], lr=0.1, momentum=-1),
    "negative_weight_decay": lambda lib: lib.optim.SGD([_p(lib)], lr=0.1, weight_decay=-1),
    "adam_beta1_one": lambda lib: lib.optim.Adam([_p(lib)], betas=(1.0, 0.999)),
    "adam_beta2_negative": lambda lib: lib.optim.Adam([_p(lib)], betas=(0.9, -0.1)),
    "adam_negative_eps": lambda lib: lib.optim.Adam([_p(lib)], eps=-1e-8),
    "adamw_negative_lr": lambda lib: lib.optim.AdamW([_p(lib)], lr=-1.0),
    "empty_parameter_list": lambda lib: lib.optim.SGD([], lr=0.1),
    "parameter_in_two_groups": lambda lib: (
        lambda p: lib.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    )(_p(lib)),
    "non_leaf_parameter": lambda lib: lib.optim.SGD([_p(lib) * 2], lr=0.1),
    "a_number_among_the_parameters": lambda lib: lib.optim.SGD([_p(lib), 3.0], lr=0.1),
    "a_tensor_not_a_list": lambda lib: lib.optim.SGD(_p(lib), lr=0.1),
    "load_other_group_count": lambda lib: (
        lambda a, b: lib.optim.SGD([a], lr=0.1).load_state_dict(
            lib.optim.SGD([a, b], lr=0.1).state_dict()
        )
    )(_p(lib), _p(lib)),
    "load_other_group_size": lambda lib: (
        lambda a, b: lib.optim.SGD([a], lr=0.1).load_state_dict(
            lib.optim.SGD([{"params": [a, b]}], lr=0.1).state_dict()
        )
    )(_p(lib), _p(lib)),
    "add_group_with_a_known_parameter": lambda lib: (
        lambda p: lib.optim.SGD([p], lr=0.1).add_param_group({"params": [p]})
    )(_p(lib)),
    "clip_norm_with_an_unknown_norm_string": lambda lib: lib.nn.utils.clip_grad_norm_(
        [_p(lib)], 1.0, error_if_nonfinite=True, norm_type="fro"
    ),
}


@pytest.mark.parametrize("name", list(MISUSE))
def test_misuse_raises_torchs_exception_and_text(name: str, fails_like_torch: Any) -> None:
    """Bad optimizer arguments fail as in torch: same class, same message."""
    fails_like_torch(MISUSE[name])


def _steps(lib: Any, make: Callable[[Any, list[Any]], Any], grads: list[list[float]]) -> Any:
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 3.0]))
    q = lib.nn.Parameter(lib.tensor([0.5, 0.0, -0.5]))
    optimizer = make(lib, [p, q])
    for g in grads:
        p.grad = lib.tensor(g)
        q.grad = None if g[0] > 0 else lib.tensor(g[::-1])  # q skips some steps
        optimizer.step()
    return [p.detach().numpy().copy(), q.detach().numpy().copy()]


UPDATES: dict[str, Callable[[Any, list[Any]], Any]] = {
    "sgd_nesterov_wd": lambda lib, ps: lib.optim.SGD(
        ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1
    ),
    "sgd_dampening": lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.5, dampening=0.5),
    "sgd_maximize": lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.3, maximize=True),
    "adam_amsgrad": lambda lib, ps: lib.optim.Adam(ps, lr=0.05, amsgrad=True, weight_decay=0.1),
    "adam_maximize": lambda lib, ps: lib.optim.Adam(ps, lr=0.05, maximize=True),
    "adamw_amsgrad": lambda lib, ps: lib.optim.AdamW(ps, lr=0.05, weight_decay=0.5, amsgrad=True),
    "groups_own_lr": lambda lib, ps: lib.optim.SGD(
        [{"params": [ps[0]]}, {"params": [ps[1]], "lr": 1.0, "momentum": 0.9}], lr=0.1
    ),
    "adam_zero_lr": lambda lib, ps: lib.optim.Adam(ps, lr=0.0),
    "adam_betas_edge": lambda lib, ps: lib.optim.Adam(ps, lr=0.1, betas=(0.0, 0.0)),
}
GRADS = [[0.1, -1.0, 2.0], [-0.5, 0.0, 1e-8], [3.0, -3.0, 0.0], [-1e4, 1e-4, 7.0]]


@pytest.mark.parametrize("name", list(UPDATES))
def test_update_rules_match_torch_on_odd_settings(name: str) -> None:
    """'optim.SGD, Adam, AdamW with torch's update rules', also for edge settings and grads."""
    expected = _steps(torch, UPDATES[name], GRADS)
    got = _steps(hookgrad, UPDATES[name], GRADS)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-6)


def test_zero_grad_and_step_on_none_grads_match_torch() -> None:
    """zero_grad() sets .grad to None (torch's default); a None grad leaves its parameter."""
    for lib in (torch, hookgrad):
        p = _p(lib, 1.0)
        optimizer = lib.optim.SGD([p], lr=1.0, momentum=0.9)
        p.grad = lib.ones(1)
        optimizer.zero_grad()
        assert p.grad is None
        optimizer.step()
        np.testing.assert_array_equal(p.detach().numpy(), [1.0])


def test_a_parameter_listed_twice_warns_as_torch() -> None:
    """A duplicate parameter in one group is accepted with torch's UserWarning."""
    messages = []
    for lib in (torch, hookgrad):
        p = _p(lib)
        with pytest.warns(UserWarning) as caught:
            lib.optim.SGD([p, p], lr=0.1)
        messages.append([str(w.message) for w in caught])
    assert messages[0] == messages[1]


def _with_grad(lib: Any, grad: list[float]) -> Any:
    p = lib.nn.Parameter(lib.ones(len(grad)))
    p.grad = lib.tensor(grad)
    return p


UTILS: dict[str, Callable[[Any], Any]] = {
    "norm_of_a_single_tensor": lambda lib: (
        lambda p: (lib.nn.utils.clip_grad_norm_(p, 1.0), p.grad)
    )(_with_grad(lib, [3.0, 4.0])),
    "norm_type_inf_string": lambda lib: (
        lambda p: (lib.nn.utils.clip_grad_norm_([p], 1.0, norm_type="inf"), p.grad)
    )(_with_grad(lib, [3.0, -4.0])),
    "norm_type_zero": lambda lib: (
        lambda p: (lib.nn.utils.clip_grad_norm_([p], 1.0, norm_type=0), p.grad)
    )(_with_grad(lib, [3.0, 0.0])),
    "norm_of_a_generator": lambda lib: (
        lambda p: (lib.nn.utils.clip_grad_norm_((q for q in [p]), 1.0), p.grad)
    )(_with_grad(lib, [3.0, 4.0])),
    "max_norm_zero": lambda lib: (lambda p: (lib.nn.utils.clip_grad_norm_([p], 0.0), p.grad))(
        _with_grad(lib, [3.0, 4.0])
    ),
    "max_norm_negative": lambda lib: (lambda p: (lib.nn.utils.clip_grad_norm_([p], -1.0), p.grad))(
        _with_grad(lib, [3.0, 4.0])
    ),
    "value_of_a_single_tensor_with_nan": lambda lib: (
        lambda p: (lib.nn.utils.clip_grad_value_(p, 1.0), p.grad)
    )(_with_grad(lib, [float("nan"), -4.0, 0.5])),
    "total_norm_of_nothing": lambda lib: lib.nn.utils.get_total_norm([]),
    "clip_with_a_given_norm": lambda lib: (
        lambda p: (lib.nn.utils.clip_grads_with_norm_([p], 1.0, lib.tensor(10.0)), p.grad)
    )(_with_grad(lib, [3.0, 4.0])),
    "vector_to_parameters": lambda lib: (
        lambda a: (lib.nn.utils.vector_to_parameters(lib.tensor([5.0, 6.0]), [a]), a.detach())
    )(lib.nn.Parameter(lib.ones(2))),
}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if hasattr(value, "detach"):
        return value.detach().numpy().astype(np.float64).tolist()
    return value


@pytest.mark.parametrize("name", list(UTILS))
def test_nn_utils_on_edge_arguments_match_torch(name: str) -> None:
    """clip_grad_norm_ / clip_grad_value_ / get_total_norm / vector_to_parameters as torch."""
    expected = _plain(UTILS[name](torch))
    got = _plain(UTILS[name](hookgrad))
    np.testing.assert_equal(got, expected)


@pytest.mark.parametrize("norm_type", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf"), float("-inf"), -2.0])
@pytest.mark.parametrize("value", [3e38, -2e20, 1e-30, 0.0], ids=str)
def test_total_norm_of_one_entry_is_its_magnitude_as_in_torch(value: float, norm_type: float):
    """torch's vector_norm of a one-entry tensor is |x| (no overflow or underflow of x**p):
    a scalar parameter's huge gradient still clips to max_norm instead of to zero."""
    expected = torch.nn.utils.get_total_norm([torch.tensor([value])], norm_type)
    got = hookgrad.nn.utils.get_total_norm([hookgrad.tensor([value])], norm_type)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    p, q = hookgrad.nn.Parameter(hookgrad.ones(1)), torch.nn.Parameter(torch.ones(1))
    p.grad, q.grad = hookgrad.tensor([value]), torch.tensor([value])
    hookgrad.nn.utils.clip_grad_norm_([p], 1e-3, norm_type)
    torch.nn.utils.clip_grad_norm_([q], 1e-3, norm_type)
    np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def _resumed(lib: Any, how: str) -> list[float]:
    """Two Adam steps, a checkpoint (state_dict or pickle) resumed, two more steps."""
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0]))
    q = lib.nn.Parameter(lib.tensor([0.5]))

    def make(a: Any, b: Any) -> Any:
        groups = [{"params": [a]}, {"params": [b], "lr": 0.5}]
        return lib.optim.Adam(groups, lr=0.1, amsgrad=True)

    optimizer = make(p, q)
    for i in range(2):
        p.grad, q.grad = lib.tensor([1.0, float(i)]), lib.tensor([-1.0])
        optimizer.step()
    if how == "state_dict":
        p, q = lib.nn.Parameter(p.detach().clone()), lib.nn.Parameter(q.detach().clone())
        state = optimizer.state_dict()
        optimizer = make(p, q)
        optimizer.load_state_dict(state)
    elif how == "pickle":
        import pickle

        optimizer = pickle.loads(pickle.dumps(optimizer))
        (p,), (q,) = (g["params"] for g in optimizer.param_groups)
    for _ in range(2):
        p.grad, q.grad = lib.tensor([0.3, -1.0]), lib.tensor([2.0])
        optimizer.step()
    return [*p.detach().numpy().tolist(), *q.detach().numpy().tolist()]


@pytest.mark.parametrize("how", ["state_dict", "pickle", "uninterrupted"])
def test_a_resumed_optimizer_continues_torchs_trajectory(how: str) -> None:
    """state_dict/load_state_dict (per-group options, amsgrad state) and pickling resume
    exactly where torch's optimizer resumes."""
    np.testing.assert_allclose(_resumed(hookgrad, how), _resumed(torch, how), rtol=1e-6)
