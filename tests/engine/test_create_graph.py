"""create_graph=True end to end, against torch 2.13: gradient penalties, Hessian-vector
products, ``.grad`` and hooks under create_graph, and the error for an op without a formula."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import hookgrad

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-4, 1e-5


def _critic(lib: Any) -> Any:
    """A small MLP critic with the same weights on both engines."""
    rng = np.random.default_rng(7)
    model = lib.nn.Sequential(
        lib.nn.Linear(3, 8), lib.nn.LeakyReLU(0.2), lib.nn.Linear(8, 8), lib.nn.Tanh(),
        lib.nn.Linear(8, 1),
    )  # fmt: skip
    state = {
        name: lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5)
        for name, p in model.state_dict().items()
    }
    model.load_state_dict(state)
    return model


def _wgan_gp_step(lib: Any) -> tuple[float, list[np.ndarray], list[np.ndarray]]:
    """One critic step of WGAN-GP: loss, gradients, then parameters after an SGD step."""
    rng = np.random.default_rng(3)
    real = lib.tensor(rng.standard_normal((6, 3)).astype(np.float32))
    fake = lib.tensor(rng.standard_normal((6, 3)).astype(np.float32) + 1.0)
    alpha = lib.tensor(rng.uniform(size=(6, 1)).astype(np.float32))
    critic = _critic(lib)
    opt = lib.optim.SGD(critic.parameters(), lr=0.1)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    (grad,) = lib.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)
    penalty = ((grad.norm(2, dim=1) - 1) ** 2).mean() * 10
    loss = critic(fake).mean() - critic(real).mean() + penalty
    opt.zero_grad()
    loss.backward()
    grads = [p.grad.detach().numpy().copy() for p in critic.parameters()]
    opt.step()
    params = [p.detach().numpy().copy() for p in critic.parameters()]
    return float(loss.item()), grads, params


def test_wgan_gp_penalty_step_equals_torch() -> None:
    """A WGAN-GP critic step (gradient penalty through create_graph) gives torch's numbers."""
    ours, theirs = _wgan_gp_step(hookgrad), _wgan_gp_step(torch)
    assert ours[0] == pytest.approx(theirs[0], rel=RTOL)
    for a, b in zip(ours[1] + ours[2], theirs[1] + theirs[2]):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def _hvp(lib: Any) -> list[np.ndarray]:
    """H v of an MLP loss with respect to its parameters, by double backward."""
    model = _critic(lib)
    rng = np.random.default_rng(5)
    x = lib.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    y = lib.tensor(rng.standard_normal((4, 1)).astype(np.float32))
    params = list(model.parameters())
    loss = lib.nn.functional.mse_loss(model(x), y)
    grads = lib.autograd.grad(loss, params, create_graph=True)
    vs = [lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)) for p in params]
    dot = sum((g * v).sum() for g, v in zip(grads, vs))
    return [h.numpy() for h in lib.autograd.grad(dot, params)]


def test_hessian_vector_product_equals_torch() -> None:
    """A Hessian-vector product over an MLP's parameters equals torch's."""
    for a, b in zip(_hvp(hookgrad), _hvp(torch)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def test_leaf_grad_is_graph_connected_and_accumulates(lib: Any) -> None:
    """backward(create_graph=True) leaves a .grad with a grad_fn; a second one adds to it."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x**3).sum().backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.grad_fn is not None
    assert x.grad.tolist() == [3.0, 12.0]
    (x**3).sum().backward(create_graph=True)
    assert x.grad.grad_fn.name() == "AddBackward0"
    (second,) = lib.autograd.grad(x.grad.sum(), x)
    assert second.tolist() == [12.0, 24.0]


def test_hooks_see_gradients_that_require_grad(lib: Any) -> None:
    """Under create_graph, tensor hooks on leaves and non-leaves get recorded gradients, and a
    hook's replacement carries on into the graph."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    seen: list[tuple[str, bool]] = []
    h.register_hook(lambda g: seen.append(("h", g.requires_grad)) or g * x)
    x.register_hook(lambda g: seen.append(("x", g.requires_grad)))
    (g,) = lib.autograd.grad((h**2).sum(), x, create_graph=True)
    assert seen == [("h", True), ("x", True)]
    assert g.tolist() == [2.0, 8.0]  # 2h * x
    (second,) = lib.autograd.grad(g.sum(), x)
    # d/dx (2h * x) = 2x + 2h, where h's hook fires again in this pass (as torch's): 2x*x + 2x
    assert seen[2:] == [("h", False), ("x", False)]
    assert second.tolist() == [4.0, 12.0]


def test_retain_grad_under_create_graph(lib: Any) -> None:
    """A retained non-leaf gradient is recorded too."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    h.retain_grad()
    (h**2).sum().backward(create_graph=True)
    assert h.grad.requires_grad
    assert h.grad.tolist() == [2.0, 8.0]


def test_custom_function_backward_is_recorded(lib: Any) -> None:
    """A custom Function's backward runs with grad mode on, so its ops are differentiable."""

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * 3 * x**2

    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (g,) = lib.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    (second,) = lib.autograd.grad(g.sum(), x)
    assert second.tolist() == [6.0, 12.0]


def test_grad_outputs_that_require_grad_stay_in_the_graph(lib: Any) -> None:
    """The vector given as grad_outputs is differentiable through the gradient (vjp of vjp)."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    v = lib.tensor([3.0, 4.0], requires_grad=True)
    (g,) = lib.autograd.grad(x**2, x, grad_outputs=v, create_graph=True)
    (dv,) = lib.autograd.grad(g.sum(), v)
    assert dv.tolist() == [2.0, 4.0]


def test_backward_with_create_graph_warns_once_about_the_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """backward(create_graph=True) gives torch's reference-cycle UserWarning, once per process;
    autograd.grad does not."""
    from hookgrad import autograd

    monkeypatch.setattr(autograd, "_cycle_warned", False)
    x = hookgrad.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        autograd.grad((x**2).sum(), x, create_graph=True)
        (x**2).sum().backward(create_graph=True)
        (x**2).sum().backward(create_graph=True)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1
    assert messages[0].startswith("Using backward() with create_graph=True will create a ref")
    assert caught[0].filename == __file__


def test_module_backward_hooks_see_recorded_gradients(lib: Any) -> None:
    """Module backward pre-hooks and full backward hooks fire under create_graph with
    gradients that require grad, and a full hook's replacement stays on the graph."""
    lin = lib.nn.Linear(2, 1)
    lin.load_state_dict({"weight": lib.tensor([[0.5, -1.0]]), "bias": lib.tensor([0.25])})
    seen: list[tuple[Any, ...]] = []
    lin.register_full_backward_pre_hook(lambda m, go: seen.append(("pre", go[0].requires_grad)))

    def full(module: Any, grad_input: Any, grad_output: Any) -> Any:
        seen.append(("full", grad_input[0].requires_grad, grad_output[0].requires_grad))
        return (grad_input[0] * 2,)

    lin.register_full_backward_hook(full)
    x = lib.tensor([[1.0, 2.0]], requires_grad=True)
    (g,) = lib.autograd.grad((lin(x) ** 2).sum(), x, create_graph=True)
    assert seen == [("pre", True), ("full", True, True)]
    assert g.tolist() == [[-2.5, 5.0]]  # 2 (the hook) * 2 out * w, out = -1.25
    (second,) = lib.autograd.grad(g.sum(), x)
    # g.sum() = 4 out (w0 + w1) = -2 out, and the full hook fires again in this pass (x2)
    assert second.tolist() == [[-2.0, 4.0]]
    assert seen[2:] == [("pre", False), ("full", False, False)]


def test_retain_graph_defaults_to_create_graph(lib: Any) -> None:
    """After grad(create_graph=True) the graph is kept: a second pass over it works."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    lib.autograd.grad(y, x, create_graph=True)
    (again,) = lib.autograd.grad(y, x)
    np.testing.assert_allclose(again.numpy(), (np.exp([1.0, 2.0]) * [2.0, 3.0]), rtol=1e-6)


def test_node_hooks_see_recorded_gradients(lib: Any) -> None:
    """grad_fn pre-hooks and hooks fire under create_graph with gradients that require grad."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    seen: list[tuple[str, bool]] = []
    y.grad_fn.register_prehook(lambda go: seen.append(("pre", go[0].requires_grad)))
    y.grad_fn.register_hook(lambda gi, go: seen.append(("post", gi[0].requires_grad)))
    lib.autograd.grad(y.sum(), x, create_graph=True)
    assert seen == [("pre", False), ("post", True)]  # the seed is a constant


# op -> (program over an input (1, 1, 4, 4), the node named in the error)
NO_FORMULA: dict[str, tuple[Any, str]] = {
    "cumsum": (lambda lib, x: x.cumsum(3), "CumsumBackward0"),
    "sort": (lambda lib, x: x.sort(3)[0], "SortBackward0"),
    "gather": (
        lambda lib, x: x.gather(3, lib.zeros(1, 1, 4, 1, dtype=lib.int64)),
        "GatherBackward0",
    ),
    "prod": (lambda lib, x: x.prod(), "ProdBackward0"),
    "inf_norm": (lambda lib, x: x.norm(float("inf")), "LinalgVectorNormBackward0"),
}


@pytest.mark.parametrize("name", sorted(NO_FORMULA))
def test_ops_without_a_recorded_backward_refuse_by_name(name: str) -> None:
    """create_graph through an op with no recorded backward raises a RuntimeError naming its
    node (and the same program without create_graph still works)."""
    program, node = NO_FORMULA[name]
    x = hookgrad.randn(1, 1, 4, 4, requires_grad=True)
    hookgrad.autograd.grad(program(hookgrad, x).sum(), x, retain_graph=True)
    with pytest.raises(RuntimeError, match=f"^{node} has no double-backward formula in hookgrad"):
        hookgrad.autograd.grad(program(hookgrad, x).sum(), x, create_graph=True)


def _layer_norm(lib: Any, x: Any) -> Any:
    """Layer norm over the last dim; on torch written out in ops, because torch's own
    layer_norm has an inexact third derivative (its double-backward formula treats the saved
    statistics as constants), while hookgrad's equals the exact one."""
    if lib is torch:
        var = x.var(1, unbiased=False, keepdim=True)
        return (x - x.mean(1, keepdim=True)) / (var + 1e-5).sqrt()
    return lib.nn.functional.layer_norm(x, (x.shape[-1],))


def _third_order(lib: Any) -> list[np.ndarray]:
    """A third derivative through conv2d, tanh, layer norm and linear: grad of grad of grad."""
    rng = np.random.default_rng(2)
    x = lib.tensor(rng.standard_normal((1, 2, 4, 4)).astype(np.float32), requires_grad=True)
    w = lib.tensor(rng.standard_normal((2, 2, 2, 2)).astype(np.float32), requires_grad=True)
    lin = lib.tensor(rng.standard_normal((3, 18)).astype(np.float32), requires_grad=True)
    features = lib.nn.functional.conv2d(x, w).tanh().reshape(2, 9)
    out = lib.nn.functional.linear(_layer_norm(lib, features).reshape(1, 18), lin)
    (gx,) = lib.autograd.grad((out**2).sum(), x, create_graph=True)
    (gw,) = lib.autograd.grad((gx * gx).sum(), w, create_graph=True)
    third = lib.autograd.grad((gw**2).sum(), [x, w, lin])
    return [t.numpy() for t in third]


def test_third_derivatives_equal_torch() -> None:
    """Recorded gradients are themselves recorded: a third derivative equals torch's."""
    for a, b in zip(_third_order(hookgrad), _third_order(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
