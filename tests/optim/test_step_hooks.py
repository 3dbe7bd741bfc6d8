"""Optimizer hooks: step pre/post hooks (global and per optimizer), state-dict hooks, step gates.

Tests taking ``lib`` run on hookgrad and on torch 2.13 with the same literal expectations; the
step gates are hookgrad's own and are tested on hookgrad only.
"""

from __future__ import annotations

import importlib
import pickle
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import hookgrad
import hookgrad.optim
from hookgrad.optim.optimizer import StepGateError

WRONG_RETURN = re.escape("must return None or a tuple of (new_args, new_kwargs), but got")


def _registry(lib: Any) -> Any:
    """``lib.optim.optimizer`` (torch deletes that attribute from ``torch.optim``)."""
    return importlib.import_module(f"{lib.__name__}.optim.optimizer")


@pytest.fixture
def global_hooks(lib: Any) -> Iterator[Callable[..., Any]]:
    """``global_hooks("pre" | "post" | "gate", hook)`` registers a global hook for this test only."""
    registry = _registry(lib)
    functions = {
        "pre": registry.register_optimizer_step_pre_hook,
        "post": registry.register_optimizer_step_post_hook,
        "gate": getattr(registry, "register_optimizer_step_gate", None),
    }
    handles: list[Any] = []

    def register(kind: str, hook: Callable[..., Any]) -> Any:
        handle = functions[kind](hook)
        handles.append(handle)
        return handle

    yield register
    for handle in handles:
        handle.remove()
    assert not registry._global_optimizer_pre_hooks
    assert not registry._global_optimizer_post_hooks


def _sgd(lib: Any, lr: float = 0.5, **options: Any) -> tuple[Any, Any]:
    """An SGD over one parameter [1, 2] whose gradient is [1, 1]."""
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    w.grad = lib.tensor([1.0, 1.0])
    return w, lib.optim.SGD([w], lr=lr, **options)


def _plain_optimizer_class(lib: Any, log: list[str]) -> type:
    """A fresh user-defined Optimizer subclass with its own step (no super().step())."""

    class Plain(lib.optim.Optimizer):
        def __init__(self, params: Any, lr: float) -> None:
            super().__init__(params, {"lr": lr})

        @lib.no_grad()
        def step(self, closure: Any = None) -> Any:
            log.append("step")
            for group in self.param_groups:
                for p in group["params"]:
                    p.add_(p.grad, alpha=-group["lr"])
            return "done"

    return Plain


# ---------------------------------------------------------------------- order and arguments
def test_global_then_local_pre_hooks_local_then_global_post_hooks(lib, global_hooks):
    """Pre: global before local; post: the optimizer's own before the global ones (torch's order)."""
    _, opt = _sgd(lib)
    order: list[str] = []
    opt.register_step_post_hook(lambda o, a, k: order.append("local-post-1"))
    global_hooks("post", lambda o, a, k: order.append("global-post"))
    opt.register_step_pre_hook(lambda o, a, k: order.append("local-pre-1"))
    global_hooks("pre", lambda o, a, k: order.append("global-pre"))
    opt.register_step_pre_hook(lambda o, a, k: order.append("local-pre-2"))
    opt.register_step_post_hook(lambda o, a, k: order.append("local-post-2"))
    opt.step()
    assert order == [
        "global-pre",
        "local-pre-1",
        "local-pre-2",
        "local-post-1",
        "local-post-2",
        "global-post",
    ]


def test_hooks_get_the_optimizer_and_args_that_start_with_it(lib):
    """args holds the optimizer itself first, then the positional arguments; kwargs as passed."""
    _, opt = _sgd(lib)
    seen: list[tuple[Any, ...]] = []
    opt.register_step_pre_hook(lambda o, a, k: seen.append(("pre", o, a, dict(k))))
    opt.register_step_post_hook(lambda o, a, k: seen.append(("post", o, a, dict(k))))

    def closure() -> float:
        return 3.0

    opt.step()
    opt.step(closure)
    opt.step(closure=closure)
    assert seen == [
        ("pre", opt, (opt,), {}),
        ("post", opt, (opt,), {}),
        ("pre", opt, (opt, closure), {}),
        ("post", opt, (opt, closure), {}),
        ("pre", opt, (opt,), {"closure": closure}),
        ("post", opt, (opt,), {"closure": closure}),
    ]


def test_pre_hook_replaces_the_closure(lib):
    """A pre-hook's (new_args, new_kwargs) is what step and the later hooks receive."""
    _, opt = _sgd(lib)

    def replacement() -> float:
        return 7.0

    opt.register_step_pre_hook(lambda o, a, k: ((o,), {"closure": replacement}))
    after: list[Any] = []
    opt.register_step_post_hook(lambda o, a, k: after.append((a, k)))
    assert opt.step() == 7.0
    assert opt.step(lambda: 1.0) == 7.0
    assert after == [((opt,), {"closure": replacement})] * 2


def test_later_pre_hook_sees_earlier_replacement(lib, global_hooks):
    """The global pre-hook's replacement is the args the optimizer's own pre-hook receives."""
    _, opt = _sgd(lib)
    seen: list[Any] = []
    global_hooks("pre", lambda o, a, k: ((o,), {"closure": lambda: 2.0}))
    opt.register_step_pre_hook(lambda o, a, k: seen.append(sorted(k)))
    assert opt.step() == 2.0
    assert seen == [["closure"]]


def test_post_hook_sees_updated_parameters(lib, global_hooks):
    """Post hooks run after the update; pre-hooks before it."""
    w, opt = _sgd(lib)
    values: list[tuple[str, list[float]]] = []
    opt.register_step_pre_hook(lambda o, a, k: values.append(("pre", w.tolist())))
    opt.register_step_post_hook(lambda o, a, k: values.append(("post", w.tolist())))
    global_hooks("post", lambda o, a, k: values.append(("global-post", w.tolist())))
    opt.step()
    assert values == [("pre", [1.0, 2.0]), ("post", [0.5, 1.5]), ("global-post", [0.5, 1.5])]


def test_global_hooks_fire_for_every_optimizer(lib, global_hooks):
    """A global hook sees the steps of all optimizers, whatever their class."""
    names: list[str] = []
    global_hooks("post", lambda o, a, k: names.append(type(o).__name__))
    w = lib.tensor([1.0], requires_grad=True)
    w.grad = lib.tensor([1.0])
    for opt in (lib.optim.SGD([w]), lib.optim.Adam([w]), lib.optim.AdamW([w])):
        opt.step()
    assert names == ["SGD", "Adam", "AdamW"]


def test_local_hooks_belong_to_their_optimizer(lib):
    """A hook registered on one optimizer does not fire for another of the same class."""
    calls: list[str] = []
    _, first = _sgd(lib)
    _, second = _sgd(lib)
    first.register_step_pre_hook(lambda o, a, k: calls.append("first"))
    second.step()
    first.step()
    assert calls == ["first"]


# ---------------------------------------------------------------------- handles and tables
def test_handle_remove_stops_local_and_global_hooks(lib, global_hooks):
    """remove() unregisters a hook, local or global; a second remove() is harmless."""
    _, opt = _sgd(lib)
    calls: list[str] = []
    local = opt.register_step_pre_hook(lambda o, a, k: calls.append("local"))
    remote = global_hooks("post", lambda o, a, k: calls.append("global"))
    opt.step()
    local.remove()
    remote.remove()
    remote.remove()
    opt.step()
    assert calls == ["local", "global"]


def test_with_handle_removes_on_exit(lib):
    """A handle used as a context manager removes its hook when the block ends."""
    _, opt = _sgd(lib)
    calls: list[str] = []
    with opt.register_step_post_hook(lambda o, a, k: calls.append("post")):
        opt.step()
    opt.step()
    assert calls == ["post"]


def test_global_hooks_live_in_the_module_tables_torch_defines(lib):
    """register_optimizer_step_*_hook stores into optimizer._global_optimizer_*_hooks by handle id."""
    registry = _registry(lib)

    def hook(o: Any, a: Any, k: Any) -> None:
        return None

    with registry.register_optimizer_step_pre_hook(hook) as handle:
        assert dict(registry._global_optimizer_pre_hooks) == {handle.id: hook}
        assert not registry._global_optimizer_post_hooks
    assert not registry._global_optimizer_pre_hooks


def test_wrong_pre_hook_return_raises_before_the_step(lib):
    """A non-None return that is not a 2-tuple raises RuntimeError; the parameters are untouched."""
    w, opt = _sgd(lib)
    handle = opt.register_step_pre_hook(lambda o, a, k: 5)
    with pytest.raises(RuntimeError, match=WRONG_RETURN + " 5\\.$"):
        opt.step()
    handle.remove()
    opt.register_step_pre_hook(lambda o, a, k: ((o,), {}, None))
    with pytest.raises(RuntimeError, match=WRONG_RETURN + re.escape(" (")):
        opt.step()
    assert w.tolist() == [1.0, 2.0]


def test_exception_in_step_skips_post_hooks(lib):
    """When step raises, the exception propagates and no post hook runs."""

    class Failing(lib.optim.Optimizer):
        def step(self, closure: Any = None) -> None:
            raise ValueError("boom")

    opt = Failing([lib.tensor([1.0], requires_grad=True)], {})
    calls: list[str] = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    with pytest.raises(ValueError, match="boom"):
        opt.step()
    assert calls == ["pre"]


# ---------------------------------------------------------------------- step wrapping
def test_hooks_fire_for_a_user_subclass_step(lib, global_hooks):
    """A user Optimizer subclass's own step is wrapped: hooks fire around it, its result returns."""
    log: list[str] = []
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    w.grad = lib.tensor([1.0, 1.0])
    opt = _plain_optimizer_class(lib, log)([w], lr=0.5)
    global_hooks("pre", lambda o, a, k: log.append("global-pre"))
    opt.register_step_post_hook(lambda o, a, k: log.append(f"post {w.tolist()}"))
    assert opt.step() == "done"
    assert log == ["global-pre", "step", "post [0.5, 1.5]"]
    assert type(opt).step.hooked is True
    assert type(opt).step.__name__ == "step"


def test_step_is_wrapped_once_per_class(lib):
    """Creating more optimizers of a class does not wrap its step again: hooks fire once."""
    log: list[str] = []
    cls = _plain_optimizer_class(lib, log)
    w = lib.tensor([1.0], requires_grad=True)
    w.grad = lib.tensor([1.0])
    cls([w], lr=0.1)
    opt = cls([w], lr=0.1)
    opt.register_step_pre_hook(lambda o, a, k: log.append("pre"))
    opt.step()
    assert log == ["pre", "step"]


def test_super_step_runs_hooks_again_only_if_the_parent_was_instantiated(lib):
    """Wrapping is lazy, per class: super().step() is hooked once the parent class has been used."""
    w = lib.tensor([1.0], requires_grad=True)
    w.grad = lib.tensor([1.0])
    counts = []
    for instantiate_parent_first in (False, True):
        log: list[str] = []
        parent = _plain_optimizer_class(lib, log)

        class Child(parent):
            def step(self, closure: Any = None) -> Any:
                return super().step(closure)

        if instantiate_parent_first:
            parent([w], lr=0.0)
        opt = Child([w], lr=0.0)
        opt.register_step_pre_hook(lambda o, a, k, log=log: log.append("pre"))
        opt.step()
        counts.append(log)
    assert counts == [["pre", "step"], ["pre", "pre", "step"]]


def test_unpickled_optimizer_starts_without_hooks(lib):
    """Hooks are not pickled: a clone has empty tables, the original keeps its hooks."""
    _, opt = _sgd(lib)
    calls: list[str] = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    clone = pickle.loads(pickle.dumps(opt))
    clone.step()
    opt.step()
    assert calls == ["pre"]


# ---------------------------------------------------------------------- state-dict hooks
def test_state_dict_hooks_edit_the_state_dict(lib):
    """state_dict pre-hooks see the optimizer first; post hooks edit in place or replace."""
    _, opt = _sgd(lib, momentum=0.9)
    order: list[str] = []
    opt.register_state_dict_pre_hook(lambda o: order.append("pre"))
    opt.register_state_dict_post_hook(lambda o, sd: sd.update(extra=1) or order.append("post"))
    opt.register_state_dict_post_hook(lambda o, sd: {"wrapped": sd, "n": len(order)})
    sd = opt.state_dict()
    assert order == ["pre", "post"]
    assert sd["n"] == 2
    assert sorted(sd["wrapped"]) == ["extra", "param_groups", "state"]
    assert sd["wrapped"]["param_groups"][0]["params"] == [0]


def test_state_dict_hooks_prepend(lib):
    """prepend=True puts a state_dict hook in front of those already registered."""
    _, opt = _sgd(lib)
    order: list[str] = []
    opt.register_state_dict_pre_hook(lambda o: order.append("pre-a"))
    opt.register_state_dict_pre_hook(lambda o: order.append("pre-b"), prepend=True)
    opt.register_state_dict_post_hook(lambda o, sd: order.append("post-a"))
    opt.register_state_dict_post_hook(lambda o, sd: order.append("post-b"), prepend=True)
    opt.register_state_dict_post_hook(lambda o, sd: order.append("post-c"))
    opt.state_dict()
    assert order == ["pre-b", "pre-a", "post-b", "post-a", "post-c"]


def test_load_state_dict_pre_hook_edits_a_shallow_copy(lib):
    """A load pre-hook's in-place edit of the top-level dict changes what loads, not the caller's."""
    _, opt = _sgd(lib, lr=0.1)
    saved = opt.state_dict()
    saved_groups = saved["param_groups"]

    def rewrite(o: Any, sd: dict[str, Any]) -> None:
        sd["param_groups"] = [dict(sd["param_groups"][0], lr=0.25)]

    opt.register_load_state_dict_pre_hook(rewrite)
    opt.load_state_dict(saved)
    assert opt.param_groups[0]["lr"] == 0.25
    assert saved["param_groups"] is saved_groups
    assert saved_groups[0]["lr"] == 0.1


def test_load_state_dict_hooks_replace_and_follow(lib):
    """A returned dict replaces the one loaded; post hooks run after loading; prepend orders."""
    _, opt = _sgd(lib, lr=0.1)
    replacement = opt.state_dict()
    replacement["param_groups"] = [dict(replacement["param_groups"][0], lr=0.75)]
    order: list[str] = []
    opt.register_load_state_dict_pre_hook(lambda o, sd: replacement)
    opt.register_load_state_dict_pre_hook(lambda o, sd: order.append("pre-first"), prepend=True)
    opt.register_load_state_dict_post_hook(
        lambda o: order.append(f"post {o.param_groups[0]['lr']}")
    )
    opt.register_load_state_dict_post_hook(lambda o: order.append("post-first"), prepend=True)
    opt.load_state_dict(opt.state_dict())
    assert order == ["pre-first", "post-first", "post 0.75"]


def test_step_hooks_survive_load_state_dict(lib):
    """Loading a state dict keeps the optimizer's registered step hooks."""
    _, opt = _sgd(lib)
    calls: list[str] = []
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    opt.load_state_dict(opt.state_dict())
    opt.step()
    assert calls == ["post"]


# ---------------------------------------------------------------------- hookgrad-only step gates
def _hooked_sgd(calls: list[str]) -> tuple[Any, Any]:
    """A momentum SGD on hookgrad whose local pre and post hooks append to ``calls``."""
    w, opt = _sgd(hookgrad, momentum=0.9)
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    return w, opt


def test_gate_false_skips_the_whole_step(gates):
    """A vetoed step returns None; no hook, closure, update or state change happens."""
    calls: list[str] = []
    w, opt = _hooked_sgd(calls)
    handles = [
        hookgrad.optim.optimizer.register_optimizer_step_pre_hook(lambda *a: calls.append("gpre")),
        hookgrad.optim.optimizer.register_optimizer_step_post_hook(lambda *a: calls.append("gp")),
    ]
    try:
        gates(lambda o: False)
        assert opt.step(lambda: calls.append("closure") or 1.0) is None
    finally:
        for handle in handles:
            handle.remove()
    assert calls == []
    assert w.tolist() == [1.0, 2.0]
    assert len(opt.state) == 0


def test_gate_true_lets_the_step_and_hooks_run(gates):
    """A gate answering True changes nothing: hooks fire, the closure's loss is returned."""
    calls: list[str] = []
    w, opt = _hooked_sgd(calls)
    gates(lambda o: calls.append("gate") or True)
    assert opt.step(lambda: 4.0) == 4.0
    assert calls == ["gate", "pre", "post"]
    assert w.tolist() == [0.5, 1.5]


def test_gates_run_in_order_and_stop_at_the_first_veto(gates):
    """Gates run in registration order; the first False skips the remaining gates."""
    order: list[str] = []
    w, opt = _sgd(hookgrad)
    gates(lambda o: order.append("a") or True)
    gates(lambda o: order.append("b") or False)
    gates(lambda o: order.append("c") or True)
    opt.step()
    assert order == ["a", "b"]
    assert w.tolist() == [1.0, 2.0]


def test_gate_sees_the_optimizer_and_can_veto_one(gates):
    """The gate receives the optimizer being stepped, so it can veto one and pass another."""
    w1, vetoed = _sgd(hookgrad)
    w2, passed = _sgd(hookgrad)
    gates(lambda o: o is not vetoed)
    vetoed.step()
    passed.step()
    assert (w1.tolist(), w2.tolist()) == ([1.0, 2.0], [0.5, 1.5])


def test_gate_accepts_numpy_bools(gates):
    """A gate may answer with numpy's bool (an all-finite check, say)."""
    w, opt = _sgd(hookgrad)
    gates(lambda o: np.isfinite(w.grad.numpy()).all())
    opt.step()
    assert w.tolist() == [0.5, 1.5]


def test_gate_with_non_bool_answer_raises(gates):
    """A gate returning anything but a bool raises StepGateError, a RuntimeError naming both."""

    def forgetful(o: Any) -> None:
        return None

    w, opt = _sgd(hookgrad)
    gates(forgetful)
    with pytest.raises(StepGateError, match="must return True or False, got None") as info:
        opt.step()
    assert isinstance(info.value, RuntimeError)
    assert (info.value.gate, info.value.verdict) == (forgetful, None)
    assert w.tolist() == [1.0, 2.0]


def test_removed_gate_no_longer_vetoes(gates):
    """Removing a gate's handle (or leaving its with-block) restores stepping."""
    w, opt = _sgd(hookgrad)
    with gates(lambda o: False):
        opt.step()
    opt.step()
    assert w.tolist() == [0.5, 1.5]


def test_a_hook_removing_hooks_during_a_step_changes_the_next_step_only(gates):
    """Gates, global pre and post hooks run from snapshots (as module hooks do, H-5): a hook
    that removes itself and a later one still finishes this step; the next runs neither."""
    calls: list[str] = []
    w, opt = _sgd(hookgrad)
    registry = hookgrad.optim.optimizer
    handles: dict[str, Any] = {}

    def once(name: str, answer: Any = None) -> Callable[..., Any]:
        def hook(*args: Any) -> Any:
            calls.append(name)
            handles.pop(name).remove()
            if name.startswith("gate"):
                handles.pop("gate2").remove()
            return answer

        return hook

    handles["gate"] = gates(once("gate", True))
    handles["gate2"] = gates(lambda o: calls.append("gate2") or True)
    handles["pre"] = registry.register_optimizer_step_pre_hook(once("pre"))
    handles["post"] = registry.register_optimizer_step_post_hook(once("post"))
    opt.step()
    opt.step()
    assert calls == ["gate", "gate2", "pre", "post"]
    assert w.tolist() == [0.0, 1.0]
