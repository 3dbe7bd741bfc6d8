"""Canaries: each torch 2.13 implementation detail that hookgrad.engines.torch._private uses.

A torch release that changes one of them fails here, naming it, instead of making the runtime
silently wrong on torch models.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hookgrad.engines.torch import _private  # noqa: E402


def test_tensor_backward_looks_up_torch_autograd_backward_at_each_call() -> None:
    """Replacing torch.autograd.backward is seen by loss.backward()."""
    original = _private.autograd_backward()
    calls: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> None:
        calls.append(args[0])
        original(*args, **kwargs)

    _private.set_autograd_backward(spy)
    try:
        loss = (torch.ones(2, requires_grad=True) * 2).sum()
        loss.backward()
    finally:
        _private.set_autograd_backward(original)
    assert len(calls) == 1 and calls[0] is loss
    assert torch.autograd.backward is original


def test_graph_task_id_tells_inside_from_outside_a_backward() -> None:
    """-1 outside any backward, another value in a hook running during one."""
    inside: list[int] = []
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: inside.append(_private.graph_task_id()))
    y.sum().backward()
    assert _private.graph_task_id() == -1
    assert inside and inside[0] != -1


def test_global_step_pre_hooks_are_an_ordered_dict_keyed_by_handle_id() -> None:
    """move_to_front puts a later-registered global pre-hook first."""
    from torch.optim import optimizer as module

    order: list[str] = []
    first = module.register_optimizer_step_pre_hook(lambda *a: order.append("first"))
    second = module.register_optimizer_step_pre_hook(lambda *a: order.append("second"))
    try:
        assert isinstance(module._global_optimizer_pre_hooks, OrderedDict)
        assert second.id in module._global_optimizer_pre_hooks
        _private.move_to_front(second)
        param = torch.nn.Parameter(torch.ones(1))
        param.grad = torch.ones(1)
        torch.optim.SGD([param], lr=0.1).step()
    finally:
        first.remove()
        second.remove()
    assert order == ["second", "first"]


@pytest.mark.parametrize("kind", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_a_step_on_the_stand_in_changes_nothing(kind: str) -> None:
    """The optimizer's own step function run with the stand-in as self updates nothing."""
    param = torch.nn.Parameter(torch.arange(3.0))
    param.grad = torch.ones(3)
    optimizer = getattr(torch.optim, kind)([param], lr=0.1)
    optimizer.step()
    state = {k: v.clone() if torch.is_tensor(v) else v for k, v in optimizer.state[param].items()}
    weights = param.detach().clone()
    stand_in = _private.step_stand_in(optimizer)
    type(optimizer).step(stand_in)
    assert torch.equal(param, weights)
    for key, value in optimizer.state[param].items():
        assert torch.equal(torch.as_tensor(value), torch.as_tensor(state[key])), key
    assert stand_in.param_groups[0]["lr"] == 0.1 and optimizer.param_groups[0]["params"] == [param]


def test_a_callback_queued_in_a_backward_runs_when_it_ends() -> None:
    """at_backward_end from a tensor hook: runs after every gradient, .grad included, is set."""
    x = torch.ones(2, requires_grad=True)
    y = x * 3
    seen: list[Any] = []
    y.register_hook(lambda g: _private.at_backward_end(lambda: seen.append(x.grad.clone())))
    y.sum().backward()
    assert len(seen) == 1 and torch.equal(seen[0], torch.full((2,), 3.0))


@pytest.mark.parametrize("fused", [False, True], ids=["via_maybe_opt_step", "amp_aware"])
def test_grad_scaler_step_calls_optimizer_step_from_its_own_frame(fused: bool) -> None:
    """grad_scaler_stepping is True in a step pre-hook when GradScaler.step made the step
    (through _maybe_opt_step, or directly for a fused optimizer that unscales itself), and
    False for the same optimizer stepped by hand."""
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.Adam([param], lr=0.1, fused=fused)
    seen: list[bool] = []
    handle = optimizer.register_step_pre_hook(
        lambda *_: seen.append(_private.grad_scaler_stepping())
    )
    scaler = torch.amp.GradScaler("cpu")
    try:
        scaler.scale((param * 2).sum()).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.step()
    finally:
        handle.remove()
    assert seen == [True, False]
    assert not _private.grad_scaler_stepping()


def test_the_foreach_kernels_compute_what_the_kernels_rely_on() -> None:
    """foreach_norm/mul_/clamp_min_/clamp_max_/sub equal their one-tensor counterparts."""
    a = [torch.tensor([3.0, -4.0]), torch.tensor([[1.0, -2.0], [2.0, 0.5]], dtype=torch.float64)]
    norms = _private.foreach_norm(a, 2.0, dtype=torch.float64)
    assert [n.dtype for n in norms] == [torch.float64] * 2
    assert [float(n) for n in norms] == [float(torch.linalg.vector_norm(t)) for t in a]
    b = [t.clone() for t in a]
    _private.foreach_mul_(b, 0.5)
    assert all(torch.equal(x, y * 0.5) for x, y in zip(b, a))
    _private.foreach_clamp_min_(b, -0.5)
    _private.foreach_clamp_max_(b, 0.5)
    assert all(torch.equal(x, (y * 0.5).clamp(-0.5, 0.5)) for x, y in zip(b, a))
    moved = _private.foreach_sub(a, b)
    assert all(torch.equal(m, x - y) for m, x, y in zip(moved, a, b))


def test_amp_unscale_multiplies_in_place_and_flags_non_finite_entries() -> None:
    """amp_unscale_ scales every tensor by inv_scale and sets found_inf to 1 on inf or NaN."""
    grads = [torch.tensor([2.0, 4.0]), torch.tensor([8.0])]
    found_inf, inv = torch.zeros(1), torch.full((1,), 0.5)
    _private.amp_unscale_(grads, found_inf, inv)
    assert [g.tolist() for g in grads] == [[1.0, 2.0], [4.0]] and found_inf.item() == 0.0
    _private.amp_unscale_([torch.tensor([1.0, float("nan")])], found_inf, inv)
    assert found_inf.item() == 1.0


def test_torch_compile_wraps_a_module_as_an_optimized_module_holding_it() -> None:
    """compiled_original: the module torch.compile(module) holds as _orig_mod (the reason
    for "_orig_mod." before its names), None for a module not compiled."""
    net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    compiled = torch.compile(net, backend="eager")
    assert _private.compiled_original(compiled) is net
    assert _private.compiled_original(net) is None
    assert [name for name, _ in compiled.named_modules()] == ["", "_orig_mod", "_orig_mod.0"]
