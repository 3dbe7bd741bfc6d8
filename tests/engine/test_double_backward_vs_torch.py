"""Double backward (``create_graph=True``) of each op with a recorded formula, against torch 2.13.

Each program's first gradients are taken with ``create_graph=True`` for a ``grad_outputs``
that itself requires grad; a weighted sum of them is differentiated again with respect to
the inputs and to ``grad_outputs``. The first and the second gradients must equal torch's
(torch's gradgradcheck idea, with torch as the oracle instead of finite differences).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hookgrad

torch = pytest.importorskip("torch")

RTOL, ATOL = 2e-4, 2e-5


def _weights(shape: tuple[int, ...], phase: float) -> np.ndarray:
    n = int(np.prod(shape))
    return np.cos(np.arange(n) * 1.3 + phase).reshape(shape).astype(np.float32)


def _second_order(lib: Any, fn: Callable[..., Any], arrays: list[np.ndarray]) -> list[Any]:
    """First gradients, then second gradients (inputs and grad_outputs), as numpy arrays."""
    xs = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    diff = [x for x in xs if x.requires_grad]
    out = fn(lib, *xs)
    v = lib.tensor(_weights(tuple(out.shape), 0.4), requires_grad=True)
    firsts = lib.autograd.grad(out, diff, grad_outputs=v, create_graph=True)
    total = sum((g * lib.tensor(_weights(tuple(g.shape), 1.1))).sum() for g in firsts)
    seconds = lib.autograd.grad(total, [*diff, v], allow_unused=True, materialize_grads=True)
    return [t.detach().numpy() for t in (*firsts, *seconds)]


def _check(fn: Callable[..., Any], *arrays: np.ndarray) -> None:
    ours = _second_order(hookgrad, fn, list(arrays))
    theirs = _second_order(torch, fn, list(arrays))
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=f"gradient {i}")


def _randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _positive(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 2.0, shape).astype(np.float32)


def _cross_entropy(lib: Any, x: Any, t: Any, **kw: Any) -> Any:
    return lib.nn.functional.cross_entropy(x, t, **kw)


def _dropped(lib: Any, x: Any) -> Any:
    """Dropout with the same mask on both engines: the mask is drawn by the test."""
    mask = lib.tensor((np.arange(x.numel()).reshape(tuple(x.shape)) % 3 != 0).astype(np.float32))
    return x * mask * 1.5 if lib is torch else _hookgrad_dropout(x, mask)


def _hookgrad_dropout(x: Any, mask: Any) -> Any:
    from hookgrad.nn._ops.dropout import _dropout

    return _dropout(x, mask._data * np.float32(1.5))


def _assigned(target: Any, source: Any) -> Any:
    """``target[1:, :2] = source[:2, 1:3]`` on a copy, through index assignment."""
    out = target.clone()
    out[1:, :2] = source[:2, 1:3]
    return out


A, B = _randn(3, 4), _randn(3, 4, seed=1)
ROW = _randn(4, seed=2)
P, Q = _positive(3, 4), _positive(3, 4, seed=1)
M1, M2 = _randn(3, 4), _randn(4, 5, seed=1)

# name -> (program, inputs)
CASES: dict[str, tuple[Callable[..., Any], tuple[np.ndarray, ...]]] = {
    "add_broadcast": (lambda lib, a, b: a * a + b, (A, ROW)),
    "add_alpha": (lambda lib, a, b: lib.add(a * a, b * b, alpha=2.5), (A, B)),
    "sub_broadcast": (lambda lib, a, b: a * b - b * b, (A, ROW)),
    "mul": (lambda lib, a, b: a * b * a, (A, B)),
    "mul_number": (lambda lib, a: (a * 3.0) * a, (A,)),
    "div": (lambda lib, a, b: a / b, (A, P)),
    "div_number": (lambda lib, a: (a * a) / 4.0, (A,)),
    "rdiv": (lambda lib, a: 2.0 / a, (P,)),
    "neg_rsub": (lambda lib, a: (1.0 - a) * -a, (A,)),
    "pow_number": (lambda lib, a: a**3, (A,)),
    "pow_square": (lambda lib, a: a**2 * a, (A,)),
    "pow_tensor": (lambda lib, a, b: a**b, (P, Q)),
    "rpow": (lambda lib, a: 2.0**a, (A,)),
    "exp": (lambda lib, a: a.exp(), (A,)),
    "log": (lambda lib, a: a.log(), (P,)),
    "log2_log10": (lambda lib, a: a.log2() * a.log10(), (P,)),
    "sqrt": (lambda lib, a: a.sqrt(), (P,)),
    "tanh": (lambda lib, a: a.tanh(), (A,)),
    "sigmoid": (lambda lib, a: a.sigmoid(), (A,)),
    "sin_cos": (lambda lib, a: a.sin() * a.cos(), (A,)),
    "relu": (lambda lib, a, b: lib.relu(a) * b, (A, B)),
    "leaky_relu": (lambda lib, a, b: lib.nn.functional.leaky_relu(a, 0.2) * b, (A, B)),
    "gelu": (lambda lib, a: lib.nn.functional.gelu(a), (A,)),
    "gelu_tanh": (lambda lib, a: lib.nn.functional.gelu(a, approximate="tanh"), (A,)),
    "abs": (lambda lib, a, b: a.abs() * b, (A, B)),
    "clamp": (lambda lib, a, b: a.clamp(-0.5, 0.5) * b, (A, B)),
    "clamp_tensor": (lambda lib, a, b: lib.clamp(a * a, max=b), (A, B)),
    "maximum": (lambda lib, a, b: lib.maximum(a, b) * a, (A, B)),
    "minimum": (lambda lib, a, b: lib.minimum(a, b) * b, (A, B)),
    "where": (lambda lib, a, b: lib.where(a > 0, a * a, b * a), (A, B)),
    "masked_fill": (lambda lib, a: (a * a).masked_fill(lib.tensor(A > 0.5), 2.0), (A,)),
    "matmul": (lambda lib, a, b: (a @ b) * (a @ b), (M1, M2)),
    "mm": (lambda lib, a, b: lib.mm(a, b).tanh(), (M1, M2)),
    "mv": (lambda lib, a, b: (a @ b).tanh(), (M1, ROW)),
    "dot": (lambda lib, a, b: (a @ b) * (a @ a), (ROW, _randn(4, seed=3))),
    "vecmat": (lambda lib, a, b: (a @ b).sigmoid(), (ROW, M2)),
    "bmm": (lambda lib, a, b: lib.bmm(a, b).tanh(), (_randn(2, 3, 4), _randn(2, 4, 2, seed=1))),
    "matmul_batched_broadcast": (
        lambda lib, a, b: (a @ b).tanh(),
        (_randn(2, 3, 4), _randn(4, 2, seed=1)),
    ),
    "linear": (
        lambda lib, x, w, b: lib.nn.functional.linear(x, w, b).tanh(),
        (_randn(5, 4), _randn(3, 4, seed=1), _randn(3, seed=2)),
    ),
    "linear_no_bias_3d": (
        lambda lib, x, w: lib.nn.functional.linear(x, w).sigmoid(),
        (_randn(2, 5, 4), _randn(3, 4, seed=1)),
    ),
    "sum": (lambda lib, a: (a * a).sum(), (A,)),
    "sum_dim": (lambda lib, a: (a * a).sum(dim=1).tanh(), (A,)),
    "mean_keepdim": (lambda lib, a: (a * a).mean(dim=0, keepdim=True) * a, (A,)),
    "mean": (lambda lib, a: (a * a * a).mean(), (A,)),
    "var": (lambda lib, a: a.var(dim=1) * a.sum(dim=1), (A,)),
    "std": (lambda lib, a: a.std(), (A,)),
    "norm_dim": (lambda lib, a: a.norm(2, dim=1), (A,)),
    "norm": (lambda lib, a: a.norm() * a.sum(), (A,)),
    "norm_p3": (lambda lib, a: a.norm(3, dim=1), (A,)),
    "norm_p1": (lambda lib, a, b: a.norm(1, dim=0) * (a * b).sum(0), (A, B)),
    "logsumexp": (lambda lib, a: lib.logsumexp(a, dim=1), (A,)),
    "softmax": (lambda lib, a: lib.softmax(a, dim=1), (A,)),
    "log_softmax": (lambda lib, a: lib.log_softmax(a, dim=0), (A,)),
    "amax": (lambda lib, a: lib.amax(a * a, dim=1), (A,)),
    "amin": (lambda lib, a: lib.amin(a * a, dim=0) * a[0], (A,)),
    "max_all": (lambda lib, a: (a * a).max() * a, (A,)),
    "max_dim": (lambda lib, a: (a * a).max(dim=1)[0], (A,)),
    "min_dim_keepdim": (lambda lib, a: (a * a).min(dim=0, keepdim=True)[0] * a, (A,)),
    "reshape_view": (lambda lib, a: (a * a).reshape(4, 3).view(12) * a.view(12), (A,)),
    "transpose_t": (lambda lib, a: (a * a).transpose(0, 1) * a.t(), (A,)),
    "permute": (lambda lib, a: (a * a).reshape(3, 2, 2).permute(2, 0, 1), (A,)),
    "expand": (lambda lib, a: (a * a).expand(2, 4) * a[:2], (ROW.reshape(1, 4) + A[:1] * 0,)),
    "squeeze_unsqueeze": (lambda lib, a: (a * a).unsqueeze(1).squeeze(1) * a, (A,)),
    "basic_index": (lambda lib, a: (a * a)[1:, ::2] * a[:2, 1:3], (A,)),
    "select": (lambda lib, a: (a * a)[1] * a[2], (A,)),
    "advanced_index": (lambda lib, a: (a * a)[[0, 2, 0]] * a[[1, 1, 2]], (A,)),
    "cat": (lambda lib, a, b: lib.cat([a * a, b * a], 0) * lib.cat([b, a], 0), (A, B)),
    "stack": (lambda lib, a, b: lib.stack([a * b, a], 1) * lib.stack([b, b], 1), (A, B)),
    "flatten_chunk": (lambda lib, a: (a * a).flatten().chunk(3)[1] * a.flatten()[:4], (A,)),
    "index_assign": (lambda lib, a, b: _assigned(a * a, b * a), (A, B)),
    "split": (lambda lib, a: a.split(2, dim=1)[1] * (a * a).split(2, dim=1)[0], (A,)),
    "unbind": (lambda lib, a: (a * a).unbind(0)[2] * a.unbind(0)[0], (A,)),
    "clone_to": (lambda lib, a: (a * a).clone().to(lib.float64) * 2, (A,)),
    "conv2d": (
        lambda lib, x, w, b: lib.nn.functional.conv2d(x, w, b, padding=1).tanh(),
        (_randn(2, 2, 5, 5), _randn(3, 2, 3, 3, seed=1), _randn(3, seed=2)),
    ),
    "conv2d_stride_dilation_groups": (
        lambda lib, x, w: lib.nn.functional.conv2d(x, w, stride=2, dilation=2, groups=2) ** 2,
        (_randn(1, 4, 7, 6), _randn(4, 2, 2, 2, seed=1)),
    ),
    "conv2d_unbatched": (
        lambda lib, x, w: lib.nn.functional.conv2d(x, w).sigmoid(),
        (_randn(2, 4, 4), _randn(1, 2, 2, 2, seed=1)),
    ),
    "layer_norm": (
        lambda lib, x, w, b: lib.nn.functional.layer_norm(x * x, (2, 3), w, b).tanh(),
        (_randn(2, 2, 3), _randn(2, 3, seed=1), _randn(2, 3, seed=2)),
    ),
    "layer_norm_plain": (lambda lib, x: lib.nn.functional.layer_norm(x, (4,)) * x, (A,)),
    "dropout": (lambda lib, a: _dropped(lib, a * a), (A,)),
    "embedding": (
        lambda lib, w: lib.nn.functional.embedding(lib.tensor([[0, 2], [2, 3]]), w).tanh(),
        (_randn(4, 3),),
    ),
    "embedding_padding_scale": (
        lambda lib, w: lib.nn.functional.embedding(
            lib.tensor([0, 2, 2, 1]), w * w, padding_idx=1, scale_grad_by_freq=True
        ),
        (_randn(4, 3),),
    ),
    "mse_loss": (lambda lib, a, b: lib.nn.functional.mse_loss(a * a, b), (A, B)),
    "mse_loss_sum": (
        lambda lib, a, b: lib.nn.functional.mse_loss(a.tanh(), b * b, reduction="sum"),
        (A, B),
    ),
    "l1_loss": (lambda lib, a, b: lib.nn.functional.l1_loss(a * a, b) * a.sum(), (A, B)),
    "cross_entropy": (_cross_entropy, (A, np.array([0, 3, 1]))),
    "cross_entropy_none": (
        lambda lib, a, t: _cross_entropy(lib, a * a, t, reduction="none"),
        (A, np.array([2, 3, 1])),
    ),
    "cross_entropy_smoothing_weight": (
        lambda lib, a, t: _cross_entropy(
            lib, a, t, weight=lib.tensor(_positive(4)), label_smoothing=0.2
        ),
        (A, np.array([0, 3, 1])),
    ),
    "cross_entropy_ignore_index": (
        lambda lib, a, t: _cross_entropy(lib, a * a, t, ignore_index=3),
        (A, np.array([0, 3, 1])),
    ),
    "nll_loss": (
        lambda lib, a, t: lib.nn.functional.nll_loss(lib.log_softmax(a, dim=1), t, ignore_index=1),
        (A, np.array([0, 3, 1])),
    ),
    "nll_loss_4d_sum": (
        lambda lib, a, t: lib.nn.functional.nll_loss(a.tanh(), t, reduction="sum"),
        (_randn(2, 3, 2, 2), np.array([[[0, 1], [2, 2]], [[1, 0], [0, 2]]])),
    ),
    "cross_entropy_4d": (
        lambda lib, a, t: _cross_entropy(lib, a, t),
        (_randn(2, 3, 2, 2), np.array([[[0, 1], [2, 2]], [[1, 0], [0, 2]]])),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_double_backward_matches_torch(name: str) -> None:
    """First and second gradients through the op equal torch's."""
    fn, arrays = CASES[name]
    _check(fn, *arrays)


@settings(max_examples=25, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
    seed=st.integers(0, 2**16),
    op=st.sampled_from(["add", "sub", "mul", "div"]),
)
def test_broadcasting_double_backward_matches_torch(shapes: Any, seed: int, op: str) -> None:
    """Broadcast binary ops undo broadcasting in their recorded gradients as torch does.

    In float64: ``x*x / (y*x)`` cancels, so float32 rounding in another order than torch's
    can reach the tolerance (found by hypothesis) without any formula being wrong."""
    a = _randn(*shapes.input_shapes[0], seed=seed).astype(np.float64)
    b = _positive(*shapes.input_shapes[1], seed=seed + 1).astype(np.float64)

    def program(lib: Any, x: Any, y: Any) -> Any:
        return getattr(lib, op)(x * x, y * x)

    _check(program, a, b)


@settings(max_examples=25, deadline=None)
@given(
    values=hnp.arrays(
        np.float32, (2, 3), elements=st.floats(-3, 3, width=32).filter(lambda v: abs(v) > 1e-3)
    ),
    fn=st.sampled_from(["tanh", "sigmoid", "exp", "softmax", "log_softmax", "norm"]),
)
def test_smooth_unary_double_backward_matches_torch(values: np.ndarray, fn: str) -> None:
    """Smooth functions' second derivatives equal torch's across values."""

    def program(lib: Any, x: Any) -> Any:
        if fn in ("softmax", "log_softmax"):
            return getattr(lib, fn)(x, dim=1)
        if fn == "norm":
            return x.norm(2, dim=1)
        return getattr(x, fn)()

    _check(program, values)


def _gradient_of_gradient(lib: Any, fn: Callable[..., Any], array: np.ndarray) -> list[Any]:
    """Whether the first gradient is on the graph, its grad_fn, then the second gradient."""
    x = lib.tensor(array, requires_grad=True)
    (g,) = lib.autograd.grad(fn(lib, x).sum(), x, create_graph=True)
    if not g.requires_grad:
        return [False, None, None]
    (second,) = lib.autograd.grad((g * g).sum(), x)
    return [True, g.grad_fn.name(), (second + 0).tolist()]  # torch: maybe a lazy zero tensor


ZERO_SECOND_DERIVATIVE = {
    "relu": lambda lib, x: lib.relu(x),
    "leaky_relu": lambda lib, x: lib.nn.functional.leaky_relu(x, 0.2),
    "abs": lambda lib, x: x.abs(),
    "l1_loss": lambda lib, x: lib.nn.functional.l1_loss(x, lib.zeros(3)),
    "norm_p1": lambda lib, x: x.norm(1),
    "clamp": lambda lib, x: x.clamp(-1.0, 1.0),
    "maximum": lambda lib, x: lib.maximum(x, lib.zeros(3)),
    "where": lambda lib, x: lib.where(x > 0, x, 0.0),
    "sum": lambda lib, x: x * 2,
}


@pytest.mark.parametrize("name", sorted(ZERO_SECOND_DERIVATIVE))
def test_piecewise_linear_gradients_stay_on_the_graph_as_torchs(name: str) -> None:
    """Where torch keeps a piecewise-linear op's gradient on the graph (relu, leaky_relu, abs,
    l1, the 1-norm: the mask reads a saved value), hookgrad does too, with torch's node name,
    and the second gradient is zeros; where torch's is a constant, so is hookgrad's."""
    fn = ZERO_SECOND_DERIVATIVE[name]
    array = np.array([1.5, -2.0, 0.5], np.float32)
    assert _gradient_of_gradient(hookgrad, fn, array) == _gradient_of_gradient(torch, fn, array)
