"""CPU autocast against torch 2.13: which ops compute in the autocast dtype, which in float32,
the gradients that reach float32 parameters, nesting, the state queries and the weight cache."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hookgrad

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")

_AUTOCAST_DTYPES = ["bfloat16", "float16"]
_RTOL = {"bfloat16": 2e-2, "float16": 2e-3}


def _name(dtype: Any) -> str:
    return str(dtype).rsplit(".", 1)[-1]


def _numbers(t: Any) -> np.ndarray:
    return t.detach().float().numpy()


def _both(arrays: list[np.ndarray], cast: str | None = None) -> tuple[list[Any], list[Any]]:
    """The same arrays as hookgrad and torch tensors (floating ones cast to ``cast``)."""
    sides = []
    for lib in (hookgrad, torch):
        tensors = [lib.tensor(a) for a in arrays]
        if cast is not None:
            tensors = [t.to(getattr(lib, cast)) if t.is_floating_point() else t for t in tensors]
        sides.append(tensors)
    return sides[0], sides[1]


_rng = np.random.default_rng(0)


def _r(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape).astype(np.float32)


_LABELS = np.array([0, 2, 1, 3])
_PROBS = 1 / (1 + np.exp(-_r(4, 6)))

# name -> (input arrays, op); the op takes the library and its tensors
_LOWER: dict[str, tuple[list[np.ndarray], Callable[..., Any]]] = {
    "matmul": ([_r(4, 8), _r(8, 3)], lambda L, a, b: a @ b),
    "mm": ([_r(4, 8), _r(8, 3)], lambda L, a, b: L.mm(a, b)),
    "bmm": ([_r(2, 3, 4), _r(2, 4, 5)], lambda L, a, b: L.bmm(a, b)),
    "baddbmm": ([_r(2, 3, 5), _r(2, 3, 4), _r(2, 4, 5)], lambda L, c, a, b: L.baddbmm(c, a, b)),
    "linear": ([_r(4, 8), _r(6, 8), _r(6)], lambda L, x, w, b: L.nn.functional.linear(x, w, b)),
    "conv1d": ([_r(2, 3, 10), _r(4, 3, 3)], lambda L, x, w: L.nn.functional.conv1d(x, w)),
    "conv2d": (
        [_r(2, 3, 6, 6), _r(4, 3, 3, 3), _r(4)],
        lambda L, x, w, b: L.nn.functional.conv2d(x, w, b, padding=1),
    ),
    "conv_transpose2d": (
        [_r(2, 3, 5, 5), _r(3, 4, 3, 3)],
        lambda L, x, w: L.nn.functional.conv_transpose2d(x, w, stride=2),
    ),
    "prelu": (
        [_r(4, 3), np.array([0.25], np.float32)],
        lambda L, x, w: L.nn.functional.prelu(x, w),
    ),
    "scaled_dot_product_attention": (
        [_r(2, 2, 5, 8), _r(2, 2, 5, 8), _r(2, 2, 5, 8)],
        lambda L, q, k, v: L.nn.functional.scaled_dot_product_attention(q, k, v),
    ),
}

_FLOAT32: dict[str, tuple[list[np.ndarray], Callable[..., Any]]] = {
    "mse_loss": ([_r(4, 6), _r(4, 6)], lambda L, x, y: L.nn.functional.mse_loss(x, y)),
    "l1_loss": ([_r(4, 6), _r(4, 6)], lambda L, x, y: L.nn.functional.l1_loss(x, y)),
    "smooth_l1_loss": ([_r(4, 6), _r(4, 6)], lambda L, x, y: L.nn.functional.smooth_l1_loss(x, y)),
    "cross_entropy": ([_r(4, 6), _LABELS], lambda L, x, y: L.nn.functional.cross_entropy(x, y)),
    "nll_loss": ([_r(4, 6), _LABELS], lambda L, x, y: L.nn.functional.nll_loss(x, y)),
    "binary_cross_entropy": (
        [_PROBS, _PROBS[::-1].copy()],
        lambda L, x, y: L.nn.functional.binary_cross_entropy(x, y),
    ),
    "binary_cross_entropy_with_logits": (
        [_r(4, 6), _PROBS],
        lambda L, x, y: L.nn.functional.binary_cross_entropy_with_logits(x, y),
    ),
    "prod": ([_r(4, 3)], lambda L, x: x.prod()),
}

# ops on neither list keep their inputs' dtypes
_OTHERS: dict[str, tuple[list[np.ndarray], Callable[..., Any]]] = {
    "relu": ([_r(4, 6)], lambda L, x: L.relu(x)),
    "softmax": ([_r(4, 6)], lambda L, x: L.softmax(x, -1)),
    "sum": ([_r(4, 6)], lambda L, x: x.sum()),
    "max_pool2d": ([_r(2, 3, 4, 4)], lambda L, x: L.nn.functional.max_pool2d(x, 2)),
}


def _run(lib: Any, dtype: str, op: Callable[..., Any], tensors: list[Any]) -> Any:
    with lib.autocast("cpu", dtype=getattr(lib, dtype)):
        return op(lib, *tensors)


def _check_same(got: Any, expected: Any, rtol: float) -> None:
    """Same dtype, and values within ``rtol`` (of the largest value, for sums that cancel)."""
    assert _name(got.dtype) == _name(expected.dtype)
    want = _numbers(expected)
    atol = rtol * max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(_numbers(got), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", _AUTOCAST_DTYPES)
@pytest.mark.parametrize("name", sorted(_LOWER))
def test_lower_precision_ops_compute_in_the_autocast_dtype(name: str, dtype: str) -> None:
    """An op of torch's CPU lower-precision list casts float32 inputs to the autocast dtype
    and returns that dtype, with torch's values to that dtype's precision."""
    arrays, op = _LOWER[name]
    mine, theirs = _both(arrays)
    got, expected = _run(hookgrad, dtype, op, mine), _run(torch, dtype, op, theirs)
    assert _name(expected.dtype) == dtype
    _check_same(got, expected, _RTOL[dtype])


@pytest.mark.parametrize("dtype", _AUTOCAST_DTYPES)
@pytest.mark.parametrize("name", sorted(_FLOAT32))
def test_fp32_ops_compute_in_float32(name: str, dtype: str) -> None:
    """An op of torch's CPU fp32 list given autocast-dtype inputs returns float32."""
    arrays, op = _FLOAT32[name]
    mine, theirs = _both(arrays, cast=dtype)
    got, expected = _run(hookgrad, dtype, op, mine), _run(torch, dtype, op, theirs)
    assert _name(expected.dtype) == "float32"
    _check_same(got, expected, 1e-5)


@pytest.mark.parametrize("name", sorted(_OTHERS))
def test_other_ops_keep_their_inputs_dtype(name: str) -> None:
    """Ops on neither list run in their inputs' dtype: float32 stays, bfloat16 stays."""
    arrays, op = _OTHERS[name]
    for cast, rtol in ((None, 1e-6), ("bfloat16", 1e-2)):
        mine, theirs = _both(arrays, cast=cast)
        got, expected = _run(hookgrad, "bfloat16", op, mine), _run(torch, "bfloat16", op, theirs)
        assert _name(expected.dtype) == (cast or "float32")
        _check_same(got, expected, rtol)


def test_float64_inputs_are_not_cast() -> None:
    """float64 tensors are not eligible: a float64 linear stays float64 under autocast."""
    mine, theirs = _both([_r(4, 8).astype(np.float64), _r(6, 8).astype(np.float64)])
    op = _LOWER["linear"][1]
    got = _run(hookgrad, "bfloat16", lambda L, x, w: op(L, x, w, None), mine)
    expected = _run(torch, "bfloat16", lambda L, x, w: op(L, x, w, None), theirs)
    assert _name(expected.dtype) == "float64"
    _check_same(got, expected, 1e-12)


def _mlp(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _cnn(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ReLU(),
        nn.AvgPool2d(2),  # max pooling would pick among bfloat16 near-ties differently
        nn.Flatten(),
        nn.Linear(4 * 4 * 4, 5),
    )


def _twins(build: Callable[[Any], Any]) -> tuple[Any, Any]:
    """The same model in torch and in hookgrad, hookgrad's loaded with torch's weights."""
    torch.manual_seed(0)
    theirs = build(torch)
    mine = build(hookgrad)
    mine.load_state_dict(
        {k: hookgrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    )
    return mine, theirs


def _train_step(
    lib: Any, model: Any, x: np.ndarray, target: np.ndarray, dtype: str, loss_name: str
) -> tuple[list[str], Any]:
    """One autocast forward and a backward outside it; the dtypes each module returned."""
    seen: list[str] = []
    for module in model:
        module.register_forward_hook(lambda m, i, out: seen.append(_name(out.dtype)))
    with lib.autocast("cpu", dtype=getattr(lib, dtype)):
        out = model(lib.tensor(x))
        loss = getattr(lib.nn.functional, loss_name)(out, lib.tensor(target))
    seen.append(_name(loss.dtype))
    loss.backward()
    return seen, loss


@pytest.mark.parametrize("dtype", _AUTOCAST_DTYPES)
@pytest.mark.parametrize(
    ("build", "x", "target", "loss_name"),
    [
        (_mlp, _r(5, 8), _r(5, 4), "mse_loss"),
        (_cnn, _r(2, 3, 8, 8), np.array([1, 4]), "cross_entropy"),
    ],
    ids=["mlp-mse", "cnn-cross-entropy"],
)
def test_training_step_under_autocast_matches_torch(
    build: Callable[[Any], Any], x: np.ndarray, target: np.ndarray, loss_name: str, dtype: str
) -> None:
    """A model's forward under CPU autocast returns torch's dtype module by module (layers in
    the autocast dtype, the loss in float32), torch's loss, and float32 parameter gradients
    close to torch's."""
    mine, theirs = _twins(build)
    seen_mine, loss_mine = _train_step(hookgrad, mine, x, target, dtype, loss_name)
    seen_theirs, loss_theirs = _train_step(torch, theirs, x, target, dtype, loss_name)
    assert seen_mine == seen_theirs
    assert seen_theirs[0] == dtype and seen_theirs[-1] == "float32"
    rtol = _RTOL[dtype]
    np.testing.assert_allclose(_numbers(loss_mine), _numbers(loss_theirs), rtol=rtol)
    for (name, p), (_, q) in zip(mine.named_parameters(), theirs.named_parameters()):
        assert _name(p.grad.dtype) == "float32", name
        scale = float(np.abs(_numbers(q.grad)).max())  # torch sums the products in bfloat16
        np.testing.assert_allclose(
            _numbers(p.grad), _numbers(q.grad), rtol=2 * rtol, atol=3 * rtol * scale, err_msg=name
        )


def test_state_queries_and_nesting(lib: Any) -> None:
    """is_autocast_enabled/get_autocast_dtype follow the innermost context; an inner
    ``enabled=False`` computes in float32, an inner autocast without dtype inherits the
    outer one's, and each exit restores what was before."""
    x = lib.ones(2, 2)
    assert lib.is_autocast_enabled("cpu") is False
    assert lib.get_autocast_dtype("cpu") == lib.bfloat16
    with lib.autocast("cpu", dtype=lib.float16):
        assert lib.is_autocast_enabled("cpu") is True
        assert lib.get_autocast_dtype("cpu") == lib.float16
        with lib.autocast("cpu", enabled=False):
            assert lib.is_autocast_enabled("cpu") is False
            assert (x @ x).dtype == lib.float32
        with lib.autocast("cpu"):
            assert (x @ x).dtype == lib.float16
        with lib.amp.autocast("cpu", dtype=lib.bfloat16):
            assert (x @ x).dtype == lib.bfloat16
        assert (x @ x).dtype == lib.float16
    assert lib.is_autocast_enabled("cpu") is False
    assert lib.is_autocast_enabled() is False
    assert (x @ x).dtype == lib.float32
    assert lib.amp.is_autocast_available("cpu") is lib.amp.is_autocast_available("cuda") is True


def test_autocast_as_decorator_casts(lib: Any) -> None:
    """An enabled autocast used as a decorator computes the function's matmuls in bfloat16."""

    @lib.autocast("cpu")
    def square(t: Any) -> Any:
        return t @ t

    assert square(lib.ones(2, 2)).dtype == lib.bfloat16
    assert lib.is_autocast_enabled("cpu") is False


def _cast_of_weight_hookgrad(y: Any) -> Any:
    return y.grad_fn.next_functions[1][0]


def _cast_of_weight_torch(y: Any) -> Any:
    return y.grad_fn.next_functions[1][0].next_functions[0][0]  # torch's linear passes a t()


@pytest.mark.parametrize(
    ("lib_name", "cast_of"),
    [("hookgrad", _cast_of_weight_hookgrad), ("torch", _cast_of_weight_torch)],
)
def test_parameter_casts_are_cached_per_outermost_region(
    lib_name: str, cast_of: Callable[[Any], Any]
) -> None:
    """Within one outermost autocast region a parameter is cast once (the uses share one
    ToCopyBackward0); a new region, or cache_enabled=False, casts it again."""
    lib = hookgrad if lib_name == "hookgrad" else torch
    linear = lib.nn.functional.linear
    w, x = lib.ones(3, 4, requires_grad=True), lib.ones(2, 4)
    assert lib.is_autocast_cache_enabled() is True
    with lib.autocast("cpu"):
        first = linear(x, w)
        with lib.autocast("cpu"):
            inner = linear(x, w)
        second = linear(x, w)
    assert type(cast_of(first)).__name__ == "ToCopyBackward0"
    assert cast_of(first) is cast_of(second) is cast_of(inner)
    with lib.autocast("cpu"):
        third = linear(x, w)
    assert cast_of(third) is not cast_of(first)
    with lib.autocast("cpu", cache_enabled=False):
        assert cast_of(linear(x, w)) is not cast_of(linear(x, w))
    lib.clear_autocast_cache()


@pytest.mark.parametrize(
    ("build", "x"),
    [
        (lambda L: L.nn.Conv1d(3, 4, 3), _r(2, 3, 10)),
        (lambda L: L.nn.ConvTranspose2d(3, 4, 3, stride=2), _r(2, 3, 5, 5)),
        (lambda L: L.nn.PReLU(), _r(4, 3)),
    ],
    ids=["Conv1d", "ConvTranspose2d", "PReLU"],
)
def test_listed_modules_compute_in_bfloat16(build: Callable[[Any], Any], x: np.ndarray) -> None:
    """Modules built on listed ops return bfloat16 with torch's values under autocast."""
    mine, theirs = _twins(build)
    got = _run(hookgrad, "bfloat16", lambda L, t: mine(t), [hookgrad.tensor(x)])
    expected = _run(torch, "bfloat16", lambda L, t: theirs(t), [torch.tensor(x)])
    assert _name(expected.dtype) == "bfloat16"
    _check_same(got, expected, _RTOL["bfloat16"])


def test_multihead_attention_computes_in_bfloat16() -> None:
    """nn.MultiheadAttention's projections and attention run in bfloat16 under autocast; its
    output and averaged attention weights match torch's dtypes and values."""
    mine, theirs = _twins(lambda L: L.nn.MultiheadAttention(8, 2, batch_first=True))
    x = _r(2, 5, 8)
    got = _run(hookgrad, "bfloat16", lambda L, t: mine(t, t, t), [hookgrad.tensor(x)])
    expected = _run(torch, "bfloat16", lambda L, t: theirs(t, t, t), [torch.tensor(x)])
    for g, e in zip(got, expected):
        _check_same(g, e, _RTOL["bfloat16"])


def test_autocast_state_is_per_thread() -> None:
    """An autocast entered in one thread leaves another thread's matmuls in float32."""
    seen: list[Any] = []
    x = hookgrad.ones(2, 2)
    with hookgrad.autocast("cpu"):
        worker = threading.Thread(
            target=lambda: seen.append(((x @ x).dtype, hookgrad.is_autocast_enabled("cpu")))
        )
        worker.start()
        worker.join()
        assert (x @ x).dtype == hookgrad.bfloat16
    assert seen == [(hookgrad.float32, False)]


@pytest.mark.parametrize(
    ("name", "op", "arrays"),
    [
        ("mv", lambda L, m, v: L.mv(m, v), [_r(3, 4), _r(4)]),
        ("Tensor.mv", lambda L, m, v: m.mv(v), [_r(3, 4), _r(4)]),
        ("Tensor.dot", lambda L, u, v: u.dot(v), [_r(4), _r(4)]),
        ("matmul of vectors", lambda L, u, v: L.matmul(u, v), [_r(4), _r(4)]),
        ("matrix @ vector", lambda L, m, v: m @ v, [_r(3, 4), _r(4)]),
        ("einsum", lambda L, a, b: L.einsum("bij,kj->bik", a, b), [_r(2, 3, 4), _r(5, 4)]),
        (
            "einsum of three",
            lambda L, a, b, c: L.einsum("ij,jk,k->i", a, b, c),
            [_r(3, 4), _r(4, 5), _r(5)],
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_products_off_and_on_the_lists_as_torch(
    name: str, op: Callable[..., Any], arrays: list[np.ndarray]
) -> None:
    """mv and dot stay float32 under CPU autocast (off torch's lists) while matmul, @ and einsum
    (torch's einsum runs its bmm) compute in bfloat16: torch's dtypes, values and float32
    input gradients."""
    results = []
    for lib in (hookgrad, torch):
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        with lib.autocast("cpu", dtype=lib.bfloat16):
            out = op(lib, *leaves)
        out.float().sum().backward()
        results.append((out, [t.grad for t in leaves]))
    (got, got_grads), (expected, expected_grads) = results
    _check_same(got, expected, _RTOL.get(_name(expected.dtype), 1e-5))
    for g, e in zip(got_grads, expected_grads):
        _check_same(g, e, _RTOL["bfloat16"])


def test_einsum_takes_bfloat16_operands() -> None:
    """einsum on bfloat16 tensors (outside autocast) returns bfloat16 with torch's values,
    and bfloat16 gradients."""
    arrays = [_r(2, 3, 4), _r(2, 4, 5)]
    results = []
    for lib in (hookgrad, torch):
        leaves = [lib.tensor(a).to(lib.bfloat16).requires_grad_() for a in arrays]
        out = lib.einsum("bij,bjk->bik", *leaves)
        out.float().pow(2).sum().backward()
        results.append([out] + [t.grad for t in leaves])
    for got, expected in zip(*results):
        _check_same(got, expected, _RTOL["bfloat16"])
