"""The documented recipes for global module hooks and tensor hooks, as tests with real numbers."""

from __future__ import annotations

import math


def _model(lib):
    model = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU(), lib.nn.Linear(2, 1))
    with lib.no_grad():
        model[0].weight.copy_(lib.tensor([[1.0, -2.0], [0.5, 1.5]]))
        model[0].bias.copy_(lib.tensor([0.1, -0.1]))
        model[2].weight.copy_(lib.tensor([[2.0, -1.0]]))
        model[2].bias.copy_(lib.tensor([0.3]))
    return model


def _x(lib):
    return lib.tensor([[1.0, 2.0], [-1.0, 0.5]], requires_grad=True)


def _step(lib, model, x):
    loss = lib.nn.MSELoss()(model(x), lib.tensor([[1.0], [0.0]]))
    loss.backward()
    return loss


def test_log_gradient_norm_per_layer(lib, global_hooks):
    """A global full hook records the grad_output norm of every module by class."""
    norms = []
    global_hooks(
        "backward",
        lambda m, gi, go: norms.append((type(m).__name__, round(go[0].norm().item(), 4))),
    )
    _step(lib, _model(lib), _x(lib))
    assert norms == [
        ("MSELoss", 1.0),
        ("Linear", 4.1027),
        ("ReLU", 9.174),
        ("Linear", 4.1027),
        ("Sequential", 4.1027),
    ]


def test_clamp_grad_input(lib, global_hooks):
    """A global full hook clamps every grad_input to [-1, 1]; the input gradient respects it."""
    global_hooks(
        "backward",
        lambda m, gi, go: tuple(None if g is None else g.clamp(-1, 1) for g in gi),
    )
    x = _x(lib)
    _step(lib, _model(lib), x)
    assert float(x.grad.abs().max()) <= 1.0
    assert [[round(v, 4) for v in row] for row in x.grad.tolist()] == [[0.5, 1.0], [-0.075, -0.225]]


def test_flag_layers_with_all_zero_gradients(lib, global_hooks):
    """A global full hook flags modules whose grad_input is entirely zero (dead ReLU)."""
    dead = []

    def flag(m, gi, go):
        if all(g is None or not bool(g.any()) for g in gi):
            dead.append(type(m).__name__)

    global_hooks("backward", flag)
    model = _model(lib)
    with lib.no_grad():
        model[0].bias.fill_(-100.0)
    _step(lib, model, _x(lib))
    assert dead == ["ReLU", "Linear", "Sequential"]


def test_nan_inf_guard_in_backward_pre_hook(lib, global_hooks):
    """A global backward pre-hook reports the first module whose grad_output is not finite."""
    bad = []

    def guard(m, go):
        if any(g is not None and not bool(g.isfinite().all()) for g in go):
            bad.append(type(m).__name__)

    global_hooks("backward_pre", guard)
    model = _model(lib)
    x = _x(lib)
    out = model(x)
    out.register_hook(lambda g: g * math.inf)
    lib.nn.MSELoss()(out, lib.tensor([[1.0], [0.0]])).backward()
    assert bad[:1] == ["Sequential"]


def test_scale_grad_output(lib, global_hooks):
    """A global backward pre-hook scaling grad_output by 0.1 scales the input gradient."""
    reference = _x(lib)
    _step(lib, _model(lib), reference)
    global_hooks(
        "backward_pre",
        lambda m, go: (
            tuple(None if g is None else g * 0.1 for g in go)
            if type(m).__name__ == "Sequential"
            else None
        ),
    )
    scaled = _x(lib)
    _step(lib, _model(lib), scaled)
    for a, b in zip(scaled.grad.reshape(-1).tolist(), reference.grad.reshape(-1).tolist()):
        assert math.isclose(a, b * 0.1, rel_tol=1e-5, abs_tol=1e-7)


def test_tensor_hook_logs_norm(lib):
    """A tensor hook records the gradient's norm without changing it."""
    norms = []
    x = _x(lib)
    x.register_hook(lambda g: norms.append(round(g.norm().item(), 4)))
    _step(lib, _model(lib), x)
    assert norms == [round(x.grad.norm().item(), 4)] and norms[0] > 0


def test_tensor_hook_clamps(lib):
    """A tensor hook clamping to [-0.5, 0.5] bounds the accumulated gradient."""
    model = _model(lib)
    model[0].weight.register_hook(lambda g: g.clamp(-0.5, 0.5))
    _step(lib, model, _x(lib))
    assert float(model[0].weight.grad.abs().max()) == 0.5


def test_tensor_hook_sign_dependent_scaling(lib):
    """A hook doubles gradients where the tensor is positive and halves them elsewhere."""
    w = lib.tensor([2.0, -3.0], requires_grad=True)
    w.register_hook(lambda g: lib.where(w > 0, g * 2, g * 0.5))
    (w * lib.tensor([1.0, 1.0])).sum().backward()
    assert w.grad.tolist() == [2.0, 0.5]
