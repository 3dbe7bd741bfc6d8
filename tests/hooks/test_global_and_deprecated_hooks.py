"""Global module hooks (G-1..G-4) and the deprecated register_backward_hook (B-22)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest


def _r(t):
    return None if t is None else [round(v, 4) for v in t.reshape(-1).tolist()]


def test_global_hooks_fire_for_every_module_call(lib, global_hooks):
    """G-2: global hooks see containers, leaves and loss modules, in nesting order."""
    model = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU())
    loss_fn = lib.nn.MSELoss()
    forward, backward = [], []
    global_hooks("forward", lambda m, a, o: forward.append(type(m).__name__))
    global_hooks("backward", lambda m, gi, go: backward.append(type(m).__name__))
    x = lib.tensor([[1.0, 2.0]], requires_grad=True)
    loss_fn(model(x), lib.zeros(1, 2)).backward()
    assert forward == ["Linear", "ReLU", "Sequential", "MSELoss"]
    assert backward == ["MSELoss", "ReLU", "Linear", "Sequential"]


def test_global_hooks_precede_local_prepend_hooks(lib, global_hooks):
    """G-1: global backward hooks run before local ones registered with prepend=True."""
    layer = lib.nn.Linear(1, 1)
    order = []
    layer.register_full_backward_pre_hook(lambda m, go: order.append("local-pre"), prepend=True)
    layer.register_full_backward_hook(lambda m, gi, go: order.append("local-full"), prepend=True)
    global_hooks("backward_pre", lambda m, go: order.append("global-pre"))
    global_hooks("backward", lambda m, gi, go: order.append("global-full"))
    layer(lib.tensor([[1.0]], requires_grad=True)).sum().backward()
    assert order == ["global-pre", "local-pre", "global-full", "local-full"]


def test_global_forward_pre_hook_has_no_kwargs_option(lib, global_hooks):
    """G-3: the global forward pre-hook is always hook(module, args); 3 parameters fail."""
    registry = lib.nn.modules.module
    with pytest.raises(TypeError):
        registry.register_module_forward_pre_hook(lambda m, a: None, with_kwargs=True)
    global_hooks("forward_pre", lambda m, a, k: None)
    with pytest.raises(TypeError):
        lib.nn.Identity()(lib.tensor([1.0]))


def test_global_forward_hook_with_kwargs_and_replacement(lib, global_hooks):
    """G-3/F-5: global forward hook with_kwargs gets kwargs; its return reaches local hooks."""

    class Scale(lib.nn.Module):
        def forward(self, x, *, k=1.0):
            return x * k

    m = Scale()
    seen = []
    global_hooks("forward", lambda mod, a, kw, out: out + 1, with_kwargs=True)
    m.register_forward_hook(lambda mod, a, out: seen.append(out.tolist()))
    assert m(lib.tensor([2.0]), k=3.0).tolist() == [7.0]
    assert seen == [[7.0]]


def test_nn_reexports_global_registration(lib):
    """Global registration functions are reachable from nn.modules.module."""
    registry = lib.nn.modules.module
    for name in (
        "register_module_forward_pre_hook",
        "register_module_forward_hook",
        "register_module_full_backward_pre_hook",
        "register_module_full_backward_hook",
        "register_module_backward_hook",
    ):
        assert callable(getattr(registry, name))


def _regular(lib, module, x, target=None):
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module.register_backward_hook(
            lambda m, gi, go: seen.append(([_r(g) for g in gi], [_r(g) for g in go]))
        )
        out = module(x) if target is None else module(x, target)
    out.sum().backward()
    return seen


def test_deprecated_hook_sees_last_op_of_slinear(lib):
    """B-22: for SLinear (s**2) the regular hook's grad_input is dL/ds, not dL/dx."""

    class SLinear(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = lib.nn.Linear(1, 1)
            with lib.no_grad():
                self.linear.weight.fill_(0.4)
                self.linear.bias.fill_(0.2)

        def forward(self, x):
            return self.linear(x) ** 2

    f0 = lib.nn.Linear(1, 1)
    with lib.no_grad():
        f0.weight.fill_(0.3)
        f0.bias.fill_(0.1)
    f1 = SLinear()
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f1.register_backward_hook(lambda m, gi, go: seen.append([_r(g) for g in gi]))
        y = f1(f0(lib.tensor([0.3], requires_grad=True)))
    ((y - 1) ** 2).sum().backward()
    assert seen == [[[-1.0199]]]


@pytest.mark.parametrize(
    ("name", "expected"),
    [("ReLU", [1.0, 0.0]), ("Tanh", [0.42, 0.7864]), ("Sigmoid", [0.1966, 0.235])],
)
def test_deprecated_hook_single_op_modules(lib, name, expected):
    """B-22: activation modules report their single op's input gradient."""
    x = lib.tensor([1.0, -0.5], requires_grad=True)
    seen = _regular(lib, getattr(lib.nn, name)(), x)
    assert seen[0][0] == [expected]


def test_deprecated_hook_mse_loss_has_none_for_target(lib):
    """B-22: MSELoss reports (grad_input, None)."""
    x = lib.tensor([1.0, 3.0], requires_grad=True)
    seen = _regular(lib, lib.nn.MSELoss(), x, lib.tensor([0.0, 1.0]))
    assert seen == [([[1.0, 2.0], None], [[1.0]])]


def test_deprecated_hook_linear_reports_addmm_triple(lib):
    """B-22: Linear on 2-D input reports (grad_bias[out], grad_x[B,in], grad_W^T[in,out])."""
    layer = lib.nn.Linear(2, 3)
    with lib.no_grad():
        layer.weight.copy_(lib.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    x = lib.tensor([[1.0, -1.0]], requires_grad=True)
    shapes = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layer.register_backward_hook(lambda m, gi, go: shapes.append([tuple(g.shape) for g in gi]))
        layer(x).sum().backward()
    assert shapes == [[(3,), (1, 2), (2, 3)]]


def test_deprecated_hook_return_replaces_op_grad_input(lib):
    """B-22: a non-None return replaces that op's grad_input."""
    act = lib.nn.Tanh()
    x = lib.tensor([0.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        act.register_backward_hook(lambda m, gi, go: (gi[0] * 7,))
        act(x).sum().backward()
    assert _r(x.grad) == [7.0]


def _run_isolated(lib_name: str, body: str) -> str:
    """Run ``body`` in a fresh interpreter (process-wide sticky flags) and return its stdout."""
    script = f"import {lib_name} as lib\n" + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_global_backward_hook_kinds_are_sticky_for_the_process(lib):
    """G-4: after any global full hook, a global regular hook always raises, and vice versa."""
    body = """
    reg = lib.nn.modules.module
    reg.register_module_full_backward_hook(lambda *a: None).remove()
    try:
        reg.register_module_backward_hook(lambda *a: None)
        print("no error")
    except RuntimeError:
        print("RuntimeError")
    """
    assert _run_isolated(lib.__name__, body) == "RuntimeError"
    reverse = """
    reg = lib.nn.modules.module
    reg.register_module_backward_hook(lambda *a: None).remove()
    try:
        reg.register_module_full_backward_hook(lambda *a: None)
        print("no error")
    except RuntimeError:
        print("RuntimeError")
    """
    assert _run_isolated(lib.__name__, reverse) == "RuntimeError"


def test_global_regular_hook_on_container_fires_with_last_child(lib):
    """G-4: a container's global regular hook fires right after its last child's, same grads."""
    body = """
    import warnings
    warnings.simplefilter("ignore")
    reg = lib.nn.modules.module
    model = lib.nn.Sequential(lib.nn.Linear(1, 1), lib.nn.Tanh())
    log = []
    reg.register_module_backward_hook(
        lambda m, gi, go: log.append((type(m).__name__, [round(g.sum().item(), 4) for g in gi if g is not None]))
    )
    with lib.no_grad():
        model[0].weight.fill_(0.5)
        model[0].bias.fill_(0.0)
    model(lib.tensor([[1.0]], requires_grad=True)).sum().backward()
    print(log)
    """
    out = _run_isolated(lib.__name__, body)
    assert (
        out
        == "[('Tanh', [0.7864]), ('Sequential', [0.7864]), ('Linear', [0.7864, 0.3932, 0.7864])]"
    )


@pytest.mark.parametrize("kind", ["backward", "backward_pre"])
def test_internal_global_backward_hooks_fire_without_the_b9_warning(kind: str) -> None:
    """hookgrad's own registrations (``_internal=True``, the plugin runtime's) fire for a module
    whose inputs need no grad without torch's B-9 warning, which concerns the user's hooks;
    a user hook on the same call brings the warning back."""
    import hookgrad

    registry = hookgrad.nn.modules.module
    register = {
        "backward": registry.register_module_full_backward_hook,
        "backward_pre": registry.register_module_full_backward_pre_hook,
    }[kind]
    calls = []
    layer = hookgrad.nn.Linear(1, 1)
    with register(lambda m, *grads: calls.append(type(m).__name__), _internal=True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            layer(hookgrad.tensor([[3.0]])).sum().backward()
        assert calls == ["Linear"]
        user_hook = layer.register_full_backward_pre_hook(lambda m, go: None)
        with user_hook, pytest.warns(UserWarning, match=r"^Full backward hook is firing when"):
            layer(hookgrad.tensor([[3.0]])).sum().backward()
    assert calls == ["Linear", "Linear"]


def test_a_users_global_regular_hook_does_not_bring_the_b9_warning_back() -> None:
    """A user's deprecated global regular hook builds no full-hook machinery (B-22), so beside
    an internal global pre-hook a module whose inputs need no grad still does not warn."""
    body = """
    import warnings
    reg = lib.nn.modules.module
    warnings.simplefilter("ignore", FutureWarning)  # B-22's own warning at forward time
    reg.register_module_backward_hook(lambda *a: None)
    calls = []
    reg.register_module_full_backward_pre_hook(lambda m, go: calls.append(1), _internal=True)
    warnings.simplefilter("error", UserWarning)
    lib.nn.Linear(1, 1)(lib.tensor([[3.0]])).sum().backward()
    print(len(calls))
    """
    assert _run_isolated("hookgrad", body) == "1"
