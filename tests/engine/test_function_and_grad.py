"""Custom autograd.Function, autograd.grad and gradcheck."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import hookgrad
from hookgrad.autograd.gradcheck import GradcheckError


def _function_base(lib):
    return importlib.import_module(f"{lib.__name__}.autograd").Function


def _cube(lib):
    class Cube(_function_base(lib)):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x**3 * scale

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x**2 * ctx.scale, None

    return Cube


def test_custom_function_forward_backward_and_node_name(lib):
    """apply() records one node named <Class>Backward whose backward feeds the inputs."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = _cube(lib).apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward"
    y.sum().backward()
    assert y.tolist() == [2.0, 16.0]
    assert x.grad.tolist() == [6.0, 24.0]


def test_custom_function_materializes_missing_grads_as_zeros(lib):
    """Unused outputs arrive in backward as zeros unless set_materialize_grads(False)."""
    seen = []

    class Pair(_function_base(lib)):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append((g1.tolist(), g2.tolist()))
            return g1 * 2 + g2 * 3

    x = lib.tensor([1.0], requires_grad=True)
    first, _ = Pair.apply(x)
    first.sum().backward()
    assert seen == [([1.0], [0.0])]
    assert x.grad.tolist() == [2.0]


def test_input_returned_as_is_becomes_view_that_rejects_inplace(lib):
    """An input returned unchanged is a new object; modifying it in place raises (B-14/B-15)."""

    class Identity(_function_base(lib)):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    x = lib.tensor([1.0], requires_grad=True) * 1
    y = Identity.apply(x)
    assert y is not x and not y.is_leaf
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
        y.add_(1)


def test_autograd_grad_returns_without_accumulating(lib):
    """autograd.grad returns gradients for the inputs and leaves .grad untouched."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    w = lib.tensor([3.0, 4.0], requires_grad=True)
    (gx,) = lib.autograd.grad((x * w).sum(), x)
    assert gx.tolist() == [3.0, 4.0]
    assert x.grad is None and w.grad is None


def test_autograd_grad_unused_input(lib):
    """An unused input raises unless allow_unused, which returns None for it."""
    x = lib.tensor([1.0], requires_grad=True)
    z = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        lib.autograd.grad((x * 2).sum(), [x, z])
    gx, gz = lib.autograd.grad((x * 2).sum(), [x, z], allow_unused=True)
    assert (gx.tolist(), gz) == ([2.0], None)


def test_autograd_grad_takes_torchs_arguments_in_torchs_order(lib):
    """``only_inputs`` sits before ``allow_unused`` as in torch and is ignored (a FutureWarning
    when False), so WGAN-GP's ``grad(..., only_inputs=True)`` and positional calls run."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    z = lib.tensor([1.0], requires_grad=True)
    gx, gz = lib.autograd.grad((x * x).sum(), [x, z], None, None, False, True, True)
    assert (gx.tolist(), gz) == ([2.0, 4.0], None)
    (gx,) = lib.autograd.grad((x * x).sum(), x, create_graph=True, only_inputs=True)
    assert gx.requires_grad
    with pytest.warns(FutureWarning, match="only_inputs argument is deprecated"):
        lib.autograd.grad((x * 3).sum(), x, only_inputs=False)


def test_autograd_grad_of_intermediate_runs_hooks_before_capture(lib):
    """Gradients w.r.t. a non-leaf come after that tensor's hooks, as in torch."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.register_hook(lambda g: g * 10)
    (gh,) = lib.autograd.grad((h * h).sum(), h)
    assert gh.tolist() == [40.0, 80.0]


def test_backward_with_explicit_gradient_shape_mismatch(lib):
    """A gradient= of the wrong shape raises RuntimeError."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(lib.tensor([1.0, 2.0, 3.0]))


def test_gradcheck_accepts_correct_and_rejects_wrong_gradients():
    """gradcheck passes a correct op and names the mismatch for a wrong one."""
    x = hookgrad.tensor(np.array([0.3, -1.2, 2.0]), requires_grad=True)
    assert hookgrad.autograd.gradcheck(lambda t: (t * t.sin()).sum(), (x,))

    class Wrong(hookgrad.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * t

        @staticmethod
        def backward(ctx, g):
            return g  # should be 2 * t * g

    with pytest.raises(
        GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"
    ):
        hookgrad.autograd.gradcheck(Wrong.apply, (x,))
    assert not hookgrad.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False)
