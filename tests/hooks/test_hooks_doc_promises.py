"""docs/hooks.md, attacked as a hostile user would: each program runs on hookgrad and on torch.

Expected values are worked out by hand in each test (small numbers), so the torch run checks
that the expectation is PyTorch's and the hookgrad run that hookgrad keeps the promise.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest


def _np(t: Any) -> np.ndarray:
    return t.detach().numpy()


def _linear(lib: Any, weight: list[list[float]], bias: list[float]) -> Any:
    layer = lib.nn.Linear(len(weight[0]), len(weight))
    with lib.no_grad():
        layer.weight.copy_(lib.tensor(weight))
        layer.bias.copy_(lib.tensor(bias))
    return layer


# ---------------------------------------------------------------------- tensor hooks
def test_hook_fires_once_with_the_summed_gradient_however_many_uses(lib: Any) -> None:
    """T-4: 'once per backward with the summed gradient, however many ops used the tensor'."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    seen: list[np.ndarray] = []
    x.register_hook(lambda g: seen.append(_np(g).copy()))
    (x * 2 + x * x + x.exp() * 0).sum().backward()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], [2 + 2 * 1.0, 2 + 2 * 2.0])


def test_leaf_hook_sees_the_previous_grad_sum(lib: Any) -> None:
    """T-3: inside a leaf's hook ``x.grad`` still holds the previous sum."""
    x = lib.tensor([1.0], requires_grad=True)
    inside: list[Any] = []
    x.register_hook(lambda g: inside.append(None if x.grad is None else _np(x.grad).copy()))
    (x * 2).sum().backward()
    (x * 5).sum().backward()
    assert inside[0] is None
    np.testing.assert_array_equal(inside[1], [2.0])
    np.testing.assert_array_equal(_np(x.grad), [7.0])


def test_post_accumulate_hook_receives_the_tensor_after_accumulation(lib: Any) -> None:
    """T-9: the post-accumulate hook gets the tensor itself, .grad already updated."""
    x = lib.tensor([1.0, -1.0], requires_grad=True)
    seen: list[tuple[bool, np.ndarray]] = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append((t is x, _np(t.grad).copy())))
    (x * 3).sum().backward()
    (x * 4).sum().backward()
    assert [s[0] for s in seen] == [True, True]
    np.testing.assert_array_equal(seen[1][1], [7.0, 7.0])


def test_post_accumulate_hook_returning_a_tensor_raises(lib: Any) -> None:
    """The post-accumulate hook 'may return None only': another tensor is a RuntimeError."""
    x = lib.tensor([1.0], requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda t: t.grad * 2)
    with pytest.raises(RuntimeError, match="should return None"):
        (x * 3).sum().backward()
    np.testing.assert_array_equal(_np(x.grad), [3.0])  # accumulated before the hook


def test_hooks_chain_in_registration_order(lib: Any) -> None:
    """T-6: hooks chain in registration order; None passes the gradient on."""
    x = lib.tensor([1.0], requires_grad=True)
    order: list[str] = []
    x.register_hook(lambda g: order.append("a") or g + 1)
    x.register_hook(lambda g: order.append("b"))
    x.register_hook(lambda g: order.append("c") or g * 10)
    (x * 2).sum().backward()
    assert order == ["a", "b", "c"]
    np.testing.assert_array_equal(_np(x.grad), [30.0])


@pytest.mark.parametrize("bad", ["shape", "int", "string", "list"])
def test_a_bad_replacement_raises_and_leaves_grad_none(lib: Any, bad: str) -> None:
    """T-8: another shape is a RuntimeError, a non-tensor a TypeError; .grad stays None."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    value: Any = {"shape": lib.ones(2, 1), "int": 3, "string": "g", "list": [1.0, 2.0]}[bad]
    y.register_hook(lambda g: value)
    error = RuntimeError if bad == "shape" else TypeError
    with pytest.raises(error):
        y.sum().backward()
    assert x.grad is None


@pytest.mark.parametrize("to", ["double", "long"])
def test_a_replacement_of_another_dtype_raises(lib: Any, to: str) -> None:
    """Hooks are torch's 'exactly': a hook changing the gradient's dtype is a RuntimeError."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: getattr(g, to)())
    with pytest.raises(RuntimeError, match="has changed the type of value"):
        (x * 2).sum().backward()
    assert x.grad is None


def test_retain_grad_stores_the_gradient_after_all_hooks(lib: Any) -> None:
    """T-11: retain_grad() stores the gradient after all hooks, whatever the order."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g * 10)
    y.retain_grad()
    y.register_hook(lambda g: g + 1)
    y.sum().backward()
    np.testing.assert_array_equal(_np(y.grad), [11.0, 11.0])
    np.testing.assert_array_equal(_np(x.grad), [22.0, 22.0])


def test_maths_inside_a_hook_is_not_recorded(lib: Any) -> None:
    """T-16: backward runs with grad mode off."""
    x = lib.tensor([1.0], requires_grad=True)
    seen: list[tuple[bool, bool]] = []
    x.register_hook(lambda g: seen.append((lib.is_grad_enabled(), (g * x).requires_grad)))
    (x * 2).sum().backward()
    assert seen == [(False, False)]


def test_in_place_op_splits_the_hooks_of_a_tensor(lib: Any) -> None:
    """T-19: the doc's example: 'after' fires first with [12, 24], 'before' then [36, 72]."""
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    y = a * 2
    log: list[tuple[str, list[float]]] = []
    y.register_hook(lambda g: log.append(("before", _np(g).tolist())))
    y *= 3
    y.register_hook(lambda g: log.append(("after", _np(g).tolist())))
    (y * y).sum().backward()
    assert log == [("after", [12.0, 24.0]), ("before", [36.0, 72.0])]


def test_a_hook_removing_itself_still_ran_this_pass_and_not_the_next(lib: Any) -> None:
    """H-5 (snapshot): a hook removed from inside a hook is gone from the next pass on."""
    x = lib.tensor([1.0], requires_grad=True)
    log: list[str] = []
    handles: list[Any] = []

    def first(g: Any) -> None:
        log.append("first")
        handles[1].remove()

    handles.append(x.register_hook(first))
    handles.append(x.register_hook(lambda g: log.append("second")))
    (x * 2).sum().backward()
    (x * 2).sum().backward()
    assert log == ["first", "second", "first"]


def test_handle_remove_is_idempotent_and_scopes_with_with(lib: Any) -> None:
    """'handle.remove() (idempotent), or with handle: to scope it' (H-1..H-3)."""
    x = lib.tensor([1.0], requires_grad=True)
    calls: list[int] = []
    handle = x.register_hook(lambda g: calls.append(1))
    with handle:
        (x * 2).sum().backward()
    handle.remove()
    handle.remove()
    (x * 2).sum().backward()
    assert calls == [1]


def test_registering_a_hook_on_a_tensor_without_grad_raises(lib: Any) -> None:
    """T-7: a tensor that does not require grad takes no hook."""
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        lib.tensor([1.0]).register_hook(lambda g: g)


# ---------------------------------------------------------------------- order of one backward
def test_sibling_branches_run_latest_first(lib: Any) -> None:
    """T-18: among ready nodes the most recently created runs first."""
    x = lib.tensor([1.0], requires_grad=True)
    order: list[str] = []
    a = x * 2
    a.register_hook(lambda g: order.append("a"))
    b = x * 3
    b.register_hook(lambda g: order.append("b"))
    (a + b).sum().backward()
    assert order == ["b", "a"]


def test_container_pre_hooks_before_children_full_hooks_after(lib: Any) -> None:
    """B-21 and the diagram: Sequential pre → Tanh → Linear → Sequential full → input hook."""
    model = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.Tanh())
    names = {id(model): "seq", id(model[0]): "linear", id(model[1]): "tanh"}
    order: list[str] = []
    for module in (model, model[0], model[1]):
        module.register_full_backward_pre_hook(lambda m, go: order.append(f"pre {names[id(m)]}"))
        module.register_full_backward_hook(lambda m, gi, go: order.append(f"full {names[id(m)]}"))
    model[0].weight.register_hook(lambda g: order.append("weight"))
    x = lib.ones(1, 2, requires_grad=True)
    x.register_hook(lambda g: order.append("input"))
    out = model(x)
    out.register_hook(lambda g: order.append("output"))
    out.sum().backward()
    assert order == [
        "output",
        "pre seq",
        "pre tanh",
        "full tanh",
        "pre linear",
        "weight",
        "full linear",
        "full seq",
        "input",
    ]


# ---------------------------------------------------------------------- forward hooks
def test_forward_call_order_global_first_prepend_within_own(lib: Any) -> None:
    """F-7: global pre, own pre (prepend first, never ahead of globals), forward, hooks."""
    module = lib.nn.Identity()
    order: list[str] = []
    registry = lib.nn.modules.module
    handles = [
        registry.register_module_forward_pre_hook(lambda m, a: order.append("global pre")),
        registry.register_module_forward_hook(lambda m, a, o: order.append("global fwd")),
    ]
    try:
        module.register_forward_pre_hook(lambda m, a: order.append("own pre"))
        module.register_forward_pre_hook(lambda m, a: order.append("own pre 0"), prepend=True)
        module.register_forward_hook(lambda m, a, o: order.append("own fwd"))
        module(lib.ones(1))
    finally:
        for handle in handles:
            handle.remove()
    assert order == ["global pre", "own pre 0", "own pre", "global fwd", "own fwd"]


def test_pre_hook_non_tuple_return_replaces_all_positional_args(lib: Any) -> None:
    """F-2: a non-tuple return, even one tensor, replaces all args with (value,)."""

    class Add(lib.nn.Module):
        def forward(self, a: Any, b: Any = None) -> Any:
            return a if b is None else a + b

    module = Add()
    module.register_forward_pre_hook(lambda m, args: lib.tensor([5.0]))
    np.testing.assert_array_equal(_np(module(lib.tensor([1.0]), lib.tensor([2.0]))), [5.0])


def test_pre_hook_sees_positional_args_only(lib: Any) -> None:
    """F-1: a pre-hook gets the positional args tuple only."""

    class Scale(lib.nn.Module):
        def forward(self, x: Any, factor: float = 1.0) -> Any:
            return x * factor

    seen: list[int] = []
    module = Scale()
    module.register_forward_pre_hook(lambda m, args: seen.append(len(args)))
    out = module(lib.tensor([2.0]), factor=3.0)
    assert seen == [1]
    np.testing.assert_array_equal(_np(out), [6.0])


@pytest.mark.parametrize("result", ["one", "three"])
def test_with_kwargs_pre_hook_must_return_a_pair(lib: Any, result: str) -> None:
    """F-4: with_kwargs=True must return None or exactly (new_args, new_kwargs)."""
    module = lib.nn.Identity()
    value = {"one": lambda a, k: (a,), "three": lambda a, k: (a, k, None)}[result]
    module.register_forward_pre_hook(lambda m, a, k: value(a, k), with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"must return None or a tuple of \(new_args"):
        module(lib.ones(1))


def test_with_kwargs_pre_hook_replaces_kwargs(lib: Any) -> None:
    """F-4: (new_args, new_kwargs) replaces both."""

    class Scale(lib.nn.Module):
        def forward(self, x: Any, factor: float = 1.0) -> Any:
            return x * factor

    module = Scale()
    module.register_forward_pre_hook(
        lambda m, a, k: ((a[0] + 1,), {"factor": 10.0}), with_kwargs=True
    )
    np.testing.assert_array_equal(_np(module(lib.tensor([1.0]), factor=2.0)), [20.0])


def test_forward_hook_replacement_reaches_later_hooks_and_caller(lib: Any) -> None:
    """F-5: a forward hook's non-None return replaces the output for later hooks and caller."""
    module = lib.nn.Identity()
    seen: list[float] = []
    module.register_forward_hook(lambda m, a, o: o * 3)
    module.register_forward_hook(lambda m, a, o: seen.append(float(_np(o)[0])))
    out = module(lib.tensor([2.0]))
    assert seen == [6.0]
    np.testing.assert_array_equal(_np(out), [6.0])


def test_calling_forward_directly_skips_every_hook(lib: Any) -> None:
    """F-8: module.forward(x) skips every hook, global ones too."""
    module = lib.nn.Identity()
    calls: list[str] = []
    module.register_forward_hook(lambda *a: calls.append("own"))
    handle = lib.nn.modules.module.register_module_forward_hook(lambda *a: calls.append("g"))
    try:
        module.forward(lib.ones(1))
    finally:
        handle.remove()
    assert calls == []


@pytest.mark.parametrize("fails", ["pre_hook", "forward", "forward_hook"])
def test_always_call_hooks_run_when_something_raises(lib: Any, fails: str) -> None:
    """F-9: always_call hooks still run (output None if forward did not finish); error kept."""

    class Boom(lib.nn.Module):
        def forward(self, x: Any) -> Any:
            if fails == "forward":
                raise KeyError("forward")
            return x

    def raiser(*args: Any) -> None:
        raise KeyError(fails)

    module = Boom()
    seen: list[Any] = []
    if fails == "pre_hook":
        module.register_forward_pre_hook(raiser)
    if fails == "forward_hook":
        module.register_forward_hook(raiser)
    module.register_forward_hook(lambda m, a, o: seen.append(o is None), always_call=True)
    with pytest.raises(KeyError, match=fails):
        module(lib.ones(1))
    assert seen == [fails != "forward_hook"]


def test_an_always_call_hooks_own_error_becomes_a_warning(lib: Any) -> None:
    """F-10: the always-call hook's own error is a warning; the original exception propagates."""

    class Boom(lib.nn.Module):
        def forward(self, x: Any) -> Any:
            raise KeyError("original")

    def broken(m: Any, a: Any, o: Any) -> None:
        raise ValueError("secondary")

    module = Boom()
    module.register_forward_hook(broken, always_call=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyError, match="original"):
            module(lib.ones(1))
    assert any("secondary" in str(w.message) for w in caught)


# ---------------------------------------------------------------------- module backward hooks
def test_grad_input_has_one_entry_per_positional_argument(lib: Any) -> None:
    """B-4: one entry per positional argument, None for non-tensors, keyword tensors left out."""

    class Mix(lib.nn.Module):
        def forward(self, x: Any, k: float, z: Any, *, w: Any) -> Any:
            return x * k + z + w

    module = Mix()
    seen: list[list[Any]] = []
    module.register_full_backward_hook(
        lambda m, gi, go: seen.append([None if g is None else _np(g).tolist() for g in gi])
    )
    x = lib.ones(2, requires_grad=True)
    z = lib.ones(2, requires_grad=True)
    w = lib.ones(2, requires_grad=True)
    module(x, 3.0, z, w=w).sum().backward()
    assert seen == [[[3.0, 3.0], None, [1.0, 1.0]]]
    np.testing.assert_array_equal(_np(w.grad), [1.0, 1.0])


def test_inputs_that_need_no_grad_get_zeros_and_unused_inputs_zero_grads(lib: Any) -> None:
    """B-7: zeros (not None) for inputs not requiring grad; an unused input ends at 0."""

    class FirstOnly(lib.nn.Module):
        def forward(self, a: Any, b: Any, c: Any) -> Any:
            return a * 2

    module = FirstOnly()
    seen: list[list[list[float]]] = []
    module.register_full_backward_hook(lambda m, gi, go: seen.append([_np(g).tolist() for g in gi]))
    a = lib.ones(2, requires_grad=True)
    b = lib.ones(2, requires_grad=True)
    module(a, b, lib.ones(2)).sum().backward()
    assert seen == [[[2.0, 2.0], [0.0, 0.0], [0.0, 0.0]]]
    np.testing.assert_array_equal(_np(b.grad), [0.0, 0.0])


def test_no_input_requiring_grad_fires_with_nones_and_warns(lib: Any) -> None:
    """B-9: grad_input = (None,)*n plus a UserWarning; a non-None return is an error."""
    layer = lib.nn.Linear(2, 1)
    seen: list[tuple[Any, ...]] = []
    layer.register_full_backward_hook(lambda m, gi, go: seen.append(gi))
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        layer(lib.ones(1, 2)).sum().backward()
    assert seen == [(None,)]
    other = lib.nn.Linear(2, 1)
    other.register_full_backward_hook(lambda m, gi, go: (lib.ones(1, 2),))
    with (
        pytest.warns(UserWarning, match="no inputs require gradients"),
        pytest.raises(RuntimeError, match="should always return None"),
    ):
        other(lib.ones(1, 2)).sum().backward()


def test_full_hook_never_fires_when_forward_ignores_grad_inputs(lib: Any) -> None:
    """B-10: inputs require grad but forward ignores them: the full hook never fires."""

    class Ignore(lib.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.p = lib.nn.Parameter(lib.ones(2))

        def forward(self, x: Any) -> Any:
            return self.p * 2

    module = Ignore()
    fired: list[int] = []
    module.register_full_backward_hook(lambda *a: fired.append(1))
    module(lib.ones(2, requires_grad=True)).sum().backward()
    assert fired == []
    np.testing.assert_array_equal(_np(module.p.grad), [2.0, 2.0])


@pytest.mark.parametrize("change", ["add", "remove"])
def test_hook_list_is_fixed_when_forward_runs(lib: Any, change: str) -> None:
    """B-19: a hook added after forward does not fire; one removed after it still does."""
    layer = lib.nn.Linear(2, 2)
    fired: list[int] = []
    x = lib.ones(1, 2, requires_grad=True)
    if change == "remove":
        handle = layer.register_full_backward_hook(lambda *a: fired.append(1))
        out = layer(x)
        handle.remove()
    else:
        out = layer(x)
        layer.register_full_backward_hook(lambda *a: fired.append(1))
    out.sum().backward()
    assert fired == ([1] if change == "remove" else [])


def test_modifying_the_hooked_output_in_place_is_an_error(lib: Any) -> None:
    """B-15: while backward hooks are active, modifying the output in place is an error."""
    layer = lib.nn.Linear(2, 2)
    layer.register_full_backward_hook(lambda *a: None)
    x = lib.ones(1, 2, requires_grad=True)
    out = layer(x)
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
        out.mul_(2)


def test_list_output_warns_and_gets_no_backward_hooks(lib: Any) -> None:
    """B-23: a module returning a list gets a warning and no backward hooks at all."""

    class Pair(lib.nn.Module):
        def forward(self, x: Any) -> Any:
            return [x * 2, x * 3]

    module = Pair()
    fired: list[int] = []
    module.register_full_backward_hook(lambda *a: fired.append(1))
    x = lib.ones(2, requires_grad=True)
    with pytest.warns(UserWarning):
        out = module(x)
    (out[0] + out[1]).sum().backward()
    assert fired == []
    np.testing.assert_array_equal(_np(x.grad), [5.0, 5.0])


def test_pre_hook_replacement_changes_parameter_gradients(lib: Any) -> None:
    """B-12: a pre-hook's grad_output replacement is what the module's backward uses."""
    layer = _linear(lib, [[1.0, 2.0], [3.0, 4.0]], [0.0, 0.0])
    layer.register_full_backward_pre_hook(lambda m, go: (go[0] * 0.5,))
    x = lib.tensor([[1.0, -1.0]], requires_grad=True)
    layer(x).sum().backward()
    np.testing.assert_array_equal(_np(x.grad), [[2.0, 3.0]])
    np.testing.assert_array_equal(_np(layer.weight.grad), [[0.5, -0.5], [0.5, -0.5]])
    np.testing.assert_array_equal(_np(layer.bias.grad), [0.5, 0.5])


@pytest.mark.parametrize("kind", ["pre", "full"])
def test_a_module_hook_replacement_of_wrong_length_raises(lib: Any, kind: str) -> None:
    """'Replacements follow the torch hook rules exactly (same lengths ...)': RuntimeError."""
    layer = lib.nn.Linear(2, 2)
    if kind == "pre":
        layer.register_full_backward_pre_hook(lambda m, go: (go[0], go[0]))
    else:
        layer.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad"):
        layer(lib.ones(1, 2, requires_grad=True)).sum().backward()


@pytest.mark.parametrize("kind", ["pre", "full"])
def test_a_module_hook_replacement_of_wrong_shape_raises_torchs_error(lib: Any, kind: str) -> None:
    """'(same lengths, same shapes, same errors)': torch's 'has changed the size of value'."""
    layer = lib.nn.Linear(2, 2)
    if kind == "pre":
        layer.register_full_backward_pre_hook(lambda m, go: (lib.ones(3),))
    else:
        layer.register_full_backward_hook(lambda m, gi, go: (lib.ones(3),))
    with pytest.raises(RuntimeError, match="has changed the size of value"):
        layer(lib.ones(1, 2, requires_grad=True)).sum().backward()


@pytest.mark.parametrize("kind", ["pre", "full"])
def test_a_module_hook_replacement_of_another_dtype_raises(lib: Any, kind: str) -> None:
    """Module backward hooks follow torch's rules: a float64 replacement is a RuntimeError."""
    layer = lib.nn.Linear(2, 2)
    if kind == "pre":
        layer.register_full_backward_pre_hook(lambda m, go: (go[0].double(),))
    else:
        layer.register_full_backward_hook(lambda m, gi, go: (gi[0].double(),))
    with pytest.raises(RuntimeError, match="has changed the type of value"):
        layer(lib.ones(1, 2, requires_grad=True)).sum().backward()


def test_a_module_hook_returning_a_non_tensor_raises_type_error(lib: Any) -> None:
    """A full hook's replacement entry that is not a tensor is a TypeError, as in torch."""
    layer = lib.nn.Linear(2, 2)
    layer.register_full_backward_hook(lambda m, gi, go: (3,))
    with pytest.raises(TypeError):
        layer(lib.ones(1, 2, requires_grad=True)).sum().backward()


def test_module_called_twice_fires_its_hooks_per_call(lib: Any) -> None:
    """Hooks fire for every module call: a layer used twice runs its full hook twice."""
    layer = _linear(lib, [[2.0]], [0.0])
    seen: list[list[float]] = []
    layer.register_full_backward_hook(lambda m, gi, go: seen.append(_np(go[0]).ravel().tolist()))
    x = lib.tensor([[1.0]], requires_grad=True)
    layer(layer(x)).sum().backward()
    assert seen == [[1.0], [2.0]]  # the outer call first, then the inner one
    np.testing.assert_array_equal(_np(x.grad), [[4.0]])


# ---------------------------------------------------------------------- multi-grad hooks
def test_multi_grad_hook_all_and_any(lib: Any) -> None:
    """MG-1: fn(grads) once per backward, None for absent tensors; MG-5: mode='any'."""
    a = lib.tensor([1.0], requires_grad=True)
    b = lib.tensor([2.0], requires_grad=True)
    log: list[Any] = []
    register = lib.autograd.graph.register_multi_grad_hook
    handle = register((a, b), lambda gs: log.append([None if g is None else _np(g)[0] for g in gs]))
    (a * 3).sum().backward()
    (a * 2 + b * 5).sum().backward()
    handle.remove()
    assert log == [[3.0, None], [2.0, 5.0]]
    first: list[float] = []
    register((a, b), lambda g: first.append(float(_np(g)[0])), mode="any")
    (a * 7 + b * 11).sum().backward()
    assert len(first) == 1 and first[0] in (7.0, 11.0)


# ---------------------------------------------------------------------- optimizer hooks
def _optimizer_registry(lib: Any) -> Any:
    if lib.__name__ == "torch":
        import torch.optim.optimizer as registry

        return registry
    return lib.optim.optimizer


def test_optimizer_hook_order_and_arguments(lib: Any) -> None:
    """Global pre, own pre (args start with opt), step, own post, global post."""
    registry = _optimizer_registry(lib)
    p = lib.nn.Parameter(lib.ones(2))
    optimizer = lib.optim.SGD([p], lr=0.5)
    log: list[Any] = []
    optimizer.register_step_pre_hook(lambda o, a, k: log.append(("pre", a[0] is o, dict(k))))
    optimizer.register_step_post_hook(lambda o, a, k: log.append("post"))
    handles = [
        registry.register_optimizer_step_pre_hook(lambda o, a, k: log.append("global pre")),
        registry.register_optimizer_step_post_hook(lambda o, a, k: log.append("global post")),
    ]
    p.grad = lib.ones(2)
    try:
        optimizer.step()
    finally:
        for handle in handles:
            handle.remove()
    assert log == ["global pre", ("pre", True, {}), "post", "global post"]
    np.testing.assert_array_equal(_np(p), [0.5, 0.5])


def test_optimizer_pre_hook_other_return_raises(lib: Any) -> None:
    """'any other non-None value raises RuntimeError'; the parameters stay unchanged."""
    p = lib.nn.Parameter(lib.ones(2))
    optimizer = lib.optim.SGD([p], lr=0.5)
    optimizer.register_step_pre_hook(lambda o, a, k: 5)
    p.grad = lib.ones(2)
    with pytest.raises(RuntimeError, match=r"step at .* must return None or a tuple"):
        optimizer.step()
    np.testing.assert_array_equal(_np(p), [1.0, 1.0])


def test_optimizer_pre_hook_can_replace_the_closure(lib: Any) -> None:
    """Returning (new_args, new_kwargs) replaces what the step receives (a different closure)."""
    p = lib.nn.Parameter(lib.ones(1))
    optimizer = lib.optim.SGD([p], lr=1.0)

    def closure() -> Any:
        optimizer.zero_grad()
        loss = (p * 3).sum()
        loss.backward()
        return loss

    optimizer.register_step_pre_hook(lambda o, a, k: ((a[0],), {"closure": closure}))
    p.grad = lib.ones(1) * 100
    loss = optimizer.step()
    assert float(_np(loss)) == 3.0
    np.testing.assert_array_equal(_np(p), [-2.0])


def test_a_raising_step_runs_no_post_hook(lib: Any) -> None:
    """'If the step raises, no post hook runs.'"""
    p = lib.nn.Parameter(lib.ones(1))
    optimizer = lib.optim.SGD([p], lr=1.0)
    fired: list[int] = []
    optimizer.register_step_post_hook(lambda *a: fired.append(1))

    def closure() -> Any:
        raise KeyError("closure")

    with pytest.raises(KeyError):
        optimizer.step(closure)
    assert fired == []


def test_custom_optimizer_subclass_gets_the_hooks(lib: Any) -> None:
    """'a custom Optimizer subclass gets the hooks too'."""

    class Halve(lib.optim.Optimizer):
        def __init__(self, params: Any) -> None:
            super().__init__(params, {})

        def step(self, closure: Any = None) -> None:
            with lib.no_grad():
                for group in self.param_groups:
                    for p in group["params"]:
                        p.mul_(0.5)

    p = lib.nn.Parameter(lib.ones(1))
    optimizer = Halve([p])
    log: list[str] = []
    optimizer.register_step_pre_hook(lambda *a: log.append("pre"))
    optimizer.register_step_post_hook(lambda *a: log.append("post"))
    optimizer.step()
    assert log == ["pre", "post"]
    np.testing.assert_array_equal(_np(p), [0.5])


def test_load_state_dict_pre_hook_gets_a_shallow_copy_and_may_replace(lib: Any) -> None:
    """state_dict post hook may replace; load pre-hook receives a shallow copy, may replace."""
    p = lib.nn.Parameter(lib.ones(1))
    optimizer = lib.optim.SGD([p], lr=0.1)
    state = optimizer.state_dict()
    seen: list[bool] = []

    def pre(opt: Any, sd: Any) -> Any:
        seen.append(sd is state)
        sd["param_groups"][0]["lr"] = 0.25
        return sd

    optimizer.register_load_state_dict_pre_hook(pre)
    optimizer.load_state_dict(state)
    assert seen == [False]
    assert optimizer.param_groups[0]["lr"] == 0.25
    optimizer.register_state_dict_post_hook(lambda opt, sd: {**sd, "note": 1})
    assert optimizer.state_dict()["note"] == 1


# ---------------------------------------------------------------------- exceptions
def test_a_hook_exception_keeps_its_class_and_earlier_gradients(lib: Any) -> None:
    """E-1, E-2: the hook's own exception class propagates; accumulated grads stay."""
    a = lib.tensor([1.0], requires_grad=True)
    b = lib.tensor([1.0], requires_grad=True)

    def boom(g: Any) -> None:
        raise LookupError("hook")

    a.register_hook(boom)
    with pytest.raises(LookupError, match="hook"):
        (a * 2 + b * 3).sum().backward()  # b's branch is newer: it runs first
    np.testing.assert_array_equal(_np(b.grad), [3.0])
    assert a.grad is None


def test_a_forward_hook_exception_propagates_from_the_call(lib: Any) -> None:
    """An exception in a forward hook propagates out of the module call with its own class."""
    layer = lib.nn.Identity()
    layer.register_forward_hook(lambda *a: {}["missing"])
    with pytest.raises(KeyError):
        layer(lib.ones(1))


def test_optimizer_hooks_are_not_pickled(lib: Any) -> None:
    """'Hooks are not pickled': an unpickled or deep-copied optimizer runs none of them."""
    import copy
    import pickle

    p = lib.nn.Parameter(lib.ones(1))
    optimizer = lib.optim.SGD([p], lr=1.0)
    fired: list[int] = []
    optimizer.register_step_pre_hook(lambda *a: fired.append(1))
    for clone in (pickle.loads(pickle.dumps(optimizer)), copy.deepcopy(optimizer)):
        [q] = clone.param_groups[0]["params"]
        q.grad = lib.ones(1)
        clone.step()
        np.testing.assert_array_equal(_np(q), [0.0])
    assert fired == []


# ---------------------------------------------------------------------- the B-9 warning
def _warn_once(lib: Any) -> None:
    layer = lib.nn.Linear(2, 1)
    layer.register_full_backward_hook(lambda *a: None)
    layer(lib.ones(1, 2)).sum().backward()


def test_a_global_ignore_filter_silences_the_b9_warning(lib: Any) -> None:
    """'warnings.filterwarnings("ignore", message="Full backward hook is firing")' silences it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        _warn_once(lib)
    assert caught == []


def test_an_error_filter_turns_the_b9_warning_into_an_exception(lib: Any) -> None:
    """The warning goes through the warnings machinery: an "error" filter raises it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Full backward hook is firing")
        with pytest.raises(UserWarning, match="no inputs require gradients"):
            _warn_once(lib)


def test_a_filter_for_one_module_still_works(lib: Any) -> None:
    """'a filter for one module still works': the warning is attributed to the caller's file."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore")
        warnings.filterwarnings("always", category=UserWarning, module=__name__)
        _warn_once(lib)
    assert [w.filename for w in caught] == [__file__]


# ---------------------------------------------------------------------- grad_fn hooks
@pytest.mark.parametrize("kind", ["prehook", "hook"])
def test_a_node_hook_returning_the_wrong_count_raises_torchs_error(lib: Any, kind: str) -> None:
    """grad_fn.register_prehook / register_hook: a replacement of the wrong length fails."""
    x = lib.ones(2, requires_grad=True)
    y = x * 2  # one grad_output; grad_inputs (for x, None for the number 2)
    if kind == "prehook":
        y.grad_fn.register_prehook(lambda go: (go[0], go[0]))
        expected = r"has returned an incorrect number of values \(got 2, but expected 1\)"
    else:
        y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0], gi[0]))
        expected = r"has returned an incorrect number of values \(got 3, but expected 2\)"
    with pytest.raises(RuntimeError, match=expected):
        y.sum().backward()
    assert x.grad is None


@pytest.mark.parametrize("kind", ["prehook", "hook"])
def test_a_node_hook_cannot_replace_a_none_gradient(lib: Any, kind: str) -> None:
    """torch: "can't replace a None gradient with a non-None value" (pre and post hooks)."""
    x = lib.ones(4, requires_grad=True)
    if kind == "prehook":
        a, _ = x.split(2)  # the unused second output has a None gradient
        a.grad_fn.register_prehook(lambda go: tuple(lib.ones(2) if g is None else g for g in go))
        out = a
    else:
        out = x * lib.ones(4)  # no gradient flows to the constant
        out.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="can't replace a None gradient with a non-None value"):
        out.sum().backward()
    assert x.grad is None


def test_a_node_post_hook_replacement_reaches_the_input(lib: Any) -> None:
    """grad_fn.register_hook: a returned grad_inputs tuple replaces what flows to the inputs."""
    x = lib.ones(2, requires_grad=True)
    y = x * 3
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 10, None))
    y.sum().backward()
    np.testing.assert_array_equal(_np(x.grad), [30.0, 30.0])


# ---------------------------------------------------------------------- hooks changed mid-run
def _hooks_changed_mid_run(lib: Any, kind: str) -> list[str]:
    """Two calls of a Linear (and one backward) while a hook adds or removes hooks."""
    m = lib.nn.Linear(2, 2)
    log: list[str] = []
    handles: dict[str, Any] = {}

    def note(text: str) -> Any:
        def hook(*args: Any) -> None:
            log.append(text)

        return hook

    if kind == "pre_hook_removes_forward_hook":
        handles["f"] = m.register_forward_hook(note("forward"))
        m.register_forward_pre_hook(lambda *a: handles["f"].remove())
    elif kind == "forward_hook_adds_one":

        def add(*args: Any) -> None:
            log.append("first")
            m.register_forward_hook(note("added"))

        m.register_forward_hook(add)
    elif kind == "forward_hook_removes_a_later_one":

        def remove_second(*args: Any) -> None:
            log.append("first")
            handles["s"].remove()

        m.register_forward_hook(remove_second)
        handles["s"] = m.register_forward_hook(note("second"))
    elif kind == "backward_pre_hook_removes_full_hook":
        handles["b"] = m.register_full_backward_hook(note("full"))
        m.register_full_backward_pre_hook(lambda *a: handles["b"].remove())
    elif kind == "full_hook_removes_itself":

        def once(*args: Any) -> None:
            log.append("full")
            handles["b"].remove()

        handles["b"] = m.register_full_backward_hook(once)
    x = lib.ones(1, 2, requires_grad=True)
    out = m(m(x))
    out.sum().backward()
    return log


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("pre_hook_removes_forward_hook", []),
        ("forward_hook_adds_one", ["first", "first", "added"]),
        ("forward_hook_removes_a_later_one", ["first", "second", "first"]),
        ("backward_pre_hook_removes_full_hook", ["full", "full"]),
        ("full_hook_removes_itself", ["full", "full"]),
    ],
)
def test_hooks_added_or_removed_mid_run(lib: Any, kind: str, expected: list[str]) -> None:
    """Forward hook lists are read per call (a removal or addition counts from the next
    hook/call); backward hooks are fixed when forward ran (B-19), whatever is removed later."""
    assert _hooks_changed_mid_run(lib, kind) == expected
