"""Differential tests: ``hookgrad._foreach_*`` against ``torch._foreach_*`` (torch 2.13).

Each function runs on the same lists in both libraries, through every overload torch accepts
for it (scalar, list of scalars, 1-D tensor of scalars, single tensor, list of tensors).
Functions made of one IEEE operation per element must agree exactly; the composite ones
(``addcmul``, ``addcdiv``, ``lerp``, ``norm``, ``add`` with ``alpha``) at float32 rounding,
since torch's vectorised kernels fuse multiply-adds.
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

SHAPES = [(3, 2), (4,), (), (2, 1, 3)]


def _arrays(
    seed: int, shapes: list[tuple[int, ...]] = SHAPES, low: float = -2.0
) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(low, 2.0, s).astype(np.float32) for s in shapes]


def _lists(lib: Any, *seeds: int, low: float = -2.0) -> list[list[Any]]:
    return [[lib.tensor(a) for a in _arrays(seed, low=low)] for seed in seeds]


Program = Callable[[Any, list[list[Any]]], Any]


def _numbers(result: Any) -> list[np.ndarray]:
    return [np.asarray(t.numpy()) for t in result]


def _compare(
    program: Program, exact: bool, low: float = -2.0, seeds: tuple[int, ...] = (1, 2, 3)
) -> None:
    """Run ``program(lib, lists)`` in both libraries and compare every resulting tensor."""
    outputs = []
    for lib in (hookgrad, torch):
        lists = _lists(lib, *seeds, low=low)
        result = program(lib, lists)
        inputs = [a for x in lists for a in _numbers(x)]
        outputs.append((type(result), _numbers(result), inputs))
    (h_type, h_out, h_lists), (t_type, t_out, t_lists) = outputs
    assert h_type is t_type
    for h, t in zip([*h_out, *h_lists], [*t_out, *t_lists]):
        assert h.dtype == t.dtype and h.shape == t.shape
        if exact:
            np.testing.assert_array_equal(h, t)
        else:
            np.testing.assert_allclose(h, t, rtol=2e-6, atol=1e-6)


EXACT: dict[str, Program] = {
    "add_scalar": lambda L, x: L._foreach_add_(x[0], 0.37),
    "add_scalar_list": lambda L, x: L._foreach_add_(x[0], [0.1, -2.0, 3.5, 0.25]),
    "add_tensor_list": lambda L, x: L._foreach_add_(x[0], x[1]),
    "add_tensor": lambda L, x: L._foreach_add_(x[0], L.tensor(1.5)),
    "add_out_of_place": lambda L, x: L._foreach_add(x[0], x[1]),
    "sub_tensor_list": lambda L, x: L._foreach_sub_(x[0], x[1]),
    "mul_scalar": lambda L, x: L._foreach_mul_(x[0], 0.3),
    "mul_scalar_list": lambda L, x: L._foreach_mul_(x[0], [0.1, -2.0, 3.0, 0.7]),
    "mul_tensor_list": lambda L, x: L._foreach_mul_(x[0], x[1]),
    "mul_tensor": lambda L, x: L._foreach_mul_(x[0], L.tensor(0.3)),
    "mul_out_of_place": lambda L, x: L._foreach_mul(x[0], 0.3),
    "div_scalar": lambda L, x: L._foreach_div_(x[0], 0.7),
    "div_scalar_list": lambda L, x: L._foreach_div_(x[0], [0.1, -2.0, 3.0, 0.7]),
    "div_tensor_list": lambda L, x: L._foreach_div_(x[0], x[1]),
    "div_out_of_place": lambda L, x: L._foreach_div(x[0], x[1]),
    "maximum_scalar": lambda L, x: L._foreach_maximum_(x[0], 0.5),
    "maximum_scalar_list": lambda L, x: L._foreach_maximum_(x[0], [0.5, -1.0, 0.0, 2.0]),
    "maximum_tensor_list": lambda L, x: L._foreach_maximum_(x[0], x[1]),
    "maximum_out_of_place": lambda L, x: L._foreach_maximum(x[0], x[1]),
    "neg": lambda L, x: L._foreach_neg(x[0]),
    "neg_": lambda L, x: L._foreach_neg_(x[0]),
    "zero_": lambda L, x: L._foreach_zero_(x[0]),
}


@pytest.mark.parametrize("program", EXACT.values(), ids=EXACT.keys())
def test_single_rounding_functions_equal_torch_exactly(program: Program) -> None:
    """Functions of one IEEE operation per element give torch's floats bit for bit."""
    _compare(program, exact=True)


@pytest.mark.parametrize("name", ["sqrt", "sqrt_"])
def test_sqrt_equals_torch_exactly(name: str) -> None:
    """``_foreach_sqrt`` (and in place) of positive tensors equals torch's bit for bit."""
    _compare(lambda L, x: getattr(L, f"_foreach_{name}")(x[0]), exact=True, low=0.0)


ROUNDED: dict[str, Program] = {
    "addcmul_value_one": lambda L, x: L._foreach_addcmul_(x[0], x[1], x[2]),
    "addcdiv_value_one": lambda L, x: L._foreach_addcdiv_(x[0], x[1], x[2]),
    "add_alpha": lambda L, x: L._foreach_add_(x[0], x[1], alpha=0.3),
    "sub_alpha": lambda L, x: L._foreach_sub(x[0], x[1], alpha=-1.7),
    "addcmul_scalar": lambda L, x: L._foreach_addcmul_(x[0], x[1], x[2], 0.3),
    "addcmul_scalar_list": lambda L, x: L._foreach_addcmul_(x[0], x[1], x[2], [0.1, 2, -3, 0.5]),
    "addcmul_scalar_tensor": lambda L, x: L._foreach_addcmul_(
        x[0], x[1], x[2], L.tensor([0.1, 2.0, -3.0, 0.5])
    ),
    "addcmul_out_of_place": lambda L, x: L._foreach_addcmul(x[0], x[1], x[2], value=-0.9),
    "addcdiv_scalar": lambda L, x: L._foreach_addcdiv_(x[0], x[1], x[2], value=-0.01),
    "addcdiv_scalar_list": lambda L, x: L._foreach_addcdiv_(x[0], x[1], x[2], [1, 2, 3, 4]),
    "addcdiv_out_of_place": lambda L, x: L._foreach_addcdiv(x[0], x[1], x[2], 0.5),
    "lerp_small_weight": lambda L, x: L._foreach_lerp_(x[0], x[1], 0.1),
    "lerp_large_weight": lambda L, x: L._foreach_lerp_(x[0], x[1], 0.9),
    "lerp_scalar_list": lambda L, x: L._foreach_lerp_(x[0], x[1], [0.1, 0.6, -0.4, 1.5]),
    "lerp_tensor_weights": lambda L, x: L._foreach_lerp_(x[0], x[1], x[2]),
    "lerp_out_of_place": lambda L, x: L._foreach_lerp(x[0], x[1], 0.75),
    "norm": lambda L, x: L._foreach_norm(x[0]),
    "norm_1": lambda L, x: L._foreach_norm(x[0], 1),
    "norm_inf": lambda L, x: L._foreach_norm(x[0], float("inf")),
    "norm_3": lambda L, x: L._foreach_norm(x[0], 3.0),
}


@pytest.mark.parametrize("program", ROUNDED.values(), ids=ROUNDED.keys())
def test_composite_functions_match_torch(program: Program) -> None:
    """Composite functions agree with torch at float32 rounding, outputs and inputs alike."""
    _compare(program, exact=False)


def test_norm_in_another_dtype_matches_torch() -> None:
    """``_foreach_norm(dtype=float64)`` returns float64 norms, as torch."""
    h = hookgrad._foreach_norm(_lists(hookgrad, 1)[0], 2, dtype=hookgrad.float64)
    t = torch._foreach_norm(_lists(torch, 1)[0], 2, dtype=torch.float64)
    assert [x.dtype for x in h] == [np.float64] * len(SHAPES)
    np.testing.assert_allclose([x.item() for x in h], [x.item() for x in t], rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    data=st.data(),
    count=st.integers(1, 5),
    op=st.sampled_from(["add_", "mul_", "div_", "maximum_", "addcmul_", "addcdiv_", "lerp_"]),
    scalar=st.floats(-3, 3, width=32).filter(lambda v: v != 0),  # numpy warns on x / 0
)
def test_foreach_hypothesis(data: st.DataObject, count: int, op: str, scalar: float) -> None:
    """Any list of shapes and values: in-place results equal torch's (exact where one op)."""
    shapes = data.draw(
        st.lists(
            hnp.array_shapes(min_dims=0, max_dims=3, max_side=4), min_size=count, max_size=count
        )
    )
    elements = st.floats(-100, 100, width=32).filter(lambda v: abs(v) > 1e-3)
    arrays = [
        [data.draw(hnp.arrays(np.float32, s, elements=elements)) for s in shapes] for _ in range(3)
    ]
    with_tensors = data.draw(st.booleans(), label="tensor operand")
    results = []
    for lib in (hookgrad, torch):
        lists = [[lib.tensor(a.copy()) for a in group] for group in arrays]
        fn = getattr(lib, f"_foreach_{op}")
        if op in ("addcmul_", "addcdiv_"):
            fn(lists[0], lists[1], lists[2], scalar)
        elif op == "lerp_":
            fn(lists[0], lists[1], scalar)
        else:
            fn(lists[0], lists[1] if with_tensors else scalar)
        results.append([t.numpy().copy() for t in lists[0]])
    exact = op in ("add_", "mul_", "div_", "maximum_")
    for h, t in zip(*results):
        if exact:
            np.testing.assert_array_equal(h, t)
        else:
            np.testing.assert_allclose(h, t, rtol=1e-5, atol=1e-3)


def test_in_place_returns_its_list_and_out_of_place_a_tuple() -> None:
    """In-place functions return the very list given (as torch); the others a new tuple."""
    tensors = _lists(hookgrad, 1)[0]
    assert hookgrad._foreach_mul_(tensors, 2.0) is tensors
    result = hookgrad._foreach_mul(tensors, 2.0)
    assert isinstance(result, tuple) and result[0] is not tensors[0]


def test_in_place_bumps_each_version_once() -> None:
    """Each tensor's version counter goes up by one per in-place foreach call."""
    tensors = _lists(hookgrad, 1)[0]
    hookgrad._foreach_addcmul_(tensors, tensors, tensors, 0.5)
    hookgrad._foreach_lerp_(tensors, tensors, 0.7)
    assert [t._version for t in tensors] == [2] * len(SHAPES)


ERRORS: dict[str, Program] = {
    "tensor_lists": lambda L, x: L._foreach_add_(x[0], x[1][:2]),
    "scalar_list": lambda L, x: L._foreach_mul_(x[0], [1.0, 2.0]),
    "empty": lambda L, x: L._foreach_sqrt([]),
    "empty_in_place": lambda L, x: L._foreach_zero_([]),
    "addcmul_lists": lambda L, x: L._foreach_addcmul_(x[0], x[1], x[2][:1]),
    "addcdiv_scalars": lambda L, x: L._foreach_addcdiv_(x[0], x[1], x[2], [1.0]),
    "lerp_lists": lambda L, x: L._foreach_lerp_(x[0], x[1][:3], 0.5),
    "maximum_lists": lambda L, x: L._foreach_maximum_(x[0], x[1][1:]),
    "div_lists": lambda L, x: L._foreach_div_(x[0], x[1][:1]),
    "leaf_in_place": lambda L, x: L._foreach_mul_([L.ones(2, requires_grad=True)], 2.0),
}


@pytest.mark.parametrize("program", ERRORS.values(), ids=ERRORS.keys())
def test_errors_match_torch(program: Program) -> None:
    """Mismatched lists, empty lists and leaf writes raise torch's RuntimeError and message."""
    messages = []
    for lib in (hookgrad, torch):
        with pytest.raises(RuntimeError) as info:
            program(lib, _lists(lib, 1, 2, 3))
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_gradients_flow_through_foreach_ops_as_in_torch() -> None:
    """Gradients through in-place and out-of-place foreach ops equal torch's."""
    grads = []
    for lib in (hookgrad, torch):
        shapes = [s for s in SHAPES if s]  # hookgrad cannot yet write into a 0-dim op result
        xs = [lib.tensor(a, requires_grad=True) for a in _arrays(4, shapes)]
        ys = [lib.tensor(a, requires_grad=True) for a in _arrays(5, shapes, low=0.5)]
        work = [x * 1.0 for x in xs]
        lib._foreach_addcmul_(work, xs, ys, 0.5)
        lib._foreach_lerp_(work, ys, 0.8)
        # (torch 2.13 has no derivative for _foreach_maximum_ and a broken one for addcdiv)
        outs = lib._foreach_add(work, lib._foreach_div(xs, ys), alpha=0.5)
        sum(o.sum() for o in lib._foreach_mul(outs, lib._foreach_sqrt(ys))).backward()
        grads.append([t.grad.numpy() for t in xs + ys])
    for h, t in zip(*grads):
        np.testing.assert_allclose(h, t, rtol=1e-5, atol=1e-6)
